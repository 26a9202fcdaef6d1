// The npy data set: .npy files built byte by byte (support/npy_bytes.hpp) for the good cases and each refusal
// (wrong magic, truncated data, mismatched feature and label counts, unsupported dtypes, labels that are not class
// ids), and a real data set written by numpy.save trained by mgtrain-worker.
#include "catch_with_torch.hpp"

#include <ATen/ATen.h>

#include "support/npy_bytes.hpp"
#include "support/summary_line.hpp"
#include "train/data/data_source.hpp"
#include "train_test_support.hpp"
#include "util/error.hpp"

using Catch::Matchers::Contains;
using mgtrain::DataConfig;
using mgtrain::DatasetKind;
using mgtrain::Split;
using mgtrain::UsageError;
using mgtrain::test::TempDir;
using namespace mgtrain::testing::npy;

namespace {

std::unique_ptr<mgtrain::DataSource> open_npy(const std::string& directory, Split split) {
  DataConfig config;
  config.dataset = DatasetKind::Npy;
  config.path = directory;
  return mgtrain::open_data_source(config, split, 0, 0);
}

// Train and test files: x float32 [6, 2, 2] holding 0..23, y int64 {0, 1, 2, 0, 1, 2}; test: 3 samples.
void write_good(const TempDir& dir) {
  std::vector<float> x(24);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  write_bytes(dir / "train_x.npy", npy_bytes(dict_text("<f4", "(6, 2, 2)"), raw(x)));
  write_bytes(dir / "train_y.npy", npy_bytes(dict_text("<i8", "(6,)"), raw(std::vector<int64_t>{0, 1, 2, 0, 1, 2})));
  write_bytes(dir / "test_x.npy", npy_bytes(dict_text("|u1", "(3, 2, 2)"), std::string(12, '\x07')));
  write_bytes(dir / "test_y.npy", npy_bytes(dict_text("<i4", "(3,)"), raw(std::vector<int32_t>{2, 1, 0})));
}

std::string refusal(const TempDir& dir, Split split = Split::Train) {
  try {
    open_npy(dir.path(), split);
  } catch (const UsageError& e) {
    return e.what();
  }
  FAIL("opened without a UsageError");
  return "";
}

}  // namespace

TEST_CASE("npy: samples, shapes, classes and batches of any dtype as float32") {
  const TempDir dir;
  write_good(dir);
  auto train = open_npy(dir.path(), Split::Train);
  CHECK(train->size() == 6);
  CHECK(train->sample_shape() == std::vector<int64_t>{2, 2});
  CHECK(train->num_classes() == 3);
  CHECK_THAT(train->description(), Contains("6 samples of float32 2x2, 3 classes"));
  const mgtrain::Batch batch = train->make_batch({4, 1});
  CHECK(batch.inputs.sizes() == at::IntArrayRef({2, 2, 2}));
  CHECK(batch.inputs.dtype() == at::kFloat);
  CHECK(batch.inputs[0][1][1].item<float>() == 19.0f);
  CHECK(batch.inputs[1][0][0].item<float>() == 4.0f);
  CHECK(batch.targets.dtype() == at::kLong);
  CHECK(batch.targets[0].item<int64_t>() == 1);
  auto test = open_npy(dir.path(), Split::Test);  // uint8 features, int32 labels
  CHECK(test->num_classes() == 3);
  const mgtrain::Batch t = test->make_batch({2});
  CHECK(t.inputs.dtype() == at::kFloat);
  CHECK(t.inputs[0][1][0].item<float>() == 7.0f);
  CHECK(t.targets[0].item<int64_t>() == 0);
  CHECK_THROWS_AS(train->make_batch({6}), mgtrain::Error);
}

