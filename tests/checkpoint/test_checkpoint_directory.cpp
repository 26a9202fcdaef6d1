// The checkpoint directory policy: names, choosing the newest valid file (and saying why others were skipped),
// latest/best pointers, pruning, stale temp files, mkdir -p.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_directory.hpp"
#include "checkpoint/checkpoint_file.hpp"
#include "support/checkpoint_test_data.hpp"
#include "support/temp_dir.hpp"
#include "util/error.hpp"

using namespace mgtrain;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string write_step(const fs::path& dir, std::int64_t step) {
  const testing::TestCheckpoint checkpoint = testing::make_test_checkpoint(step, 0.01);
  const std::string path = (dir / checkpoint_file_name(step)).string();
  write_checkpoint_file(path, checkpoint.metadata, checkpoint.records);
  return path;
}

void write_text(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

}  // namespace

TEST_CASE("checkpoint directory: file names by step", "[checkpoint][directory]") {
  CHECK(checkpoint_file_name(0) == "checkpoint-step000000000.safetensors");
  CHECK(checkpoint_file_name(1200) == "checkpoint-step000001200.safetensors");
  CHECK(checkpoint_file_name(12345678901) == "checkpoint-step12345678901.safetensors");
  CHECK_THROWS_AS(checkpoint_file_name(-1), Error);
  CHECK(checkpoint_step_from_file_name("checkpoint-step000001200.safetensors") == 1200);
  CHECK(checkpoint_step_from_file_name("checkpoint-step12345678901.safetensors") == 12345678901);
  for (const char* other :
       {"checkpoint-step1200.safetensors", "checkpoint-step0000001200.safetensors",
        "checkpoint-step00000120x.safetensors", ".checkpoint-step000001200.safetensors.tmp.42",
        "checkpoint-step000001200.safetensors.bak", "latest", "best", "checkpoint-step-00000001.safetensors",
        "checkpoint-step99999999999999999999.safetensors"}) {
    INFO(other);
    CHECK_FALSE(checkpoint_step_from_file_name(other));
  }
}

TEST_CASE("checkpoint directory: listing ignores temp and unrelated files", "[checkpoint][directory]") {
  const testing::TempDir temp_dir("mgtrain-ckptdir-list");
  const fs::path dir = temp_dir.path();
  CHECK(list_checkpoints((dir / "missing").string()).empty());
  write_step(dir, 20);
  write_step(dir, 3);
  write_step(dir, 1000000000);
  write_text(dir / ".checkpoint-step000000030.safetensors.tmp.77", "partial");
  write_text(dir / "notes.txt", "x");
  write_text(dir / "checkpoint-step3.safetensors", "x");
  const auto listed = list_checkpoints(dir.string());
  REQUIRE(listed.size() == 3);
  CHECK(listed[0].step == 3);
  CHECK(listed[1].step == 20);
  CHECK(listed[2].step == 1000000000);
  CHECK(listed[1].name == "checkpoint-step000000020.safetensors");
  CHECK(listed[1].path == (dir / "checkpoint-step000000020.safetensors").string());
}

