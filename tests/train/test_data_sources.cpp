// The data sets: valid and malformed IDX (raw and .gz), CIFAR-10 and token files written into a temporary
// directory, the synthetic set, and the real Fashion-MNIST when Debian's dataset-fashion-mnist is installed.
#include "catch_with_torch.hpp"

#include <cmath>
#include <filesystem>
#include <numeric>

#include <ATen/ATen.h>
#include <zlib.h>

#include "train/data/data_source.hpp"
#include "train_test_support.hpp"
#include "util/error.hpp"
#include "worker_io/token_file.hpp"

using Catch::Matchers::Contains;
using mgtrain::DataConfig;
using mgtrain::Split;
using mgtrain::UsageError;
using mgtrain::test::TempDir;
using mgtrain::test::write_bytes;

namespace {

std::vector<uint8_t> gzip(const std::vector<uint8_t>& raw) {
  z_stream s{};
  REQUIRE(deflateInit2(&s, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::vector<uint8_t> out(deflateBound(&s, raw.size()) + 64);
  s.next_in = const_cast<Bytef*>(raw.data());
  s.avail_in = static_cast<uInt>(raw.size());
  s.next_out = out.data();
  s.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&s, Z_FINISH) == Z_STREAM_END);
  out.resize(s.total_out);
  deflateEnd(&s);
  return out;
}

void put_u32_be(std::vector<uint8_t>& b, uint32_t v) {
  for (int shift : {24, 16, 8, 0}) b.push_back(static_cast<uint8_t>(v >> shift));
}

std::vector<uint8_t> idx_images(uint32_t count, uint32_t rows, uint32_t cols, uint8_t first_pixel = 0) {
  std::vector<uint8_t> b;
  put_u32_be(b, 0x803);
  put_u32_be(b, count);
  put_u32_be(b, rows);
  put_u32_be(b, cols);
  for (uint32_t i = 0; i < count * rows * cols; ++i) b.push_back(static_cast<uint8_t>(first_pixel + i * 7));
  return b;
}

std::vector<uint8_t> idx_labels(uint32_t count) {
  std::vector<uint8_t> b;
  put_u32_be(b, 0x801);
  put_u32_be(b, count);
  for (uint32_t i = 0; i < count; ++i) b.push_back(static_cast<uint8_t>(i % 10));
  return b;
}

DataConfig config_for(const std::string& dataset, const std::string& path) {
  DataConfig c;
  c.dataset = mgtrain::parse_enum<mgtrain::DatasetKind>(dataset).value();
  c.path = path;
  return c;
}

// A valid MNIST-format directory: 5 train and 3 test images of 4x3; the train images gzip-compressed.
void write_small_mnist(const TempDir& dir) {
  write_bytes(dir / "train-images-idx3-ubyte.gz", gzip(idx_images(5, 4, 3)));
  write_bytes(dir / "train-labels-idx1-ubyte", idx_labels(5));
  write_bytes(dir / "t10k-images-idx3-ubyte", idx_images(3, 4, 3, 100));
  write_bytes(dir / "t10k-labels-idx1-ubyte.gz", gzip(idx_labels(3)));
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no UsageError)";
}

}  // namespace

