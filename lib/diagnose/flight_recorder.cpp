// torch's NCCL flight recorder: worker variables, finding the dumps, the on-demand pipe (see flight_recorder.hpp).
#include "diagnose/flight_recorder.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "util/fd.hpp"
#include "util/strings.hpp"

namespace mgtrain::diagnose {

namespace {

// One setting: every name torch reads for it (a user's value under any of them wins), the name mgtrain sets (the
// TORCH_NCCL_ one, which every torch 2.x reads; newer ones also read a TORCH_FR_ name first and may warn once that
// the older name is deprecated) and the value. The buffer size is not set: torch 2.x keeps 2000 entries by default,
// and setting TORCH_NCCL_TRACE_BUFFER_SIZE makes every process of a newer torch warn that the name is deprecated.
struct Setting {
  std::vector<const char*> names;
  const char* name_set;
  std::string value;
};

bool any_set(const EnvMap& environment, const std::vector<const char*>& names) {
  return std::any_of(names.begin(), names.end(), [&](const char* name) { return environment.count(name) != 0; });
}

}  // namespace

EnvMap flight_recorder_environment(const EnvMap& environment, const std::string& rank_directory) {
  const std::string prefix =
      (std::filesystem::absolute(rank_directory).lexically_normal() / kFlightRecorderPrefix).string();
  const std::vector<Setting> settings = {
      {{"TORCH_FR_DUMP_ON_TIMEOUT", "TORCH_NCCL_DUMP_ON_TIMEOUT"}, "TORCH_NCCL_DUMP_ON_TIMEOUT", "1"},
      {{"TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"}, "TORCH_NCCL_DEBUG_INFO_TEMP_FILE", prefix},
      {{"TORCH_NCCL_DEBUG_INFO_PIPE_FILE"}, "TORCH_NCCL_DEBUG_INFO_PIPE_FILE", prefix},
  };
  EnvMap added;
  for (const auto& setting : settings) {
    if (any_set(environment, setting.names)) continue;
    added[setting.name_set] = setting.value;
  }
  return added;
}

std::vector<std::string> flight_recorder_files(const std::string& rank_directory) {
  std::vector<std::string> files;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(rank_directory, error)) {
    const std::string name = entry.path().filename().string();
    std::error_code type_error;
    if (starts_with(name, kFlightRecorderPrefix) && !ends_with(name, ".pipe") && entry.is_regular_file(type_error)) {
      files.push_back(entry.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<std::string> gather_flight_recorder_files(const std::vector<std::string>& rank_directories,
                                                      const std::string& folder) {
  std::vector<std::string> copies;
  for (const auto& rank_directory : rank_directories) {
    for (const auto& dump : flight_recorder_files(rank_directory)) {
      std::error_code error;
      std::filesystem::create_directories(folder, error);
      const auto copy = std::filesystem::path(folder) / std::filesystem::path(dump).filename();
      std::filesystem::copy_file(dump, copy, std::filesystem::copy_options::overwrite_existing, error);
      if (!error) copies.push_back(copy.string());
    }
  }
  return copies;
}

int request_flight_recorder_dump(const std::string& rank_directory) {
  int requested = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(rank_directory, error)) {
    const std::string name = entry.path().filename().string();
    std::error_code type_error;
    if (!starts_with(name, kFlightRecorderPrefix) || !ends_with(name, ".pipe") || !entry.is_fifo(type_error)) continue;
    // O_NONBLOCK: ENXIO at once when nobody reads it (the process group is gone), never a hang.
    Fd pipe(open(entry.path().c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
    if (!pipe) continue;
    if (write(pipe.get(), "1", 1) == 1) ++requested;
  }
  return requested;
}

}  // namespace mgtrain::diagnose
