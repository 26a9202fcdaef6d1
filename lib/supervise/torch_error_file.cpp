// Parses torch's error file (JSON is read with yaml-cpp: JSON is a subset of YAML 1.2).
#include "supervise/torch_error_file.hpp"

#include <yaml-cpp/yaml.h>

namespace mgtrain {
namespace {

constexpr std::size_t kExcerptBytes = 2000;

std::string scalar_or_empty(const YAML::Node& node) {
  if (node && node.IsScalar()) return node.Scalar();
  return "";
}

TorchErrorRecord not_understood(const std::string& text, const std::string& problem) {
  TorchErrorRecord record;
  record.problem = problem;
  record.excerpt = text.substr(0, kExcerptBytes);
  return record;
}

}  // namespace

TorchErrorRecord parse_torch_error_file(const std::string& text) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) return not_understood(text, "the error file is empty");
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& error) {
    return not_understood(text, std::string("the error file is not valid JSON: ") + error.what());
  }
  if (!root.IsMap() || !root["message"]) {
    return not_understood(text, "the error file has no \"message\" field (expected torch's error-file format)");
  }
  TorchErrorRecord record;
  YAML::Node message = root["message"];
  if (message.IsScalar()) {
    record.message = message.Scalar();
    record.timestamp = scalar_or_empty(root["timestamp"]);
    return record;
  }
  if (!message.IsMap()) return not_understood(text, "the error file's \"message\" is neither text nor an object");
  record.message = scalar_or_empty(message["message"]);
  YAML::Node extra = message["extraInfo"];
  if (extra && extra.IsMap()) {
    record.traceback = scalar_or_empty(extra["py_callstack"]);
    record.timestamp = scalar_or_empty(extra["timestamp"]);
  }
  if (record.message.empty() && record.traceback.empty()) {
    return not_understood(text, "the error file's \"message\" object has neither \"message\" nor \"extraInfo.py_callstack\"");
  }
  return record;
}

}  // namespace mgtrain
