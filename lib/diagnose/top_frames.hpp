// The few lines of a stacks.txt that a failure report shows: each thread's innermost frames, Python frames when
// the dump has them (they name the user's functions), else native ones.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace mgtrain::diagnose {

// One line per thread, innermost frame first: "stuck_here (train.py:12) < step (train.py:40) < main (train.py:88)"
// or, from native frames, "c10d::Work::wait < mgtrain::GradientReducer::finish_backward < mgtrain::run_epoch":
// native frames lose their argument lists, frames without a symbol are skipped, and so is the waiting layer on top
// (futex, pthread_cond_wait, std::condition_variable::wait, nanosleep, epoll, ...) unless nothing else is left.
// The thread that took the signal (Python) or the main thread (native: TID == PID) comes first; at most
// `max_threads` lines, `frames_per_thread` frames each. Empty when `stacks_text` has no frames.
std::vector<std::string> top_frames(const std::string& stacks_text, std::size_t frames_per_thread = 3,
                                    std::size_t max_threads = 8);

// Whether a thread's top-frames line (one element of top_frames()) shows it waiting in a collective: torch.distributed
// calls (all_reduce, barrier, broadcast, all_gather, reduce_scatter, ... in distributed_c10d.py), c10d's Work::wait
// and ProcessGroup calls, gloo or NCCL, or mgtrain's gradient reducer waiting for its all-reduce. Pure.
bool waits_in_collective(const std::string& top_frames_line);

// Ranks whose top frames are the same, as one group: 32 ranks stuck in 2 places read as 2 groups, not 32 stacks.
struct FrameGroup {
  std::vector<int> ranks;           // ascending
  std::vector<std::string> frames;  // their top frames (empty: ranks without frames)
};

// `ranks` (each rank with its top_frames()) grouped by identical frames, the groups in the order of their lowest rank.
std::vector<FrameGroup> group_by_top_frames(const std::vector<std::pair<int, std::vector<std::string>>>& ranks);

// The groups as text, one group per entry: "ranks 0-2, 5 (4): f1 < f2" with a group's further threads on lines of
// their own below, indented by `indent`; "rank 3 (1): (no frames)".
std::vector<std::string> frame_group_lines(const std::vector<FrameGroup>& groups, const std::string& indent);

}  // namespace mgtrain::diagnose
