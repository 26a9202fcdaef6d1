// The launcher's one event loop, in the style of ninja's SubprocessSet: one owner of the children and
// one loop. It owns the signal channel (signalfd), the orphan guard, the child processes it started
// (their process groups, their output pipes, reaping) and the registered participants' descriptors and
// deadlines, and waits for all of them in one ppoll until the nearest deadline. Callers add work
// (start_child, add_output, add), ask it to wait (wait_once), and hear what happened through their
// LoopHandler (signals, exited children) and the participants' on_ready / on_time. No caller indexes
// a pollfd array: the loop maps each ready descriptor back to its owner. The Supervisor (one node's
// workers) and the `--hosts` launcher (one node agent per host) both run on it.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "process/orphan_guard.hpp"
#include "process/signal_channel.hpp"
#include "process/worker_process.hpp"
#include "util/exit_status.hpp"

namespace mgtrain {

using LoopClock = std::chrono::steady_clock;
using LoopTime = LoopClock::time_point;

// `wake` becomes `other` when that is sooner; an absent time never wins (for combining next_deadline()s).
inline void keep_earliest(std::optional<LoopTime>& wake, const std::optional<LoopTime>& other) {
  if (other && (!wake || *other < *wake)) wake = other;
}

// Anything that takes part in the loop: it watches descriptors and wants to run at deadlines (a worker's
// output pipe, the node agent's rendezvous sockets, the status API, the supervisor's own timers).
class LoopParticipant {
 public:
  virtual ~LoopParticipant() = default;
  // Appends the descriptors to watch now, with their events (asked before every wait).
  virtual void add_fds(std::vector<pollfd>& fds) { (void)fds; }
  // One of them is ready (revents set); called once per ready descriptor.
  virtual void on_ready(const pollfd& ready, LoopTime now) { (void)ready, (void)now; }
  // When on_time must run at the latest; nullopt: only descriptors can change anything.
  virtual std::optional<LoopTime> next_deadline() const { return std::nullopt; }
  // After every wake-up, whatever woke the loop.
  virtual void on_time(LoopTime now) { (void)now; }
};

// One output stream of a child (a pipe or pty master), owned by the loop until it is closed: by its end
// of stream, or by close_now when the drain after the end gives up on it.
class ChildOutput : public LoopParticipant {
 public:
  virtual bool open() const = 0;
  // Shows what it still holds and closes the stream (an escaped descendant keeps it open).
  virtual void close_now() = 0;
};

struct ChildExit {
  pid_t pid = -1;
  ExitStatus status;
};

// The loop's owner: told of signals and exited children, before the participants' on_ready and on_time.
class LoopHandler {
 public:
  virtual ~LoopHandler() = default;
  // Children that exited since the last SIGCHLD, in the order they were started. Each is reaped and the
  // rest of its process group killed (the zombie kept its id from being reused until then).
  virtual void on_child_exits(const std::vector<ChildExit>& exits, LoopTime now) = 0;
  // Every other signal of the channel (signal_channel.hpp), in arrival order.
  virtual void on_signal(int signal, LoopTime now) = 0;
};

class EventLoop {
 public:
  // After a caller is done, how long the outputs of its children may stay open (held by escaped descendants).
  static constexpr LoopClock::duration kDrainTimeout = std::chrono::seconds(2);

  // Blocks the signals (signal_channel.hpp), then starts the orphan guard.
  explicit EventLoop(LoopHandler& handler);
  // Every child still running is killed (SIGKILL to its process group) and reaped.
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Starts a child in its own process group (worker_process.hpp) with the mask the process had before the
  // loop, announced to the orphan guard. The loop reaps it; its pipes come back for add_output.
  WorkerProcess start_child(WorkerProcessSpec spec);
  // The loop reads the output from now on and drops it once closed.
  void add_output(std::unique_ptr<ChildOutput> output);
  // Participants are asked in the order they were added; `participant` must outlive its membership.
  void add(LoopParticipant& participant);
  void remove(LoopParticipant& participant);

  // `signal` to the process group of every child still running.
  void signal_children(int signal);
  // SIGKILL to every running child's group; reaped now, without telling the handler.
  void kill_children();
  bool any_child_running() const { return !children_.empty(); }

  // One turn: ppoll on the signalfd, every output and every participant's descriptors until the nearest
  // deadline; then ready outputs are read, signals go to the handler (SIGCHLD as the exited children),
  // ready participant descriptors to their owner's on_ready, and every output's and participant's on_time
  // runs. Closed outputs are dropped at the end.
  void wait_once();

  // Once the caller is done: whether every output has closed. The first call that finds one open starts
  // kDrainTimeout (wait_once wakes for it); after it, the rest are closed with close_now.
  bool outputs_drained(LoopTime now);

 private:
  std::optional<LoopTime> next_wake() const;
  void reap_children(LoopTime now);

  LoopHandler& handler_;
  SignalChannel signals_;
  OrphanGuard guard_;
  std::vector<pid_t> children_;  // started and not yet reaped, in start order
  std::vector<std::unique_ptr<ChildOutput>> outputs_;
  std::vector<LoopParticipant*> participants_;
  std::optional<LoopTime> drain_deadline_;
  // Rebuilt every turn: each pollfd and the participant it belongs to (index 0: the signalfd, no owner).
  std::vector<pollfd> poll_fds_;
  std::vector<LoopParticipant*> poll_owners_;
};

}  // namespace mgtrain
