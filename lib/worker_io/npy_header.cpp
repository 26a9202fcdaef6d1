// parse_npy_header: a small parser for the Python dict literal of a .npy header and the checks of its keys,
// dtype, order and shape (see npy_header.hpp).
#include "worker_io/npy_header.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "util/error.hpp"

namespace mgtrain {
namespace {

constexpr int kMaxNesting = 16;  // of tuples/lists/dicts in the header
constexpr std::string_view kReads = "mgtrain reads bool, integer and float arrays";

// `text` with bytes outside printable ASCII as \xNN, cut after `limit` bytes.
std::string printable(std::string_view text, std::size_t limit = 200) {
  std::string out;
  for (std::size_t i = 0; i < text.size() && i < limit; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (text.size() > limit) out += "...";
  return out;
}

// A Python literal as numpy writes them in .npy headers: str, int, True/False/None, tuple, list, dict.
struct Literal {
  enum class Kind { String, Integer, Bool, None, Tuple, List, Dict };
  Kind kind = Kind::None;
  std::string_view source;     // the literal's text in the header
  std::string string;          // String
  std::int64_t integer = 0;    // Integer
  bool boolean = false;        // Bool
  std::vector<Literal> items;  // Tuple, List; Dict: key, value, key, value, ...
};

// Parses the header dict. Every error is a UsageError naming the file, what was expected and where.
class LiteralParser {
 public:
  LiteralParser(const std::string& path, std::string_view text) : path_(path), text_(text) {}

  Literal parse_header() {
    skip_space();
    if (peek() != '{') fail("expected a dict '{...}'");
    Literal header = parse_value(0);
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the dict");
    return header;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    const std::string where =
        pos_ < text_.size() ? fmt::format("at \"{}\"", printable(text_.substr(pos_), 40)) : "at the end";
    throw UsageError(
        fmt::format("{}: damaged .npy header: {} {} (the header: {})", path_, what, where, printable(text_)));
  }

  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  static bool is_digit(char c) { return c >= '0' && c <= '9'; }
  static bool is_name_char(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

  Literal parse_value(int depth) {
    skip_space();
    if (depth > kMaxNesting) fail(fmt::format("nested deeper than {} levels", kMaxNesting));
    const std::size_t start = pos_;
    Literal value;
    const char c = peek();
    if (c == '\'' || c == '"') {
      value = parse_string();
    } else if (is_digit(c) || c == '-') {
      value = parse_integer();
    } else if (c == '(') {
      value = parse_sequence(depth, Literal::Kind::Tuple, ')');
    } else if (c == '[') {
      value = parse_sequence(depth, Literal::Kind::List, ']');
    } else if (c == '{') {
      value = parse_dict(depth);
    } else if (is_name_char(c)) {
      while (is_name_char(peek())) ++pos_;
      const std::string_view name = text_.substr(start, pos_ - start);
      if (name == "True" || name == "False") {
        value.kind = Literal::Kind::Bool;
        value.boolean = name == "True";
      } else if (name != "None") {
        pos_ = start;
        fail(fmt::format("unknown name '{}' (expected a string, number, True, False, None, tuple or list)",
                         printable(name)));
      }
    } else {
      fail("expected a value");
    }
    value.source = text_.substr(start, pos_ - start);
    return value;
  }

  Literal parse_string() {
    const char quote = text_[pos_++];
    Literal value;
    value.kind = Literal::Kind::String;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) ++pos_;  // \\, \', \": the next character as it is
      value.string += text_[pos_++];
    }
    if (pos_ == text_.size()) fail("unterminated string");
    ++pos_;
    return value;
  }

  Literal parse_integer() {
    Literal value;
    value.kind = Literal::Kind::Integer;
    const bool negative = peek() == '-';
    if (negative) ++pos_;
    if (!is_digit(peek())) fail("expected digits");
    std::uint64_t magnitude = 0;
    const std::uint64_t limit = std::uint64_t{std::numeric_limits<std::int64_t>::max()} + (negative ? 1 : 0);
    while (is_digit(peek())) {
      const auto digit = static_cast<std::uint64_t>(text_[pos_] - '0');
      if (magnitude > (limit - digit) / 10) fail("integer out of the 64-bit range");
      magnitude = magnitude * 10 + digit;
      ++pos_;
    }
    if (peek() == 'L' || peek() == 'l') ++pos_;  // Python 2's long, in headers numpy wrote there
    value.integer = negative ? static_cast<std::int64_t>(0 - magnitude) : static_cast<std::int64_t>(magnitude);
    return value;
  }

  // (a, b), [a, b] with an optional trailing comma; (a) without a comma is just a, as in Python.
  Literal parse_sequence(int depth, Literal::Kind kind, char close) {
    ++pos_;
    Literal value;
    value.kind = kind;
    bool comma = false;
    for (;;) {
      skip_space();
      if (peek() == close) break;
      value.items.push_back(parse_value(depth + 1));
      skip_space();
      if (peek() == ',') {
        ++pos_;
        comma = true;
      } else if (peek() != close) {
        fail(fmt::format("expected ',' or '{}'", close));
      }
    }
    ++pos_;
    if (kind == Literal::Kind::Tuple && value.items.size() == 1 && !comma) return std::move(value.items[0]);
    return value;
  }

  Literal parse_dict(int depth) {
    ++pos_;
    Literal value;
    value.kind = Literal::Kind::Dict;
    for (;;) {
      skip_space();
      if (peek() == '}') break;
      value.items.push_back(parse_value(depth + 1));
      skip_space();
      if (peek() != ':') fail("expected ':' after a dict key");
      ++pos_;
      value.items.push_back(parse_value(depth + 1));
      skip_space();
      if (peek() == ',') {
        ++pos_;
      } else if (peek() != '}') {
        fail("expected ',' or '}'");
      }
    }
    ++pos_;
    return value;
  }

  const std::string& path_;
  std::string_view text_;
  std::size_t pos_ = 0;
};

struct DescrEntry {
  std::string_view code;  // kind letter and size, as in '<f4'
  NpyType type;
};
constexpr DescrEntry kDescrs[] = {
    {"b1", NpyType::Bool},   {"i1", NpyType::Int8},    {"u1", NpyType::UInt8},   {"i2", NpyType::Int16},
    {"u2", NpyType::UInt16}, {"i4", NpyType::Int32},   {"u4", NpyType::UInt32},  {"i8", NpyType::Int64},
    {"u8", NpyType::UInt64}, {"f2", NpyType::Float16}, {"f4", NpyType::Float32}, {"f8", NpyType::Float64},
};

// What a dtype kind letter numpy knows is, for the refusal.
std::string_view kind_description(char kind) {
  switch (kind) {
    case 'U':
      return "strings";
    case 'S':
    case 'a':
      return "byte strings";
    case 'O':
      return "Python objects";
    case 'c':
      return "complex numbers";
    case 'V':
      return "raw bytes or records";
    case 'M':
      return "datetimes";
    case 'm':
      return "timedeltas";
    case 'f':
      return "a float size other than 2, 4 or 8 bytes";
    case 'i':
    case 'u':
      return "an integer size other than 1, 2, 4 or 8 bytes";
    case 'b':
      return "a bool size other than 1 byte";
    default:
      return "";
  }
}

NpyType parse_descr(const std::string& path, const Literal& descr) {
  if (descr.kind == Literal::Kind::List) {
    throw UsageError(fmt::format(
        "{}: unsupported dtype {} (a structured dtype with named fields); {}: save each field as its own array", path,
        printable(descr.source), kReads));
  }
  if (descr.kind != Literal::Kind::String) {
    throw UsageError(
        fmt::format("{}: unsupported dtype {} in the .npy header; {}", path, printable(descr.source), kReads));
  }
  const std::string& text = descr.string;
  const char order = !text.empty() && std::string_view("<>|=").find(text[0]) != std::string_view::npos ? text[0] : '=';
  const std::string_view code = std::string_view(text).substr(text.empty() || order != text[0] ? 0 : 1);
  for (const DescrEntry& entry : kDescrs) {
    if (entry.code != code) continue;
    if (order == '>' && npy_type_size(entry.type) > 1) {
      throw UsageError(
          fmt::format("{}: big-endian dtype {}; mgtrain reads little-endian arrays: save arr.astype('<{}') instead",
                      path, printable(text), code));
    }
    return entry.type;
  }
  // A kind letter alone or followed by a size ('|O', '<U5', '<M8[ns]'), not a name like 'float32'.
  const bool typestr = code.size() == 1 || (code.size() > 1 && code[1] >= '0' && code[1] <= '9');
  const std::string_view kind = typestr ? kind_description(code[0]) : std::string_view();
  throw UsageError(fmt::format("{}: unsupported dtype {}{}; {}", path, printable(text),
                               kind.empty() ? "" : fmt::format(" ({})", kind), kReads));
}

// The dict's value for `key`, or nullptr.
const Literal* find_key(const Literal& dict, std::string_view key) {
  for (std::size_t i = 0; i + 1 < dict.items.size(); i += 2) {
    if (dict.items[i].kind == Literal::Kind::String && dict.items[i].string == key) return &dict.items[i + 1];
  }
  return nullptr;
}

}  // namespace

NpyHeader parse_npy_header(const std::string& path, std::string_view text) {
  const Literal dict = LiteralParser(path, text).parse_header();
  constexpr std::string_view kKeys[] = {"descr", "fortran_order", "shape"};
  for (std::size_t i = 0; i < dict.items.size(); i += 2) {
    const Literal& key = dict.items[i];
    bool known = false;
    for (std::string_view k : kKeys) known = known || (key.kind == Literal::Kind::String && key.string == k);
    if (!known) {
      throw UsageError(fmt::format(
          "{}: unexpected key {} in the .npy header (numpy writes 'descr', 'fortran_order' and 'shape'): {}", path,
          printable(key.source), printable(text)));
    }
    for (std::size_t j = 0; j < i; j += 2) {
      if (dict.items[j].string == key.string) {
        throw UsageError(
            fmt::format("{}: the .npy header has the key '{}' twice: {}", path, key.string, printable(text)));
      }
    }
  }
  for (std::string_view k : kKeys) {
    if (!find_key(dict, k)) {
      throw UsageError(
          fmt::format("{}: the .npy header has no '{}' key (numpy writes 'descr', 'fortran_order' and "
                      "'shape'): {}",
                      path, k, printable(text)));
    }
  }

  NpyHeader header;
  header.type = parse_descr(path, *find_key(dict, "descr"));

  const Literal& fortran = *find_key(dict, "fortran_order");
  if (fortran.kind != Literal::Kind::Bool) {
    throw UsageError(fmt::format("{}: 'fortran_order' is {} in the .npy header, expected True or False", path,
                                 printable(fortran.source)));
  }
  if (fortran.boolean) {
    throw UsageError(
        fmt::format("{}: the array is stored in Fortran (column-major) order; mgtrain reads C order: "
                    "save numpy.ascontiguousarray(arr) instead",
                    path));
  }

  const Literal& shape = *find_key(dict, "shape");
  if (shape.kind != Literal::Kind::Tuple) {
    throw UsageError(fmt::format("{}: 'shape' is {} in the .npy header, expected a tuple of integers like (5, 3)", path,
                                 printable(shape.source)));
  }
  for (const Literal& dim : shape.items) {
    if (dim.kind != Literal::Kind::Integer || dim.integer < 0) {
      throw UsageError(fmt::format("{}: shape {} has the dimension {}; dimensions are integers >= 0", path,
                                   printable(shape.source), printable(dim.source)));
    }
    header.shape.push_back(dim.integer);
  }
  if (header.shape.empty()) {
    throw UsageError(
        fmt::format("{}: a 0-d array (shape ()) of {}; mgtrain needs at least one dimension, the "
                    "samples: save numpy.atleast_1d(arr) or stack the samples into one array",
                    path, npy_type_name(header.type)));
  }
  return header;
}

}  // namespace mgtrain
