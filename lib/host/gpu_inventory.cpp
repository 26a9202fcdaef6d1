// GPU discovery from the NVIDIA driver's files; no CUDA runtime involved.
#include "host/gpu_inventory.hpp"

#include <dirent.h>
#include <cctype>
#include <set>

#include "util/strings.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain {
namespace {

std::string join_path(const std::string& root, const std::string& relative) {
  if (root.empty()) return relative;
  return root.back() == '/' ? root + relative : root + "/" + relative;
}

// Calls `visit` with each entry name of `directory` except "." and ".."; false if unreadable.
template <typename Visit>
bool for_each_entry(const std::string& directory, Visit visit) {
  DIR* dir = opendir(directory.c_str());
  if (dir == nullptr) return false;
  while (dirent* entry = readdir(dir)) {
    std::string name = entry->d_name;
    if (name != "." && name != "..") visit(name);
  }
  closedir(dir);
  return true;
}

}  // namespace

int count_nvidia_gpus(const std::string& root) {
  int from_proc = 0;
  if (for_each_entry(join_path(root, "proc/driver/nvidia/gpus"), [&](const std::string&) { ++from_proc; }) &&
      from_proc > 0) {
    return from_proc;
  }
  int from_dev = 0;
  for_each_entry(join_path(root, "dev"), [&](const std::string& name) {
    if (starts_with(name, "nvidia") && all_digits(name.substr(6))) ++from_dev;
  });
  return from_dev;
}

std::vector<std::string> visible_gpus(int physical_gpu_count, const std::optional<std::string>& cuda_visible_devices) {
  std::vector<std::string> visible;
  if (!cuda_visible_devices) {
    for (int index = 0; index < physical_gpu_count; ++index) visible.push_back(std::to_string(index));
    return visible;
  }
  std::set<std::string> seen;
  const std::string& list = *cuda_visible_devices;
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t comma = list.find(',', start);
    std::string entry = trim(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    bool valid;
    if (all_digits(entry)) {
      valid = entry.size() < 6 && std::stoi(entry) < physical_gpu_count;
      if (valid) entry = std::to_string(std::stoi(entry));
    } else {
      valid = starts_with(entry, "GPU-") || starts_with(entry, "MIG-");
    }
    if (!valid || !seen.insert(entry).second) break;  // CUDA ignores everything from the first bad entry on
    visible.push_back(entry);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return visible;
}

}  // namespace mgtrain