TEST_CASE("mnist: small IDX files, raw and gzip, load and normalise with the train statistics") {
  TempDir dir;
  write_small_mnist(dir);
  const auto train = mgtrain::open_data_source(config_for("mnist", dir.path()), Split::Train, 0, 0);
  const auto test = mgtrain::open_data_source(config_for("mnist", dir.path()), Split::Test, 0, 0);
  CHECK(train->size() == 5);
  CHECK(test->size() == 3);
  CHECK(train->sample_shape() == std::vector<int64_t>{1, 4, 3});
  CHECK(train->num_classes() == 10);

  // The train pixels are (i*7) mod 256 for i in 0..59; statistics of x/255 over them.
  std::vector<double> x;
  for (int i = 0; i < 60; ++i) x.push_back(static_cast<uint8_t>(i * 7) / 255.0);
  const double mean = std::accumulate(x.begin(), x.end(), 0.0) / x.size();
  double var = 0;
  for (double v : x) var += (v - mean) * (v - mean);
  const double std_dev = std::sqrt(var / x.size());

  const auto batch = train->make_batch({4, 1});
  REQUIRE(batch.inputs.sizes() == at::IntArrayRef({2, 1, 4, 3}));
  CHECK(batch.inputs.scalar_type() == at::kFloat);
  CHECK(batch.targets.scalar_type() == at::kLong);
  CHECK(batch.targets[0].item<int64_t>() == 4);
  CHECK(batch.targets[1].item<int64_t>() == 1);
  // Sample 4, pixel 0 is the 48th byte: (48*7) mod 256 = 80.
  CHECK(batch.inputs[0][0][0][0].item<float>() == Approx((80 / 255.0 - mean) / std_dev).epsilon(1e-5));
  const auto test_batch = test->make_batch({0});
  CHECK(test_batch.inputs[0][0][0][0].item<float>() == Approx((100 / 255.0 - mean) / std_dev).epsilon(1e-5));
  CHECK_THROWS_WITH(train->make_batch({5}), Contains("outside the data set of 5 samples"));
}

TEST_CASE("mnist: malformed files give errors naming the file and the problem") {
  TempDir dir;
  write_small_mnist(dir);
  const auto open_train = [&] { mgtrain::open_data_source(config_for("mnist", dir.path()), Split::Train, 0, 0); };
  const std::string images = dir / "train-images-idx3-ubyte.gz";

  SECTION("bad magic") {
    auto bytes = idx_images(5, 4, 3);
    bytes[2] = 0, bytes[3] = 0;
    write_bytes(images, gzip(bytes));
    CHECK(error_of(open_train) ==
          images + ": IDX magic 0x00000000 is not 0x00000803 (unsigned byte, 3 dimensions; expected images)");
  }
  SECTION("labels file where the images should be") {
    write_bytes(images, gzip(idx_labels(5)));
    CHECK_THAT(error_of(open_train), Contains(images + ": IDX magic 0x00000801 is not 0x00000803"));
  }
  SECTION("truncated data") {
    auto bytes = idx_images(5, 4, 3);
    bytes.resize(bytes.size() - 7);
    write_bytes(images, gzip(bytes));
    CHECK(error_of(open_train) ==
          images + ": truncated: the header promises 5x4x3 (60 bytes of data) but only 53 bytes follow it");
  }
  SECTION("truncated header") {
    auto bytes = idx_images(5, 4, 3);
    bytes.resize(10);
    write_bytes(images, gzip(bytes));
    CHECK_THAT(error_of(open_train), Contains(images + ": truncated IDX header: 10 bytes"));
  }
  SECTION("trailing bytes") {
    auto bytes = idx_images(5, 4, 3);
    bytes.push_back(1);
    write_bytes(images, gzip(bytes));
    CHECK_THAT(error_of(open_train), Contains(images + ": 1 unexpected trailing bytes"));
  }
  SECTION("truncated gzip stream") {
    auto compressed = gzip(idx_images(500, 28, 28));
    compressed.resize(compressed.size() / 2);
    write_bytes(images, compressed);
    CHECK_THAT(error_of(open_train), Contains(images + ": truncated gzip stream"));
  }
  SECTION("corrupt gzip stream") {
    auto compressed = gzip(idx_images(500, 28, 28));
    for (size_t i = 20; i < 60; ++i) compressed[i] ^= 0x5a;
    write_bytes(images, compressed);
    CHECK_THAT(error_of(open_train), Contains(images + ": corrupt gzip stream"));
  }
  SECTION("images and labels disagree on the count") {
    write_bytes(dir / "train-labels-idx1-ubyte", idx_labels(4));
    CHECK(error_of(open_train) == dir / "train-labels-idx1-ubyte" + ": 4 labels, but " + images + " has 5 images");
  }
  SECTION("missing file") {
    std::filesystem::remove(dir / "train-labels-idx1-ubyte");
    CHECK(error_of(open_train) ==
          dir / "train-labels-idx1-ubyte" + ": no such file (nor " + dir / "train-labels-idx1-ubyte" + ".gz)");
  }
  SECTION("missing directory") {
    CHECK_THAT(error_of([&] { mgtrain::open_data_source(config_for("mnist", dir / "nope"), Split::Train, 0, 0); }),
               Contains(dir / "nope" + ": no such directory"));
  }
}

