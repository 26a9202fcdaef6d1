// Parses torch's error file (nlohmann::json).
#include "elastic/torch_error_file.hpp"

#include <nlohmann/json.hpp>

namespace mgtrain {
namespace {

using nlohmann::json;

constexpr std::size_t kExcerptBytes = 2000;

// A string as it is, a number or boolean as written ("timestamp": 1700000001); anything else "".
std::string scalar_or_empty(const json& object, const char* key) {
  auto found = object.find(key);
  if (found == object.end()) return "";
  if (found->is_string()) return found->get<std::string>();
  if (found->is_number() || found->is_boolean()) return found->dump();
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
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& error) {
    return not_understood(text, std::string("the error file is not valid JSON: ") + error.what());
  }
  if (!root.is_object() || !root.contains("message")) {
    return not_understood(text, "the error file has no \"message\" field (expected torch's error-file format)");
  }
  TorchErrorRecord record;
  const json& message = root["message"];
  if (message.is_string() || message.is_number() || message.is_boolean()) {
    record.message = scalar_or_empty(root, "message");
    record.timestamp = scalar_or_empty(root, "timestamp");
    return record;
  }
  if (!message.is_object()) return not_understood(text, "the error file's \"message\" is neither text nor an object");
  record.message = scalar_or_empty(message, "message");
  auto extra = message.find("extraInfo");
  if (extra != message.end() && extra->is_object()) {
    record.traceback = scalar_or_empty(*extra, "py_callstack");
    record.timestamp = scalar_or_empty(*extra, "timestamp");
  }
  if (record.message.empty() && record.traceback.empty()) {
    return not_understood(text,
                          "the error file's \"message\" object has neither \"message\" nor \"extraInfo.py_callstack\"");
  }
  return record;
}

}  // namespace mgtrain
