// Parsing YAML text from the user with bounds and plain messages: exactly one document, at most kMaxYamlDepth levels
// of lists and mappings inside each other and kMaxYamlNodes values, checked before yaml-cpp builds anything (its
// parser recurses per level and its scanner buffers a whole flow collection, gigabytes for 16 MiB of '['), and
// every yaml-cpp parser message turned into "where: what was expected" (docs/config.md, "Input limits").
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include <yaml-cpp/yaml.h>

namespace mgtrain {

inline constexpr int kMaxYamlDepth = 64;
inline constexpr std::size_t kMaxYamlNodes = 100000;

// "name:line:col" (1-based) for a mark, or just `name` for a null mark.
std::string yaml_location(const std::string& name, const YAML::Mark& mark);

// The one document of `text` (a null node when it has none: empty, or comments only). `locate` turns a mark into
// the message prefix (e.g. yaml_location). Throws UsageError: "<where>: malformed YAML: <hint> (yaml-cpp: <its
// message>)", "<where>: nesting deeper than 64 levels ...", "<where>: a second YAML document starts here ...",
// "<where>: more than 100000 values ...".
YAML::Node load_yaml_document(const std::string& text, const std::function<std::string(const YAML::Mark&)>& locate);
// The same, with messages at name:line:col.
YAML::Node load_yaml_document(const std::string& text, const std::string& name);

// What a yaml-cpp parser message (YAML::ErrorMsg) means for the writer, as "what was expected"; a generic hint for
// a message not in the table. Never empty.
std::string yaml_parser_hint(const std::string& message);

}  // namespace mgtrain
