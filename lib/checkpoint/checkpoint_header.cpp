// Building and parsing a checkpoint file's JSON header (see checkpoint_header.hpp).
#include "checkpoint/checkpoint_header.hpp"
#include "util/json_text.hpp"
#include "util/strings.hpp"

#include <cstdint>
#include <optional>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace mgtrain::checkpoint_header {
namespace {

using Json = nlohmann::ordered_json;

[[noreturn]] void corrupt(const std::string& path, const std::string& what) {
  throw CorruptCheckpoint(fmt::format("{}: {}", path, what));
}

// A value as a message shows it: strings quoted, numbers and literals as written, containers by kind.
std::string describe(const Json& value) {
  if (value.is_array()) return "an array";
  if (value.is_object()) return "an object";
  return json_text(value);
}

std::optional<std::uint64_t> as_uint(const Json& value) {
  if (!value.is_number_unsigned()) return std::nullopt;
  return value.get<std::uint64_t>();
}

// Rejects a key that appears twice in one object (nlohmann would keep the last silently). Messages name the
// object: "header key K", "__metadata__ key K", "tensor "T": key K".
class UniqueKeys {
 public:
  explicit UniqueKeys(const std::string& path) : path_(path) {}

  bool operator()(int /*depth*/, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        open_.push_back({{}, open_.size() == 1 ? top_key_ : open_.empty() ? "" : open_.back().owner});
        break;
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        if (!open_.empty()) open_.pop_back();
        break;
      case Json::parse_event_t::key: {
        const std::string& key = parsed.get_ref<const std::string&>();
        if (open_.size() == 1) top_key_ = key;
        if (!open_.empty() && !open_.back().keys.insert(key).second) duplicate(key);
        break;
      }
      case Json::parse_event_t::value:
        break;
    }
    return true;
  }

 private:
  [[noreturn]] void duplicate(const std::string& key) const {
    const std::string& owner = open_.back().owner;
    if (open_.size() == 1) corrupt(path_, fmt::format("header key {} appears twice", json_string(key)));
    if (owner == kMetadataKey) corrupt(path_, fmt::format("__metadata__ key {} appears twice", json_string(key)));
    corrupt(path_, fmt::format("tensor {}: key {} appears twice", json_string(owner), json_string(key)));
  }

  struct Open {
    std::set<std::string> keys;
    std::string owner;  // the top-level key this container is (inside of)
  };
  const std::string& path_;
  std::vector<Open> open_;
  std::string top_key_;
};

void parse_metadata(const std::string& path, const Json& node, Parsed& parsed) {
  if (!node.is_object()) corrupt(path, fmt::format("__metadata__ is {}, not an object", describe(node)));
  for (const auto& [key, value] : node.items()) {
    if (!value.is_string()) {
      corrupt(path, fmt::format("__metadata__ value of {} is {}, not a string", json_string(key), describe(value)));
    }
    if (key == kFormatKey) {
      parsed.format = value.get<std::string>();
    } else if (key != kChecksumKey) {
      parsed.metadata.emplace(key, value.get<std::string>());
    }
  }
}