TEST_CASE("checkpoint directory: newest valid falls back past corrupt and truncated files and says why",
          "[checkpoint][directory]") {
  const testing::TempDir temp_dir("mgtrain-ckptdir-newest");
  const fs::path dir = temp_dir.path();
  CHECK_FALSE(newest_valid_checkpoint(dir.string()).chosen);
  const std::string step1 = write_step(dir, 1), step2 = write_step(dir, 2), step3 = write_step(dir, 3);

  NewestValidCheckpoint newest = newest_valid_checkpoint(dir.string());
  REQUIRE(newest.chosen);
  CHECK(newest.chosen->path == step3);
  CHECK(newest.notes.empty());

  // Step 3: one flipped data byte. Step 2: truncated.
  {
    std::fstream file(step3, std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(-10, std::ios::end);
    const char byte = static_cast<char>(file.get());
    file.seekp(-10, std::ios::end);
    file.put(static_cast<char>(byte ^ 0x10));
  }
  fs::resize_file(step2, fs::file_size(step2) - 100);
  newest = newest_valid_checkpoint(dir.string());
  REQUIRE(newest.chosen);
  CHECK(newest.chosen->path == step1);
  CHECK(newest.chosen->step == 1);
  REQUIRE(newest.notes.size() == 2);
  CHECK_THAT(newest.notes[0], Contains(step3 + ": checksum mismatch: stored ") && Contains(", using " + step1));
  CHECK_THAT(newest.notes[1], Contains(step2 + ": truncated: the header says ") && Contains(", using " + step1));

  fs::remove(step1);
  newest = newest_valid_checkpoint(dir.string());
  CHECK_FALSE(newest.chosen);
  REQUIRE(newest.notes.size() == 2);
  CHECK_THAT(newest.notes[1], Contains(step2 + ": truncated") && Contains(", and no older checkpoint is valid"));
}

TEST_CASE("checkpoint directory: latest pointer", "[checkpoint][directory]") {
  const testing::TempDir temp_dir("mgtrain-ckptdir-latest");
  const fs::path dir = temp_dir.path();
  CHECK_FALSE(read_latest_pointer(dir.string()));
  update_latest_pointer(dir.string(), checkpoint_file_name(5));
  std::ifstream in(dir / "latest");
  CHECK(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()) ==
        "checkpoint-step000000005.safetensors\n");
  CHECK(read_latest_pointer(dir.string()) == checkpoint_file_name(5));
  update_latest_pointer(dir.string(), checkpoint_file_name(6));
  CHECK(read_latest_pointer(dir.string()) == checkpoint_file_name(6));
  CHECK(names_in(dir) == std::vector<std::string>{"latest"});
  CHECK_THROWS_WITH(update_latest_pointer(dir.string(), "a/b"), Contains("is not a plain file name"));
  write_text(dir / "latest", "two\nlines\n");
  CHECK_THROWS_WITH(read_latest_pointer(dir.string()),
                    Contains((dir / "latest").string() + ": expected one file name and a newline"));
}

TEST_CASE("checkpoint directory: resolve_checkpoint follows latest and best and takes a directory's newest valid",
          "[checkpoint][directory]") {
  const testing::TempDir temp_dir("mgtrain-ckptdir-resolve");
  const fs::path dir = temp_dir.path();
  const std::string step1 = write_step(dir, 1), step2 = write_step(dir, 2);
  update_latest_pointer(dir.string(), checkpoint_file_name(1));
  update_best_pointer(dir.string(), {checkpoint_file_name(2), "eval.loss", 0.5});

  // A file is itself, whatever it holds (the caller verifies it).
  ResolvedCheckpoint resolved = resolve_checkpoint(step2);
  CHECK(resolved.path == step2);
  CHECK(resolved.how.empty());
  CHECK(resolve_checkpoint((dir / "absent").string()).path == (dir / "absent").string());
  // The pointers: the file they name, next to them.
  resolved = resolve_checkpoint((dir / "latest").string());
  CHECK(resolved.path == step1);
  CHECK(resolved.how == "named by " + (dir / "latest").string());
  CHECK(resolve_checkpoint((dir / "best").string()).path == step2);
  // A directory: its newest valid checkpoint (not what latest says), damaged ones noted.
  resolved = resolve_checkpoint(dir.string());
  CHECK(resolved.path == step2);
  CHECK(resolved.how == "the newest valid checkpoint in " + dir.string());
  fs::resize_file(step2, fs::file_size(step2) - 1);
  resolved = resolve_checkpoint(dir.string());
  CHECK(resolved.path == step1);
  REQUIRE(resolved.notes.size() == 1);
  CHECK_THAT(resolved.notes[0], Contains(step2 + ": truncated"));
  // A malformed pointer is the user's input: UsageError naming it.
  write_text(dir / "latest", "not a name/\n");
  CHECK_THROWS_AS(resolve_checkpoint((dir / "latest").string()), UsageError);
  CHECK_THROWS_WITH(resolve_checkpoint((dir / "latest").string()), Contains((dir / "latest").string()));
  // A directory without checkpoints: no path.
  fs::create_directory(dir / "empty");
  CHECK(resolve_checkpoint((dir / "empty").string()).path.empty());
}

