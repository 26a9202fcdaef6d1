// The policy over a directory of checkpoint files: names by global step, choosing the newest valid one (with
// a note for every damaged one skipped), the `latest` and `best` pointer files, pruning to keep_last, and
// cleaning up temporary files left by a killed writer. Torch-free; the files themselves are
// checkpoint/checkpoint_file.
//
// Layout of a checkpoint directory:
//   checkpoint-step000001200.safetensors   one per saved step (9-digit zero-padded global step; more digits
//                                          past 999999999)
//   latest                                 the newest saved file's name and a newline, replaced atomically
//   best                                   one JSON line: {"file":"<name>","metric":"<metric>","value":<number>}
//   .<name>.tmp.<pid>                      a write in progress (or left by a killed writer)
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace mgtrain {

// "checkpoint-step000000042.safetensors" for step 42 (step >= 0).
std::string checkpoint_file_name(std::int64_t step);

// The step of a checkpoint file name, or nullopt for any other name (temporary files included).
std::optional<std::int64_t> checkpoint_step_from_file_name(const std::string& name);

struct CheckpointListing {
  std::int64_t step = 0;
  std::string name;  // file name
  std::string path;  // directory + "/" + name
};

// The checkpoint files in `dir`, oldest step first; other files are ignored. A missing directory lists
// nothing; one that cannot be read throws SystemError.
std::vector<CheckpointListing> list_checkpoints(const std::string& dir);

struct NewestValidCheckpoint {
  std::optional<CheckpointListing> chosen;  // none when no checkpoint is valid (or there is none)
  // One line per skipped file, newest first: "<path>: <what is wrong>, using <older path>" (or ", and no
  // older checkpoint is valid").
  std::vector<std::string> notes;
};

// Walks from the newest step down, verifying each file completely (verify_checkpoint_file), and returns the
// first valid one. `latest` is not consulted: a writer killed after its rename but before the pointer update
// leaves a complete newer file, and that one is the right one to resume from.
NewestValidCheckpoint newest_valid_checkpoint(const std::string& dir);

// What a path given for one checkpoint names: one rule for `checkpoint.resume: PATH` and `mgtrain export PATH`.
//  - a directory: its newest valid checkpoint (newest_valid_checkpoint), with the notes of the damaged ones skipped;
//  - a file named `latest` or `best`: the checkpoint that pointer names, in the pointer's directory;
//  - anything else: itself (the caller verifies or reads it and says what is wrong, e.g. that it does not exist).
// A malformed pointer throws UsageError naming it.
struct ResolvedCheckpoint {
  std::string path;  // the checkpoint file; "" for a directory without a valid checkpoint
  // "" when `path` is what was given; else how it was found, for messages: "named by runs/r/checkpoints/latest",
  // "the newest valid checkpoint in runs/r/checkpoints".
  std::string how;
  std::vector<std::string> notes;  // a directory's damaged files skipped (newest_valid_checkpoint's notes)
};
ResolvedCheckpoint resolve_checkpoint(const std::string& path);

// Writes `<dir>/latest` = file_name + "\n" atomically.
void update_latest_pointer(const std::string& dir, const std::string& file_name);

// The file name in `<dir>/latest`, or nullopt when there is none. A malformed pointer (not one checkpoint
// file name on one line) throws Error naming it.
std::optional<std::string> read_latest_pointer(const std::string& dir);

// Removes the oldest checkpoint files so that the newest `keep_last` (>= 1, else Error) remain, never one
// named in `protect` (e.g. the best one) nor the one `latest` names. Returns the removed file names.
std::vector<std::string> prune_checkpoints(const std::string& dir, int keep_last,
                                           const std::set<std::string>& protect = {});

// Removes temporary files a killed writer left (.checkpoint-step*.tmp.*, .latest.tmp.*, .best.tmp.*) and
// returns their names. Call it when no writer is active in `dir` (e.g. at start, before resuming).
std::vector<std::string> remove_stale_temp_files(const std::string& dir);

struct BestCheckpoint {
  std::string file_name;
  std::string metric;  // e.g. "val_loss"
  double value = 0;    // finite
};

// Writes `<dir>/best` atomically (format in the comment at the top).
void update_best_pointer(const std::string& dir, const BestCheckpoint& best);

// `<dir>/best`, or nullopt when there is none; a malformed one throws Error naming it.
std::optional<BestCheckpoint> read_best_pointer(const std::string& dir);

// mkdir -p; SystemError naming the directory (or the component that is in the way) when it fails.
void create_checkpoint_directory(const std::string& dir);

}  // namespace mgtrain