TEST_CASE("mnist: the real Fashion-MNIST (Debian dataset-fashion-mnist)") {
  const std::string path = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::exists(path + "/train-images-idx3-ubyte.gz")) {
    WARN("skipped: " << path << " is absent (apt-get install dataset-fashion-mnist)");
    return;
  }
  const auto train = mgtrain::open_data_source(config_for("mnist", path), Split::Train, 0, 0);
  const auto test = mgtrain::open_data_source(config_for("mnist", path), Split::Test, 0, 0);
  CHECK(train->size() == 60000);
  CHECK(test->size() == 10000);
  CHECK(train->sample_shape() == std::vector<int64_t>{1, 28, 28});
  CHECK(train->num_classes() == 10);
  CHECK_THAT(train->description(), Contains("mean 0.2860 std 0.3530"));
  std::vector<int64_t> all(60000);
  std::iota(all.begin(), all.end(), 0);
  const auto batch = train->make_batch(all);
  CHECK(batch.inputs.mean().item<double>() == Approx(0.0).margin(1e-3));
  CHECK(batch.inputs.std().item<double>() == Approx(1.0).margin(1e-3));
  CHECK(at::bincount(batch.targets).eq(6000).all().item<bool>());
}

namespace {

// CIFAR-10 record r of a file: label (r + file) % 10, pixels (r + channel) patterns.
std::vector<uint8_t> cifar_records(int count, int file, int bad_label_at = -1) {
  std::vector<uint8_t> b;
  for (int r = 0; r < count; ++r) {
    b.push_back(static_cast<uint8_t>(r == bad_label_at ? 12 : (r + file) % 10));
    for (int c = 0; c < 3; ++c) {
      for (int p = 0; p < 1024; ++p) b.push_back(static_cast<uint8_t>(c * 80 + (p + r) % 50));
    }
  }
  return b;
}

void write_small_cifar(const TempDir& dir) {
  for (int i = 1; i <= 5; ++i) write_bytes(dir / ("data_batch_" + std::to_string(i) + ".bin"), cifar_records(2, i));
  write_bytes(dir / "test_batch.bin", cifar_records(3, 0));
}

}  // namespace