PlacedTensor parse_tensor(const std::string& path, const std::string& name, const Json& node) {
  const auto fail = [&](const std::string& what) {
    corrupt(path, fmt::format("tensor {}: {}", json_string(name), what));
  };
  if (!node.is_object()) fail(fmt::format("{}, not an object", describe(node)));
  PlacedTensor tensor;
  TensorEntry& entry = tensor.entry;
  entry.name = name;
  bool have_dtype = false, have_shape = false, have_offsets = false;
  for (const auto& [key, value] : node.items()) {
    if (key == "dtype") {
      if (!value.is_string() || checkpoint_dtype_size(value.get_ref<const std::string&>()) == 0) {
        fail(fmt::format("unknown dtype {}", describe(value)));
      }
      entry.dtype = value.get<std::string>();
      have_dtype = true;
    } else if (key == "shape") {
      if (!value.is_array()) fail(fmt::format("shape is {}, not an array", describe(value)));
      for (const Json& dim : value) {
        const auto size = as_uint(dim);
        if (!size || *size > static_cast<std::uint64_t>(INT64_MAX))
          fail(fmt::format("invalid dimension {} in shape", describe(dim)));
        entry.shape.push_back(static_cast<std::int64_t>(*size));
      }
      have_shape = true;
    } else if (key == "data_offsets") {
      std::optional<std::uint64_t> b, e;
      if (value.is_array() && value.size() == 2) b = as_uint(value[0]), e = as_uint(value[1]);
      if (!b || !e || *b > *e) fail("data_offsets is not [begin, end] with 0 <= begin <= end");
      tensor.begin = *b;
      tensor.end = *e;
      have_offsets = true;
    } else {
      fail(fmt::format("unexpected key {}", json_string(key)));
    }
  }
  if (!have_dtype || !have_shape || !have_offsets) {
    fail(fmt::format("missing {}", !have_dtype ? "dtype" : !have_shape ? "shape" : "data_offsets"));
  }
  const auto expected = byte_size(entry.shape, checkpoint_dtype_size(entry.dtype));
  const std::uint64_t span = tensor.end - tensor.begin;
  if (!expected || *expected != span) {
    fail(fmt::format("data_offsets [{}, {}] span {} bytes, shape {} of {} needs {}", tensor.begin, tensor.end, span,
                     shape_text(entry.shape), entry.dtype, expected ? fmt::format("{}", *expected) : "more than 2^64"));
  }
  entry.nbytes = span;
  return tensor;
}

}  // namespace

std::optional<std::uint64_t> byte_size(const std::vector<std::int64_t>& shape, std::size_t element_size) {
  std::uint64_t total = element_size;
  for (std::int64_t dim : shape) {
    if (dim < 0) return std::nullopt;
    if (__builtin_mul_overflow(total, static_cast<std::uint64_t>(dim), &total)) return std::nullopt;
  }
  return total;
}

std::string build(const std::map<std::string, std::string>& metadata, const std::vector<TensorRecord>& tensors) {
  Json meta = Json::object();
  meta[kChecksumKey] = std::string(kZeroDigits);  // first, so the digits sit at a fixed offset
  meta[kFormatKey] = kFormatVersion;
  for (const auto& [key, value] : metadata) meta[key] = value;
  Json root = Json::object();
  root[kMetadataKey] = std::move(meta);
  std::uint64_t offset = 0;
  for (const TensorRecord& tensor : tensors) {
    Json info = Json::object();
    info["dtype"] = tensor.dtype;
    info["shape"] = tensor.shape;
    info["data_offsets"] = Json::array({offset, offset + tensor.nbytes});
    root[tensor.name] = std::move(info);
    offset += tensor.nbytes;
  }
  std::string json = root.dump();
  json.append((8 - json.size() % 8) % 8, ' ');  // 8 + size is a multiple of 8
  std::string header(8, '\0');
  for (int i = 0; i < 8; ++i) header[i] = static_cast<char>(static_cast<std::uint64_t>(json.size()) >> (8 * i));
  return header + json;
}

Parsed parse(const std::string& path, std::string_view json) {
  Json root;
  try {
    root = Json::parse(json.begin(), json.end(), UniqueKeys(path));
  } catch (const Json::exception& e) {
    corrupt(path, fmt::format("the header is not valid JSON: {}", e.what()));
  }
  if (!root.is_object()) corrupt(path, "the header is not a JSON object");
  Parsed parsed;
  for (const auto& [name, value] : root.items()) {
    if (name == kMetadataKey) {
      parse_metadata(path, value, parsed);
    } else {
      parsed.tensors.push_back(parse_tensor(path, name, value));
    }
  }
  return parsed;
}

}  // namespace mgtrain::checkpoint_header
