// A minimal streaming JSON writer (objects, arrays, strings, numbers, booleans, null) with correct
// string escaping; enough for failure.json without a JSON library.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mgtrain {

// "text" with JSON escapes applied (control characters, quotes, backslashes; invalid UTF-8 bytes
// become U+FFFD so the output is always valid JSON).
std::string json_quote(std::string_view text);

class JsonWriter {
 public:
  explicit JsonWriter(int indent = 2) : indent_(indent) {}

  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view name);  // inside an object, before each value
  JsonWriter& value(std::string_view text);
  JsonWriter& value(const char* text) { return value(std::string_view(text)); }
  JsonWriter& value(long long number);
  JsonWriter& value(int number) { return value(static_cast<long long>(number)); }
  JsonWriter& value(double number);
  JsonWriter& value(bool flag);
  JsonWriter& null();

  const std::string& text() const { return out_; }

 private:
  void before_value();
  void newline();
  void close_container(char closing);

  int indent_;
  std::string out_;
  std::vector<bool> first_in_container_;
  bool after_key_ = false;
};

}  // namespace mgtrain