TEST_CASE("cifar10: binary batches load with per-channel normalisation") {
  TempDir dir;
  write_small_cifar(dir);
  const auto train = mgtrain::open_data_source(config_for("cifar10", dir.path()), Split::Train, 0, 0);
  const auto test = mgtrain::open_data_source(config_for("cifar10", dir.path()), Split::Test, 0, 0);
  CHECK(train->size() == 10);
  CHECK(test->size() == 3);
  CHECK(train->sample_shape() == std::vector<int64_t>{3, 32, 32});
  CHECK(train->num_classes() == 10);
  const auto batch = train->make_batch({0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(batch.targets[2].item<int64_t>() == 2);  // file 2, record 0
  // Normalised with its own statistics, each channel of the whole train split has mean 0 and std 1.
  const at::Tensor per_channel = batch.inputs.transpose(0, 1).reshape({3, -1});
  for (int c = 0; c < 3; ++c) {
    CHECK(per_channel[c].mean().item<double>() == Approx(0.0).margin(1e-4));
    CHECK(per_channel[c].std(/*unbiased=*/false).item<double>() == Approx(1.0).margin(1e-4));
  }
}

TEST_CASE("cifar10: malformed batches give errors naming the file") {
  TempDir dir;
  write_small_cifar(dir);
  const auto open_train = [&] { mgtrain::open_data_source(config_for("cifar10", dir.path()), Split::Train, 0, 0); };
  SECTION("size not a multiple of the record") {
    auto bytes = cifar_records(2, 3);
    bytes.resize(bytes.size() - 100);
    write_bytes(dir / "data_batch_3.bin", bytes);
    CHECK(error_of(open_train) ==
          dir / "data_batch_3.bin" +
              ": size 6046 bytes is not a positive multiple of the 3073-byte CIFAR-10 record (1 label byte + "
              "3x32x32 pixel bytes); 2973 bytes left over after 1 records");
  }
  SECTION("label out of range") {
    write_bytes(dir / "data_batch_4.bin", cifar_records(2, 4, 1));
    CHECK_THAT(error_of(open_train), Contains(dir / "data_batch_4.bin" + ": record 1 has label 12"));
  }
  SECTION("missing batch") {
    std::filesystem::remove(dir / "data_batch_5.bin");
    CHECK_THAT(error_of(open_train), Contains(dir / "data_batch_5.bin" + ": no such file"));
  }
}

namespace {

void write_tokens(const std::string& path, const std::vector<uint16_t>& ids) {
  std::vector<uint8_t> b;
  for (uint16_t id : ids) b.push_back(static_cast<uint8_t>(id & 0xff)), b.push_back(static_cast<uint8_t>(id >> 8));
  write_bytes(path, b);
}

std::vector<uint16_t> ramp(int n, int offset = 0) {
  std::vector<uint16_t> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<uint16_t>(offset + i);
  return v;
}

}  // namespace

TEST_CASE("tokens: windows of context_length + 1, the 90/10 split without val.bin") {
  TempDir dir;
  write_tokens(dir / "train.bin", ramp(100, 300));  // ids 300..399: exercises the high byte
  const auto cfg = config_for("tokens", dir / "train.bin");
  const auto train = mgtrain::open_data_source(cfg, Split::Train, 4, 0);
  const auto test = mgtrain::open_data_source(cfg, Split::Test, 4, 0);
  CHECK(train->size() == (90 - 1) / 4);
  CHECK(test->size() == (10 - 1) / 4);
  CHECK(train->sample_shape() == std::vector<int64_t>{4});
  CHECK(train->num_classes() == 400);
  CHECK(test->num_classes() == 400);
  const auto batch = train->make_batch({0, 2});
  CHECK(batch.inputs.scalar_type() == at::kLong);
  CHECK(batch.inputs.sizes() == at::IntArrayRef({2, 4}));
  CHECK(batch.inputs[1].equal(at::arange(308, 312, at::kLong)));
  CHECK(batch.targets[1].equal(at::arange(309, 313, at::kLong)));
  CHECK(test->make_batch({1}).inputs[0].equal(at::arange(394, 398, at::kLong)));
}

TEST_CASE("tokens: val.bin beside the train file is the test split, meta.json gives the vocabulary") {
  TempDir dir;
  write_tokens(dir / "train.bin", ramp(40));
  write_tokens(dir / "val.bin", ramp(9, 50));
  const auto cfg = config_for("tokens", dir / "train.bin");
  const auto train = mgtrain::open_data_source(cfg, Split::Train, 8, 0);
  const auto test = mgtrain::open_data_source(cfg, Split::Test, 8, 0);
  CHECK(train->size() == 4);
  CHECK(test->size() == 1);
  CHECK(train->num_classes() == 59);  // largest id of both files + 1
  CHECK(test->make_batch({0}).targets[0][7].item<int64_t>() == 58);

  write_bytes(dir / "meta.json",
              {'{', '"', 'v', 'o', 'c', 'a', 'b', '_', 's', 'i', 'z', 'e', '"', ':', ' ', '7', '0', '}'});
  CHECK(mgtrain::open_data_source(cfg, Split::Train, 8, 0)->num_classes() == 70);
  write_bytes(dir / "meta.json",
              {'{', '"', 'v', 'o', 'c', 'a', 'b', '_', 's', 'i', 'z', 'e', '"', ':', ' ', '5', '5', '}'});
  CHECK(error_of([&] { mgtrain::open_data_source(cfg, Split::Train, 8, 0); }) ==
        dir / "val.bin" + ": token id 55 at position 5 is outside the vocabulary of 55 declared by " +
            dir / "meta.json");
}

TEST_CASE("tokens: malformed token files") {
  TempDir dir;
  const auto cfg = config_for("tokens", dir / "train.bin");
  const auto open = [&] { mgtrain::open_data_source(cfg, Split::Train, 8, 0); };
  SECTION("odd size") {
    write_bytes(dir / "train.bin", std::vector<uint8_t>(201, 1));
    CHECK(error_of(open) ==
          dir / "train.bin" +
              ": size 201 bytes is odd; a token file holds little-endian uint16 token ids (2 bytes each)");
  }
  SECTION("empty") {
    write_bytes(dir / "train.bin", {});
    CHECK(error_of(open) == dir / "train.bin" + ": empty token file");
  }
  SECTION("shorter than one sample") {
    write_tokens(dir / "train.bin", ramp(8));
    write_tokens(dir / "val.bin", ramp(20));
    CHECK(error_of(open) ==
          dir / "train.bin" + ": 8 tokens are fewer than one sample of context_length + 1 = 9 tokens");
  }
  SECTION("missing") { CHECK(error_of(open) == dir / "train.bin" + ": no such file"); }
}

TEST_CASE("tokens: a char-level file from the tokenizer opens with its vocabulary") {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 50; ++i) text += "to be or not to be, ";
  write_bytes(dir / "input.txt", std::vector<uint8_t>(text.begin(), text.end()));
  mgtrain::TokenizeOptions options;
  options.input_path = dir / "input.txt";
  options.output_dir = dir / "out";
  const auto result = mgtrain::tokenize_text_file(options);
  const auto train = mgtrain::open_data_source(config_for("tokens", result.train_path), Split::Train, 16, 0);
  const auto test = mgtrain::open_data_source(config_for("tokens", result.train_path), Split::Test, 16, 0);
  CHECK(train->num_classes() == 8);  // " ,bentor"
  CHECK(train->size() == (900 - 1) / 16);
  CHECK(test->size() == (100 - 1) / 16);
}

TEST_CASE("synthetic: deterministic, shaped, learnable") {
  DataConfig cfg = config_for("synthetic", "");
  cfg.input_shape = {1, 8, 8};
  cfg.num_classes = 10;
  cfg.synthetic_samples = 3000;
  const auto train = mgtrain::open_data_source(cfg, Split::Train, 0, 42);
  const auto test = mgtrain::open_data_source(cfg, Split::Test, 0, 42);
  CHECK(train->size() == 3000);
  CHECK(test->size() == 10000);
  CHECK(train->sample_shape() == std::vector<int64_t>{1, 8, 8});
  CHECK(train->num_classes() == 10);
  const auto a = train->make_batch({0, 5, 17});
  const auto b = mgtrain::open_data_source(cfg, Split::Train, 0, 42)->make_batch({0, 5, 17});
  CHECK(a.inputs.equal(b.inputs));
  CHECK(a.targets.equal(b.targets));
  CHECK(a.inputs.sizes() == at::IntArrayRef({3, 1, 8, 8}));
  CHECK_FALSE(mgtrain::open_data_source(cfg, Split::Train, 0, 43)->make_batch({0, 5, 17}).inputs.equal(a.inputs));
  CHECK_FALSE(test->make_batch({0, 5, 17}).inputs.equal(a.inputs));

  // Learnable: nearest class mean (estimated on train) classifies the test split well.
  std::vector<int64_t> all_train(3000), all_test(2000);
  std::iota(all_train.begin(), all_train.end(), 0);
  std::iota(all_test.begin(), all_test.end(), 0);
  const auto tr = train->make_batch(all_train);
  const auto te = test->make_batch(all_test);
  const at::Tensor x = tr.inputs.reshape({3000, -1});
  at::Tensor means = at::zeros({10, 64});
  means.index_add_(0, tr.targets, x).div_(at::bincount(tr.targets, {}, 10).unsqueeze(1).to(at::kFloat));
  const at::Tensor predicted = at::cdist(te.inputs.reshape({2000, -1}), means).argmin(1);
  const double accuracy = predicted.eq(te.targets).to(at::kFloat).mean().item<double>();
  CHECK(accuracy > 0.9);
  CHECK(accuracy < 1.0);
}

TEST_CASE("open_data_source: bad synthetic shapes") {
  DataConfig cfg = config_for("synthetic", "");
  cfg.input_shape = {3, 0};
  CHECK_THAT(error_of([&] { mgtrain::open_data_source(cfg, Split::Train, 0, 1); }), Contains("has a dimension < 1"));
}
