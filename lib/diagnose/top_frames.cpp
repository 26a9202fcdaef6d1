// Reading the innermost frames out of a stacks.txt (see top_frames.hpp).
#include "diagnose/top_frames.hpp"

#include <algorithm>
#include <map>
#include <regex>

#include "util/strings.hpp"

namespace mgtrain::diagnose {

namespace {

struct Thread {
  bool first = false;  // the signalled (Python) or main (native) thread
  std::vector<std::string> frames;
};

enum class Section { none, python, native, other };

// faulthandler: `  File "/path/train.py", line 12 in stuck_here`
const std::regex& python_frame() {
  static const std::regex pattern(R"re(^\s+File "(.*)", line (\d+) in (.+)$)re");
  return pattern;
}
// eu-stack: `#3  0x00007f0c2a1d5f3e run_epoch(...)` (no symbol: only the address)
const std::regex& native_frame() {
  static const std::regex pattern(R"re(^#\d+\s+0x[0-9a-fA-F]+\s+(\S.*)$)re");
  return pattern;
}

// The C library's and the standard library's waiting layer, which tops nearly every thread of a stuck program and
// says nothing of where it is stuck.
const std::regex& waiting_layer() {
  static const std::regex pattern(
      R"re(^(__|_?pthread_|std::|clock_nanosleep|nanosleep|usleep|sleep|epoll_|poll|ppoll|select|pselect|syscall|)re"
      R"re(futex|sem_|read|recv|accept|wait|do_futex|start_thread|clone))re");
  return pattern;
}

// A native frame as the report shows it: "mgtrain::run_training" for "mgtrain::run_training(mgtrain::Config
// const&, ...)", without "(anonymous namespace)::" and at most 100 characters.
std::string short_native_name(std::string name) {
  const std::string anonymous = "(anonymous namespace)::";
  for (auto at = name.find(anonymous); at != std::string::npos; at = name.find(anonymous))
    name.erase(at, anonymous.size());
  if (const auto open = name.find('('); open != std::string::npos && open > 0) name.erase(open);
  constexpr std::size_t kLongest = 100;
  if (name.size() > kLongest) name = name.substr(0, kLongest - 3) + "...";
  return name;
}

// A thread's native frames without the waiting layer on top (all of them when nothing else is left).
std::vector<std::string> past_waiting_layer(const std::vector<std::string>& frames) {
  std::size_t first = 0;
  while (first < frames.size() && std::regex_search(frames[first], waiting_layer())) ++first;
  if (first == frames.size()) first = 0;
  std::vector<std::string> shown;
  for (std::size_t i = first; i < frames.size(); ++i) shown.push_back(short_native_name(frames[i]));
  return shown;
}

std::string base_name(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::vector<Thread> read_threads(const std::string& text, Section wanted) {
  std::vector<Thread> threads;
  Section section = Section::none;
  std::string pid;
  for (const auto& line : split_lines(text)) {
    if (starts_with(line, "== ")) {
      section = starts_with(line, "== Python")   ? Section::python
                : starts_with(line, "== native") ? Section::native
                                                 : Section::other;
      continue;
    }
    if (section != wanted) continue;
    std::smatch match;
    if (wanted == Section::python) {
      if (starts_with(line, "Thread 0x") || starts_with(line, "Current thread 0x")) {
        threads.push_back(Thread{starts_with(line, "Current thread"), {}});
      } else if (!threads.empty() && std::regex_match(line, match, python_frame())) {
        threads.back().frames.push_back(match[3].str() + " (" + base_name(match[1].str()) + ":" + match[2].str() + ")");
      }
    } else {
      if (starts_with(line, "PID ")) {
        pid = line.substr(4, line.find(' ', 4) - 4);
      } else if (starts_with(line, "TID ")) {
        const std::string tid = line.substr(4, line.find(':') - 4);
        threads.push_back(Thread{tid == pid, {}});
      } else if (!threads.empty() && std::regex_match(line, match, native_frame())) {
        threads.back().frames.push_back(match[1].str());
      }
    }
  }
  if (wanted == Section::native) {
    for (auto& thread : threads) thread.frames = past_waiting_layer(thread.frames);
  }
  threads.erase(std::remove_if(threads.begin(), threads.end(), [](const Thread& t) { return t.frames.empty(); }),
                threads.end());
  std::stable_partition(threads.begin(), threads.end(), [](const Thread& t) { return t.first; });
  return threads;
}

}  // namespace

bool waits_in_collective(const std::string& top_frames_line) {
  static const char* const kMarks[] = {
      "distributed_c10d.py",
      "c10d::",
      "gloo::",
      "nccl",
      "ProcessGroup",
      "all_reduce",
      "allreduce",
      "all_gather",
      "allgather",
      "reduce_scatter",
      "broadcast (",
      "barrier (",
      "GradientReducer::finish",
  };
  for (const char* mark : kMarks) {
    if (top_frames_line.find(mark) != std::string::npos) return true;
  }
  return false;
}

std::vector<std::string> top_frames(const std::string& stacks_text, std::size_t frames_per_thread,
                                    std::size_t max_threads) {
  std::vector<Thread> threads = read_threads(stacks_text, Section::python);
  if (threads.empty()) threads = read_threads(stacks_text, Section::native);
  std::vector<std::string> lines;
  for (const auto& thread : threads) {
    if (lines.size() >= max_threads) break;
    std::string line;
    for (std::size_t i = 0; i < thread.frames.size() && i < frames_per_thread; ++i) {
      if (i > 0) line += " < ";
      line += thread.frames[i];
    }
    lines.push_back(line);
  }
  return lines;
}

std::vector<FrameGroup> group_by_top_frames(const std::vector<std::pair<int, std::vector<std::string>>>& ranks) {
  std::map<std::vector<std::string>, FrameGroup> by_frames;
  for (const auto& [rank, frames] : ranks) {
    FrameGroup& group = by_frames[frames];
    group.frames = frames;
    group.ranks.push_back(rank);
  }
  std::vector<FrameGroup> groups;
  for (auto& [frames, group] : by_frames) {
    std::sort(group.ranks.begin(), group.ranks.end());
    groups.push_back(std::move(group));
  }
  std::sort(groups.begin(), groups.end(),
            [](const FrameGroup& a, const FrameGroup& b) { return a.ranks.front() < b.ranks.front(); });
  return groups;
}

std::vector<std::string> frame_group_lines(const std::vector<FrameGroup>& groups, const std::string& indent) {
  std::vector<std::string> lines;
  for (const FrameGroup& group : groups) {
    std::string line = (group.ranks.size() == 1 ? "rank " : "ranks ") + rank_runs(group.ranks, RankRuns::Prose) + " (" +
                       std::to_string(group.ranks.size()) + "): ";
    if (group.frames.empty()) {
      line += "(no frames)";
    } else {
      line += group.frames.front();
      for (std::size_t i = 1; i < group.frames.size(); ++i) line += "\n" + indent + "  " + group.frames[i];
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

}  // namespace mgtrain::diagnose