TEST_CASE("checkpoint directory: prune keeps the newest, the protected and the latest", "[checkpoint][directory]") {
  const testing::TempDir temp_dir("mgtrain-ckptdir-prune");
  const fs::path dir = temp_dir.path();
  for (int step : {1, 2, 3, 4, 5, 6}) write_step(dir, step);
  write_text(dir / "notes.txt", "x");
  update_latest_pointer(dir.string(), checkpoint_file_name(2));  // e.g. after falling back to step 2
  CHECK_THROWS_WITH(prune_checkpoints(dir.string(), 0), Contains("keep_last is 0, it must be at least 1"));

  const auto removed = prune_checkpoints(dir.string(), 2, {checkpoint_file_name(3)});
  CHECK(removed == std::vector<std::string>{checkpoint_file_name(1), checkpoint_file_name(4)});
  CHECK(names_in(dir) == std::vector<std::string>{checkpoint_file_name(2), checkpoint_file_name(3),
                                                  checkpoint_file_name(5), checkpoint_file_name(6), "latest",
                                                  "notes.txt"});
  update_latest_pointer(dir.string(), checkpoint_file_name(6));
  CHECK(prune_checkpoints(dir.string(), 1) ==
        std::vector<std::string>{checkpoint_file_name(2), checkpoint_file_name(3), checkpoint_file_name(5)});
  CHECK(prune_checkpoints(dir.string(), 1).empty());
  CHECK(names_in(dir) == std::vector<std::string>{checkpoint_file_name(6), "latest", "notes.txt"});
}

TEST_CASE("checkpoint directory: best pointer", "[checkpoint][directory]") {
  const testing::TempDir temp_dir("mgtrain-ckptdir-best");
  const fs::path dir = temp_dir.path();
  CHECK_FALSE(read_best_pointer(dir.string()));
  update_best_pointer(dir.string(), {checkpoint_file_name(40), "val_loss", 0.1234567890123});
  std::ifstream in(dir / "best");
  CHECK(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()) ==
        "{\"file\":\"checkpoint-step000000040.safetensors\",\"metric\":\"val_loss\",\"value\":0.1234567890123}\n");
  const auto best = read_best_pointer(dir.string());
  REQUIRE(best);
  CHECK(best->file_name == checkpoint_file_name(40));
  CHECK(best->metric == "val_loss");
  CHECK(best->value == 0.1234567890123);
  update_best_pointer(dir.string(), {checkpoint_file_name(50), "accuracy", -1e-300});
  CHECK(read_best_pointer(dir.string())->value == -1e-300);
  CHECK_THROWS_WITH(update_best_pointer(dir.string(), {checkpoint_file_name(50), "loss", std::nan("")}),
                    Contains("is not a finite number"));
  write_text(dir / "best", "{\"file\":\"x\"}\n");
  CHECK_THROWS_WITH(read_best_pointer(dir.string()),
                    Contains((dir / "best").string() + ": malformed best-checkpoint pointer"));
  write_text(dir / "best", "{\"file\": [\n");
  CHECK_THROWS_WITH(read_best_pointer(dir.string()), Contains("malformed best-checkpoint pointer"));
}

TEST_CASE("checkpoint directory: stale temp files of a killed writer are removed", "[checkpoint][directory]") {
  const testing::TempDir temp_dir("mgtrain-ckptdir-stale");
  const fs::path dir = temp_dir.path();
  CHECK(remove_stale_temp_files((dir / "missing").string()).empty());
  write_step(dir, 1);
  update_latest_pointer(dir.string(), checkpoint_file_name(1));
  write_text(dir / ".checkpoint-step000000002.safetensors.tmp.4242", "partial");
  write_text(dir / ".latest.tmp.4242", "partial");
  write_text(dir / ".best.tmp.17", "partial");
  write_text(dir / ".other.tmp.1", "not ours");
  CHECK(remove_stale_temp_files(dir.string()) ==
        std::vector<std::string>{".best.tmp.17", ".checkpoint-step000000002.safetensors.tmp.4242", ".latest.tmp.4242"});
  CHECK(names_in(dir) == std::vector<std::string>{".other.tmp.1", checkpoint_file_name(1), "latest"});
}

TEST_CASE("checkpoint directory: created with parents, clear error when a file is in the way",
          "[checkpoint][directory]") {
  const testing::TempDir temp_dir("mgtrain-ckptdir-mkdir");
  const fs::path dir = temp_dir.path();
  create_checkpoint_directory((dir / "a" / "b" / "c").string());
  CHECK(fs::is_directory(dir / "a" / "b" / "c"));
  create_checkpoint_directory((dir / "a" / "b" / "c").string() + "/");  // exists: fine
  write_text(dir / "file", "x");
  CHECK_THROWS_WITH(create_checkpoint_directory((dir / "file" / "sub").string()),
                    "create directory " + (dir / "file" / "sub").string() + ": " + (dir / "file").string() +
                        " exists and is not a directory");
}
