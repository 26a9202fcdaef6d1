// Preparing <log_dir>/<run_id>/ for a launch, and writing the run's own files in it. Launching again with an
// existing run id (to resume it, say) keeps what the earlier launch left: its config.yaml, failure.json and
// attempt_<n>/ logs move to earlier/<k>/ (k = 1, 2, ...). Checkpoints and anything else in the directory stay
// where they are.
#pragma once

#include <string>

namespace mgtrain {

// Creates the run directory (and its parents) if needed. Throws Error naming it and launch.log_dir when it cannot.
void create_run_directory(const std::string& run_dir);

// Creates the directory if needed and archives an earlier launch's files. Returns the archive's path,
// or "" when there was nothing to keep. Throws Error naming the directory when it cannot be written.
std::string prepare_run_directory(const std::string& run_dir);

// Writes one of the run's own files (config.yaml, failure.json), replacing it. Throws Error naming the path
// and launch.log_dir when it cannot be written.
void write_run_file(const std::string& path, const std::string& text);

}  // namespace mgtrain
