// The compared config lines and their hash.
#include "multinode/job_fingerprint.hpp"

#include <map>

#include <fmt/format.h>

#include "config/config_schema.hpp"
#include "util/strings.hpp"
#include "util/xxhash64.hpp"

namespace mgtrain {
namespace {

std::string value_text(const YAML::Node& node) {
  if (node.IsSequence()) {
    std::string text;
    for (std::size_t i = 0; i < node.size(); ++i) text += (i ? "," : "") + node[i].Scalar();
    return text;
  }
  return node.Scalar();
}

void replace_all(std::string& text, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

std::map<std::string, std::string> parse_lines(const std::string& lines) {
  std::map<std::string, std::string> values;
  for (const std::string& line : split_lines(lines)) {
    std::size_t equals = line.find('=');
    if (equals != std::string::npos) values[line.substr(0, equals)] = line.substr(equals + 1);
  }
  return values;
}

}  // namespace

JobFingerprint job_fingerprint(const Config& config) {
  JobFingerprint fingerprint;
  for (const KeyDef& key : config_schema()) {
    if (key.section() == "launch") continue;
    std::string value = value_text(key.read(config));
    replace_all(value, "\n", "\\n");
    fingerprint.lines += key.path + "=" + value + "\n";
  }
  fingerprint.hash = fmt::format("{:016x}", xxhash64(fingerprint.lines.data(), fingerprint.lines.size()));
  return fingerprint;
}

JobFingerprint job_fingerprint(const LoadedConfig& loaded) {
  return job_fingerprint(loaded.job_view ? *loaded.job_view : loaded.config);
}

std::string with_adopted_run_id(const std::string& lines, const std::string& generated, const std::string& adopted) {
  std::string result = lines;
  replace_all(result, generated, adopted);
  return result;
}

std::vector<std::string> fingerprint_differences(const std::string& ours, const std::string& theirs,
                                                 std::size_t limit) {
  std::map<std::string, std::string> a = parse_lines(ours), b = parse_lines(theirs);
  std::vector<std::string> differences;
  auto show = [](const std::map<std::string, std::string>& values, const std::string& key) {
    auto found = values.find(key);
    if (found == values.end()) return std::string("(unknown key)");
    return found->second.empty() ? std::string("''") : found->second;
  };
  std::map<std::string, bool> keys;
  for (const auto& [key, value] : a) keys[key] = true;
  for (const auto& [key, value] : b) keys[key] = true;
  // Schema order reads better than alphabetical: walk the schema first, then anything unknown.
  std::vector<std::string> ordered;
  for (const KeyDef& key : config_schema()) {
    if (keys.erase(key.path)) ordered.push_back(key.path);
  }
  for (const auto& [key, unused] : keys) ordered.push_back(key);
  for (const std::string& key : ordered) {
    if (differences.size() >= limit) break;
    if (show(a, key) != show(b, key))
      differences.push_back(fmt::format("{}: {} vs {}", key, show(a, key), show(b, key)));
  }
  return differences;
}

}  // namespace mgtrain
