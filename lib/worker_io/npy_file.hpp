// Reading NumPy .npy files without torch or Python: NpyFile maps one file read-only and checks its header (format
// versions 1.0-3.0, a little-endian bool/integer/float dtype, C order, at least one dimension, exactly the data the
// shape needs), so a data set can train on arrays people saved with numpy.save. Everything else is refused with a
// UsageError that names the file, what is wrong and what would work.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mgtrain {

// The element types mgtrain reads: numpy's bool, integer and float dtypes, little-endian.
enum class NpyType { Bool, Int8, UInt8, Int16, UInt16, Int32, UInt32, Int64, UInt64, Float16, Float32, Float64 };

// numpy's name of the type: "bool", "int8", ..., "float64".
const char* npy_type_name(NpyType type);
// Bytes per element: 1, 2, 4 or 8.
std::size_t npy_type_size(NpyType type);
// A shape as Python writes a tuple: "()", "(5,)", "(5, 3)".
std::string npy_shape_text(const std::vector<std::int64_t>& shape);

// One .npy file, mapped read-only (PROT_READ, MAP_PRIVATE) for as long as the NpyFile lives. Move-only. The data is
// used in place, not copied; a file truncated by someone else while mapped would fault (SIGBUS) on access.
class NpyFile {
 public:
  // Opens, checks and maps `path`. Throws SystemError when the file cannot be opened, examined, read or mapped, and
  // UsageError (naming the path, the problem and what is expected) for anything that is not a .npy file mgtrain
  // reads: wrong magic, unknown version, damaged or oversized header, unsupported dtype (big-endian, strings,
  // objects, complex, structured, ...), fortran_order True, a 0-d array, a shape whose size overflows, data
  // shorter or longer than the shape needs, data not aligned to its element size.
  static NpyFile open(const std::string& path);

  NpyFile(NpyFile&& other) noexcept;
  NpyFile& operator=(NpyFile&& other) noexcept;
  NpyFile(const NpyFile&) = delete;
  NpyFile& operator=(const NpyFile&) = delete;
  ~NpyFile();

  const std::string& path() const { return path_; }
  NpyType type() const { return type_; }
  // At least one dimension; every dimension >= 0.
  const std::vector<std::int64_t>& shape() const { return shape_; }
  // shape()[0]: the number of samples.
  std::int64_t rows() const { return shape_[0]; }
  // The product of shape()[1:] (1 for a 1-d array): elements per sample.
  std::int64_t row_elements() const { return row_elements_; }
  // The first element, C order, aligned to the element size; nullptr when data_bytes() is 0 (nothing is mapped).
  const void* data() const { return data_; }
  // rows() * row_elements() * npy_type_size(type()).
  std::size_t data_bytes() const { return data_bytes_; }

 private:
  NpyFile() = default;
  void unmap();

  std::string path_;
  NpyType type_ = NpyType::Float32;
  std::vector<std::int64_t> shape_;
  std::int64_t row_elements_ = 0;
  void* mapping_ = nullptr;  // the whole file, or nullptr
  std::size_t mapping_bytes_ = 0;
  const void* data_ = nullptr;
  std::size_t data_bytes_ = 0;
};

}  // namespace mgtrain
