// The .npy reader: files built byte by byte (good ones of every dtype and header style, and each kind of damage or
// unsupported content it must refuse with a clear message), and real files written by numpy in the torch 2 venv.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/npy_bytes.hpp"
#include "support/temp_dir.hpp"
#include "util/error.hpp"
#include "worker_io/npy_file.hpp"

using Catch::Matchers::Contains;
using mgtrain::NpyFile;
using mgtrain::NpyType;
using mgtrain::testing::TempDir;
using namespace mgtrain::testing::npy;

namespace {

template <typename T>
std::vector<T> values_of(const NpyFile& file) {
  REQUIRE(file.data_bytes() % sizeof(T) == 0);
  std::vector<T> out(file.data_bytes() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), file.data(), file.data_bytes());
  return out;
}

// The UsageError message NpyFile::open gives for `bytes` (fails the test when it opens or throws something else).
std::string refusal(const TempDir& dir, const std::string& bytes) {
  const std::string path = dir / "bad.npy";
  write_bytes(path, bytes);
  try {
    NpyFile::open(path);
  } catch (const mgtrain::UsageError& error) {
    const std::string message = error.what();
    CHECK_THAT(message, Contains(path + ": "));
    return message;
  }
  FAIL("opened without a UsageError");
  return "";
}

}  // namespace

TEST_CASE("npy: a float32 matrix, read in place") {
  const TempDir dir("mgtrain-npy");
  const std::vector<float> values{1.5f, -2.f, 3.25f, 0.f, 1e-3f, 7.f};
  write_bytes(dir / "x.npy", npy_bytes(dict_text("<f4", "(2, 3)"), raw(values)));
  const NpyFile file = NpyFile::open(dir / "x.npy");
  CHECK(file.path() == dir / "x.npy");
  CHECK(file.type() == NpyType::Float32);
  CHECK(file.shape() == std::vector<std::int64_t>{2, 3});
  CHECK(file.rows() == 2);
  CHECK(file.row_elements() == 3);
  CHECK(file.data_bytes() == 24);
  CHECK(reinterpret_cast<std::uintptr_t>(file.data()) % 64 == 0);  // the data offset is 64-aligned
  CHECK(values_of<float>(file) == values);
}

TEST_CASE("npy: every supported dtype, its numpy name and size") {
  const TempDir dir("mgtrain-npy");
  struct Case {
    std::string descr;
    NpyType type;
    std::string name;
    std::size_t size;
  };
  const std::vector<Case> cases{
      {"|b1", NpyType::Bool, "bool", 1},       {"|i1", NpyType::Int8, "int8", 1},
      {"|u1", NpyType::UInt8, "uint8", 1},     {"<i2", NpyType::Int16, "int16", 2},
      {"<u2", NpyType::UInt16, "uint16", 2},   {"<i4", NpyType::Int32, "int32", 4},
      {"<u4", NpyType::UInt32, "uint32", 4},   {"<i8", NpyType::Int64, "int64", 8},
      {"<u8", NpyType::UInt64, "uint64", 8},   {"<f2", NpyType::Float16, "float16", 2},
      {"<f4", NpyType::Float32, "float32", 4}, {"<f8", NpyType::Float64, "float64", 8},
      {"=f8", NpyType::Float64, "float64", 8}, {"<u1", NpyType::UInt8, "uint8", 1},
      {">u1", NpyType::UInt8, "uint8", 1},  // byte order is moot for one byte
  };
  for (const Case& c : cases) {
    INFO(c.descr);
    write_bytes(dir / "x.npy", npy_bytes(dict_text(c.descr, "(3,)"), std::string(3 * c.size, '\x01')));
    const NpyFile file = NpyFile::open(dir / "x.npy");
    CHECK(file.type() == c.type);
    CHECK(mgtrain::npy_type_name(file.type()) == c.name);
    CHECK(mgtrain::npy_type_size(file.type()) == c.size);
    CHECK(file.data_bytes() == 3 * c.size);
  }
}