TEST_CASE("npy: refused files, each named with what is wrong") {
  const TempDir dir;
  write_good(dir);
  SECTION("wrong magic") {
    write_bytes(dir / "train_x.npy", "PK\x03\x04 not an npy file at all, an npz archive perhaps");
    CHECK_THAT(refusal(dir), Contains(dir / "train_x.npy") && Contains("not a NumPy .npy file"));
  }
  SECTION("truncated data") {
    write_bytes(dir / "train_y.npy", npy_bytes(dict_text("<i8", "(6,)"), raw(std::vector<int64_t>{0, 1, 2})));
    CHECK_THAT(refusal(dir), Contains(dir / "train_y.npy") && Contains("truncated"));
  }
  SECTION("mismatched feature and label counts") {
    write_bytes(dir / "train_y.npy", npy_bytes(dict_text("<i8", "(5,)"), raw(std::vector<int64_t>{0, 1, 2, 0, 1})));
    CHECK(refusal(dir) ==
          (dir / "train_y.npy") + " holds 5 labels but " + (dir / "train_x.npy") + " holds 6 samples: they must match");
  }
  SECTION("unsupported dtype") {
    write_bytes(dir / "train_x.npy", npy_bytes(dict_text("<U2", "(6,)"), std::string(48, 'a')));
    CHECK_THAT(refusal(dir), Contains(dir / "train_x.npy") && Contains("unsupported dtype <U2"));
  }
  SECTION("float labels, 2-d labels, negative labels, a test label the training never saw") {
    write_bytes(dir / "train_y.npy", npy_bytes(dict_text("<f4", "(6,)"), raw(std::vector<float>(6, 1.0f))));
    CHECK_THAT(refusal(dir), Contains("labels of dtype float32: expected integer class ids"));
    write_bytes(dir / "train_y.npy", npy_bytes(dict_text("<i8", "(6, 1)"), raw(std::vector<int64_t>(6, 1))));
    CHECK_THAT(refusal(dir), Contains("labels of shape (6, 1): expected one class id per sample"));
    write_bytes(dir / "train_y.npy", npy_bytes(dict_text("<i8", "(6,)"), raw(std::vector<int64_t>{0, 1, -1, 0, 1, 2})));
    CHECK_THAT(refusal(dir), Contains("label -1 of sample 2 is negative"));
    write_good(dir);
    write_bytes(dir / "test_y.npy", npy_bytes(dict_text("<i4", "(3,)"), raw(std::vector<int32_t>{2, 3, 0})));
    CHECK_THAT(refusal(dir, Split::Test), Contains("label 3 is not a class of the training labels (0 to 2)"));
  }
  SECTION("a missing file") {
    std::filesystem::remove(dir / "test_x.npy");
    CHECK_THROWS_WITH(open_npy(dir.path(), Split::Test), Contains(dir / "test_x.npy"));
  }
}

TEST_CASE("npy: arrays written by numpy.save train with mgtrain-worker") {
  const std::string python = std::string(MGTRAIN_TORCH2_VENV) + "/bin/python";
  const TempDir dir;
  const mgtrain::CapturedRun made =
      mgtrain::run_and_capture({python, "-c",
                                "import numpy as np, sys\n"
                                "rng = np.random.default_rng(0)\n"
                                "for split, n in (('train', 2048), ('test', 512)):\n"
                                "    y = rng.integers(0, 4, n)\n"
                                "    x = (rng.normal(size=(n, 8)) + y[:, None] * 1.5).astype(np.float64)\n"
                                "    np.save(f'{sys.argv[1]}/{split}_x.npy', x)\n"
                                "    np.save(f'{sys.argv[1]}/{split}_y.npy', y.astype(np.int16))\n",
                                dir.path()});
  if (made.exit_code != 0) {
    WARN("skipped: " << python << " cannot write .npy files with numpy (" << made.err << ")");
    return;
  }
  mgtrain::CaptureOptions options;
  options.set_env["OMP_NUM_THREADS"] = "1";
  const mgtrain::CapturedRun run = mgtrain::run_and_capture(
      {std::string(MGTRAIN_BIN_DIR) + "/mgtrain-worker", "data.dataset=npy", "data.path=" + dir.path(),
       "model.type=mlp", "model.hidden_sizes=32", "train.epochs=2", "train.batch_size=32", "optim.name=adam",
       "optim.lr=0.01", "checkpoint.dir=", "launch.log_dir=" + (dir / "logs"), "log.tensorboard=false"},
      options);
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  CHECK_THAT(run.err + run.out,
             Contains("npy " + (dir / "train_x.npy") + " (train): 2048 samples of float64 8, 4 classes"));
  CHECK(mgtrain::testing::summary_number(run.out, "accuracy") > 0.8);
}
