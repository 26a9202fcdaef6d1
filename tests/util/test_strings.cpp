// The small text helpers every library shares: prefixes and suffixes, shapes, JSON strings, durations.
#include <catch2/catch.hpp>

#include "util/json_text.hpp"
#include "util/strings.hpp"
#include "util/time_format.hpp"

using namespace mgtrain;

TEST_CASE("prefixes and suffixes, including empty and longer-than-text ones", "[strings]") {
  CHECK(starts_with("checkpoint-step000000012.safetensors", "checkpoint-step"));
  CHECK(starts_with("abc", ""));
  CHECK(starts_with("", ""));
  CHECK_FALSE(starts_with("ab", "abc"));
  CHECK_FALSE(starts_with("xabc", "abc"));
  CHECK(ends_with("curves.svg", ".svg"));
  CHECK(ends_with("abc", ""));
  CHECK_FALSE(ends_with("svg", ".svg"));
  CHECK_FALSE(ends_with("curves.svg.png", ".svg"));
}

TEST_CASE("text cut into lines: the last may lack its terminator, empty lines stay", "[strings]") {
  using Lines = std::vector<std::string>;
  CHECK(split_lines("a\n\nb") == Lines{"a", "", "b"});
  CHECK(split_lines("a\nb\n") == Lines{"a", "b"});
  CHECK(split_lines("\n") == Lines{""});
  CHECK(split_lines("").empty());
  CHECK(split_lines(std::string("mgtrain\0launch\0", 15), '\0') == Lines{"mgtrain", "launch"});
}

TEST_CASE("a shape as text", "[strings]") {
  CHECK(shape_text({2, 3}) == "[2, 3]");
  CHECK(shape_text({}) == "[]");
  CHECK(shape_text({-1}) == "[-1]");
}

TEST_CASE("a JSON string escapes quotes, backslashes and control characters, and replaces invalid UTF-8",
          "[strings][json]") {
  CHECK(json_string("plain") == "\"plain\"");
  CHECK(json_string("a\"b\\c\n\t\x01") == "\"a\\\"b\\\\c\\n\\t\\u0001\"");
  CHECK(json_string("\xc3\xa9") == "\"\xc3\xa9\"");  // valid UTF-8 stays as it is
  CHECK(json_string("x\xff"
                    "y") == "\"x\xef\xbf\xbdy\"");                // an invalid byte becomes U+FFFD
  CHECK(json_string(std::string("a\0b", 3)) == "\"a\\u0000b\"");  // an embedded NUL is kept, escaped
}

TEST_CASE("durations in the largest two units", "[strings][time]") {
  CHECK(format_duration(44.6) == "45s");
  CHECK(format_duration(187) == "3m07s");
  CHECK(format_duration(7500) == "2h05m");
  CHECK(format_duration(93784) == "1d02h");
  CHECK(format_duration(-1) == "?");
  CHECK(format_duration(1.0 / 0.0) == "?");
  CHECK(format_duration(44.64, DurationPrecision::Tenths) == "44.6s");
  CHECK(format_duration(59.96, DurationPrecision::Tenths) == "1m00s");
  CHECK(format_duration(187, DurationPrecision::Tenths) == "3m07s");
  CHECK(format_seconds(30) == "30 s");
  CHECK(format_seconds(2.5) == "2.5 s");
}

TEST_CASE("a line cut to a byte limit ends with ..., never inside a UTF-8 character", "[strings]") {
  CHECK(cut_with_ellipsis("short", 5) == "short");
  CHECK(cut_with_ellipsis("a longer line", 8) == "a lon...");
  // "\xce\xa9" is one character (Omega): a cut inside it moves to its start.
  CHECK(cut_with_ellipsis("ab\xce\xa9"
                          "cdef",
                          6) == "ab...");
  CHECK(cut_with_ellipsis("abc\xce\xa9"
                          "def",
                          6) == "abc...");
  CHECK(cut_with_ellipsis("abcdef", 2) == "...");  // no room but for the mark
}