TEST_CASE("npy: values of int64, uint8, bool, float64 and float16 arrays of several shapes") {
  const TempDir dir("mgtrain-npy");
  const std::vector<std::int64_t> longs{-1, 0, 1, 1LL << 40};
  write_bytes(dir / "a.npy", npy_bytes(dict_text("<i8", "(4,)"), raw(longs)));
  const NpyFile a = NpyFile::open(dir / "a.npy");
  CHECK(a.shape() == std::vector<std::int64_t>{4});
  CHECK(a.row_elements() == 1);
  CHECK(values_of<std::int64_t>(a) == longs);

  std::vector<std::uint8_t> bytes(2 * 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(i * 11);
  write_bytes(dir / "b.npy", npy_bytes(dict_text("|u1", "(2, 3, 4)"), raw(bytes)));
  const NpyFile b = NpyFile::open(dir / "b.npy");
  CHECK(b.rows() == 2);
  CHECK(b.row_elements() == 12);
  CHECK(values_of<std::uint8_t>(b) == bytes);

  const std::vector<std::uint8_t> flags{1, 0, 0, 1, 1};
  write_bytes(dir / "c.npy", npy_bytes(dict_text("|b1", "(5, 1)"), raw(flags)));
  CHECK(values_of<std::uint8_t>(NpyFile::open(dir / "c.npy")) == flags);

  const std::vector<double> doubles{0.1, -1e300, 3.0};
  write_bytes(dir / "d.npy", npy_bytes(dict_text("<f8", "(1, 3)"), raw(doubles)));
  CHECK(values_of<double>(NpyFile::open(dir / "d.npy")) == doubles);

  const std::vector<std::uint16_t> halves{0x3c00, 0xc000};  // 1.0, -2.0 as IEEE half bits
  write_bytes(dir / "e.npy", npy_bytes(dict_text("<f2", "(2,)"), raw(halves)));
  CHECK(values_of<std::uint16_t>(NpyFile::open(dir / "e.npy")) == halves);
}

TEST_CASE("npy: format versions 2.0 and 3.0 (4-byte header length)") {
  const TempDir dir("mgtrain-npy");
  const std::vector<std::int32_t> values{7, -8, 9};
  for (int major : {2, 3}) {
    write_bytes(dir / "x.npy", npy_bytes(dict_text("<i4", "(3,)"), raw(values), major));
    const NpyFile file = NpyFile::open(dir / "x.npy");
    CHECK(file.type() == NpyType::Int32);
    CHECK(values_of<std::int32_t>(file) == values);
  }
}

TEST_CASE("npy: header dicts in any key order and spacing, double quotes, Python 2 longs") {
  const TempDir dir("mgtrain-npy");
  const std::vector<std::string> dicts{
      "{'shape': (2, 2), 'fortran_order': False, 'descr': '<f4'}",
      "{ 'descr' :'<f4' ,'shape':(2,2,),'fortran_order':False , }",
      "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2L, 2L)}",
      "{'descr': '<f4',\n 'fortran_order': False,\t'shape': ( 2 , 2 )}",
  };
  for (const std::string& dict : dicts) {
    INFO(dict);
    write_bytes(dir / "x.npy", npy_bytes(dict, std::string(16, '\0')));
    CHECK(NpyFile::open(dir / "x.npy").shape() == std::vector<std::int64_t>{2, 2});
  }
}

TEST_CASE("npy: an empty array (shape (0, 3)) opens without mapping anything") {
  const TempDir dir("mgtrain-npy");
  write_bytes(dir / "x.npy", npy_bytes(dict_text("<f4", "(0, 3)"), ""));
  const NpyFile file = NpyFile::open(dir / "x.npy");
  CHECK(file.rows() == 0);
  CHECK(file.row_elements() == 3);
  CHECK(file.data_bytes() == 0);
  CHECK(file.data() == nullptr);
}

TEST_CASE("npy: moving keeps the mapping, the source gives it up") {
  const TempDir dir("mgtrain-npy");
  const std::vector<float> values{1.f, 2.f};
  write_bytes(dir / "x.npy", npy_bytes(dict_text("<f4", "(2,)"), raw(values)));
  NpyFile first = NpyFile::open(dir / "x.npy");
  const void* data = first.data();
  NpyFile second(std::move(first));
  CHECK(second.data() == data);
  CHECK(first.data() == nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state is defined
  NpyFile third = NpyFile::open(dir / "x.npy");
  third = std::move(second);
  CHECK(third.data() == data);
  CHECK(values_of<float>(third) == values);
}

TEST_CASE("npy: refused preambles: wrong magic, npz, unknown version, header length past the end or too long") {
  const TempDir dir("mgtrain-npy");
  const std::string zip = refusal(dir, std::string("PK\x03\x04\x14\x00\x00\x00rest", 12));
  CHECK_THAT(zip, Contains("not a NumPy .npy file (it starts with 50 4b 03 04 14 00 00 00"));
  CHECK_THAT(zip, Contains("\\x93NUMPY"));
  CHECK_THAT(zip, Contains("an .npz archive? save each array with numpy.save"));
  CHECK_THAT(refusal(dir, "hello"), Contains("it starts with 68 65 6c 6c 6f"));
  CHECK_THAT(refusal(dir, "\x93NUMPY\x01"), Contains("truncated: 7 bytes, shorter than the 10-byte"));

  std::string version = npy_bytes(dict_text("<f4", "(1,)"), std::string(4, '\0'));
  version[6] = 4;
  CHECK_THAT(refusal(dir, version), Contains("unsupported .npy format version 4.0; mgtrain reads versions 1.0, 2.0"));
  version[6] = 1;
  version[7] = 1;
  CHECK_THAT(refusal(dir, version), Contains("version 1.1"));

  std::string past_end = npy_bytes(dict_text("<f4", "(1,)"), "");
  past_end[8] = '\xff';  // 0x00ff -> header length 255, the file has 118 bytes after the preamble
  CHECK_THAT(refusal(dir, past_end), Contains("truncated: the .npy header length field says 255 bytes, the file "
                                              "holds 118 after the preamble"));

  std::string huge = npy_bytes(dict_text("<f4", "(1,)"), std::string(4, '\0'), 2);
  huge[10] = '\x01';  // header length + 0x10000 * 1
  CHECK_THAT(refusal(dir, huge), Contains("bytes, more than the 65536 mgtrain accepts"));
}

TEST_CASE("npy: refused data sizes: truncated and trailing bytes") {
  const TempDir dir("mgtrain-npy");
  CHECK_THAT(refusal(dir, npy_bytes(dict_text("<f4", "(2, 3)"), std::string(20, '\0'))),
             Contains("truncated: holds 20 bytes of data, shape (2, 3) of float32 needs 24"));
  CHECK_THAT(refusal(dir, npy_bytes(dict_text("<i8", "(3,)"), std::string(25, '\0'))),
             Contains("1 bytes after the data: shape (3,) of int64 needs 24 bytes, the file holds 25"));
}

TEST_CASE("npy: refused dtypes, each named with why") {
  const TempDir dir("mgtrain-npy");
  const auto refused = [&](const std::string& descr) {
    return refusal(dir, npy_bytes(dict_text(descr, "(2,)"), std::string(64, '\0')));
  };
  CHECK_THAT(refused(">f4"), Contains("big-endian dtype >f4; mgtrain reads little-endian arrays: save "
                                      "arr.astype('<f4') instead"));
  CHECK_THAT(refused("<U5"), Contains("unsupported dtype <U5 (strings); mgtrain reads bool, integer and float arrays"));
  CHECK_THAT(refused("|O"), Contains("unsupported dtype |O (Python objects)"));
  CHECK_THAT(refused("<c8"), Contains("unsupported dtype <c8 (complex numbers)"));
  CHECK_THAT(refused("|S3"), Contains("(byte strings)"));
  CHECK_THAT(refused("<M8[ns]"), Contains("unsupported dtype <M8[ns] (datetimes)"));
  CHECK_THAT(refused("<f16"), Contains("(a float size other than 2, 4 or 8 bytes)"));
  CHECK_THAT(refused("float32"), Contains("unsupported dtype float32;"));
  const std::string structured =
      refusal(dir, npy_bytes("{'descr': [('x', '<f4'), ('y', '<i8', (2,))], 'fortran_order': False, 'shape': (2,), }",
                             std::string(40, '\0')));
  CHECK_THAT(structured, Contains("unsupported dtype [('x', '<f4'), ('y', '<i8', (2,))] (a structured dtype"));
  CHECK_THAT(structured, Contains("save each field as its own array"));
}

TEST_CASE("npy: refused layouts: fortran order, 0-d arrays, bad shapes") {
  const TempDir dir("mgtrain-npy");
  CHECK_THAT(refusal(dir, npy_bytes(dict_text("<f4", "(2, 2)", "True"), std::string(16, '\0'))),
             Contains("Fortran (column-major) order; mgtrain reads C order: save numpy.ascontiguousarray(arr)"));
  CHECK_THAT(refusal(dir, npy_bytes(dict_text("<f4", "()"), std::string(4, '\0'))),
             Contains("a 0-d array (shape ()) of float32; mgtrain needs at least one dimension"));
  CHECK_THAT(refusal(dir, npy_bytes(dict_text("<f4", "(2, -1)"), "")),
             Contains("shape (2, -1) has the dimension -1; dimensions are integers >= 0"));
  CHECK_THAT(refusal(dir, npy_bytes(dict_text("<f4", "(5)"), std::string(20, '\0'))),
             Contains("'shape' is (5) in the .npy header, expected a tuple of integers"));
  CHECK_THAT(refusal(dir, npy_bytes(dict_text("<f4", "(4294967296, 4294967296)"), "")),
             Contains("shape (4294967296, 4294967296) of float32 is too large"));
  CHECK_THAT(refusal(dir, npy_bytes(dict_text("<f4", "(0, 4294967296, 4294967296)"), "")), Contains("too large"));
  CHECK_THAT(refusal(dir, npy_bytes(dict_text("<f4", "(99999999999999999999,)"), "")),
             Contains("integer out of the 64-bit range"));
  CHECK_THAT(refusal(dir, npy_bytes(dict_text("<f4", "(1,)", "0"), std::string(4, '\0'))),
             Contains("'fortran_order' is 0 in the .npy header, expected True or False"));
}

TEST_CASE("npy: refused header dicts: missing, unknown or repeated keys, garbage") {
  const TempDir dir("mgtrain-npy");
  const auto refused = [&](const std::string& dict) { return refusal(dir, npy_bytes(dict, std::string(8, '\0'))); };
  CHECK_THAT(refused("{'descr': '<f4', 'fortran_order': False}"),
             Contains("the .npy header has no 'shape' key (numpy writes 'descr', 'fortran_order' and 'shape'): "
                      "{'descr': '<f4', 'fortran_order': False}"));
  CHECK_THAT(refused("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}"),
             Contains("unexpected key 'extra'"));
  CHECK_THAT(refused("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}"),
             Contains("the key 'descr' twice"));
  CHECK_THAT(refused("{'descr': '<f4', 'fortran_order': False, 'shape': (2,,)}"),
             Contains("damaged .npy header: expected a value at \",)}"));
  CHECK_THAT(refused("{'descr': '<f4', 'fortran_order': Nope, 'shape': (2,)}"), Contains("unknown name 'Nope'"));
  CHECK_THAT(refused("{'descr': '<f4 'fortran_order': False}"), Contains("expected ',' or '}'"));
  CHECK_THAT(refused("{'descr': '<f4', 'shape': (2,)"),
             Contains("expected ',' or '}' at the end (the header: {'descr'"));
  CHECK_THAT(refused("{'descr': '<f4'} trailing"), Contains("unexpected text after the dict"));
  CHECK_THAT(refused("['descr']"), Contains("expected a dict"));
  CHECK_THAT(refused("{'descr': " + std::string(40, '(') + "}"), Contains("nested deeper than 16 levels"));
  CHECK_THAT(refused("{'descr': '\xff'}"), Contains("\\xff"));  // non-ASCII shown escaped
}

TEST_CASE("npy: missing, empty and non-regular files") {
  const TempDir dir("mgtrain-npy");
  try {
    NpyFile::open(dir / "absent.npy");
    FAIL("opened an absent file");
  } catch (const mgtrain::SystemError& error) {
    CHECK_THAT(error.what(), Contains("open " + dir / "absent.npy" + ": No such file"));
  }
  CHECK_THAT(refusal(dir, ""), Contains("empty file (0 bytes), expected a .npy file"));
  std::filesystem::create_directory(dir / "sub.npy");
  CHECK_THROWS_WITH(NpyFile::open(dir / "sub.npy"), Contains("not a regular file"));
}

TEST_CASE("npy: real files written by numpy.save in the torch 2 venv") {
  const std::string python = std::string(MGTRAIN_TORCH2_VENV) + "/bin/python";
  if (!std::filesystem::exists(python) || std::system((python + " -c 'import numpy' 2>/dev/null").c_str()) != 0) {
    WARN("skipped: " + python + " is missing or has no numpy (scripts/torch2-env.sh makes the venv)");
    return;
  }
  const TempDir dir("mgtrain-npy");
  const int n = 1000;
  {
    std::ofstream(dir / "write.py") << R"(import sys, numpy as np
d, n = sys.argv[1], int(sys.argv[2])
np.save(d + '/f32.npy', (np.arange(n * 4, dtype=np.float32) * np.float32(0.5) - np.float32(3)).reshape(n, 4))
np.save(d + '/i64.npy', np.arange(n, dtype=np.int64) * 1000000007 - 5)
np.save(d + '/u8.npy', (np.arange(n * 4) % 256).astype(np.uint8).reshape(n, 2, 2))
np.save(d + '/f64.npy', np.arange(n, dtype=np.float64) / 7.0)
np.save(d + '/bool.npy', np.arange(n) % 3 == 0)
np.save(d + '/strided.npy', np.arange(n * 4, dtype=np.int16).reshape(n, 4)[:, ::2])
np.save(d + '/empty.npy', np.zeros((0, 3), dtype=np.float32))
np.save(d + '/fortran.npy', np.asfortranarray(np.ones((3, 2), dtype=np.float32)))
np.save(d + '/big.npy', np.ones(3, dtype='>f4'))
np.save(d + '/str.npy', np.array(['ab', 'cde']))
np.save(d + '/scalar.npy', np.float32(1))
np.savez(d + '/both.npz', a=np.ones(2))
)";
  }
  REQUIRE(std::system((python + " " + dir / "write.py" + " " + dir.path() + " " + std::to_string(n)).c_str()) == 0);

  const NpyFile f32 = NpyFile::open(dir / "f32.npy");
  REQUIRE(f32.type() == NpyType::Float32);
  REQUIRE(f32.shape() == std::vector<std::int64_t>{n, 4});
  const auto floats = values_of<float>(f32);
  for (int i = 0; i < n * 4; ++i) REQUIRE(floats[i] == static_cast<float>(i) * 0.5f - 3.f);

  const NpyFile i64 = NpyFile::open(dir / "i64.npy");
  REQUIRE(i64.type() == NpyType::Int64);
  REQUIRE(i64.shape() == std::vector<std::int64_t>{n});
  const auto longs = values_of<std::int64_t>(i64);
  for (int i = 0; i < n; ++i) REQUIRE(longs[i] == std::int64_t{i} * 1000000007 - 5);

  const NpyFile u8 = NpyFile::open(dir / "u8.npy");
  REQUIRE(u8.type() == NpyType::UInt8);
  REQUIRE(u8.shape() == std::vector<std::int64_t>{n, 2, 2});
  REQUIRE(u8.row_elements() == 4);
  const auto bytes = values_of<std::uint8_t>(u8);
  for (int i = 0; i < n * 4; ++i) REQUIRE(bytes[i] == i % 256);

  const NpyFile f64 = NpyFile::open(dir / "f64.npy");
  REQUIRE(f64.type() == NpyType::Float64);
  const auto doubles = values_of<double>(f64);
  REQUIRE(doubles.size() == static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) REQUIRE(doubles[i] == static_cast<double>(i) / 7.0);

  const NpyFile flags = NpyFile::open(dir / "bool.npy");
  REQUIRE(flags.type() == NpyType::Bool);
  const auto bools = values_of<std::uint8_t>(flags);
  REQUIRE(bools.size() == static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) REQUIRE(bools[i] == (i % 3 == 0 ? 1 : 0));

  const NpyFile strided = NpyFile::open(dir / "strided.npy");  // numpy.save writes a strided view in C order
  REQUIRE(strided.shape() == std::vector<std::int64_t>{n, 2});
  const auto shorts = values_of<std::int16_t>(strided);
  for (int i = 0; i < n * 2; ++i) REQUIRE(shorts[i] == (i / 2) * 4 + (i % 2) * 2);

  const NpyFile empty = NpyFile::open(dir / "empty.npy");
  CHECK(empty.shape() == std::vector<std::int64_t>{0, 3});
  CHECK(empty.data_bytes() == 0);

  CHECK_THROWS_WITH(NpyFile::open(dir / "fortran.npy"), Contains("Fortran (column-major) order"));
  CHECK_THROWS_WITH(NpyFile::open(dir / "big.npy"), Contains("big-endian dtype >f4"));
  CHECK_THROWS_WITH(NpyFile::open(dir / "str.npy"), Contains("unsupported dtype <U3 (strings)"));
  CHECK_THROWS_WITH(NpyFile::open(dir / "scalar.npy"), Contains("a 0-d array (shape ()) of float32"));
  CHECK_THROWS_WITH(NpyFile::open(dir / "both.npz"), Contains("an .npz archive?"));
}

TEST_CASE("npy: damaged bytes and cut files either open or are refused with a UsageError, never anything else") {
  const TempDir dir("mgtrain-npy");
  const std::string good = npy_bytes(dict_text("<f4", "(2, 3)"), std::string(24, '\x01'));
  std::uint64_t state = 12345;  // a fixed xorshift sequence: the same damage on every run
  const auto next = [&state] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  int opened = 0;
  for (int i = 0; i < 1000; ++i) {
    std::string bytes = good;
    if (i % 5 == 0) bytes.resize(next() % bytes.size());
    for (int flips = 1 + static_cast<int>(next() % 3); flips > 0 && !bytes.empty(); --flips) {
      bytes[next() % bytes.size()] = static_cast<char>(next());
    }
    const std::string path = dir / ("x" + std::to_string(i) + ".npy");  // a new file: rewriting one waits (ext4)
    write_bytes(path, bytes);
    try {
      const NpyFile file = NpyFile::open(path);
      REQUIRE(file.data_bytes() ==
              static_cast<std::size_t>(file.rows() * file.row_elements()) * mgtrain::npy_type_size(file.type()));
      ++opened;
    } catch (const mgtrain::UsageError&) {}
  }
  CHECK(opened > 0);  // damage in the padding or the data
}
