// The one event loop: children, outputs, participants and signals under one ppoll (see event_loop.hpp).
#include "process/event_loop.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>

#include "util/error.hpp"

namespace mgtrain {

EventLoop::EventLoop(LoopHandler& handler) : handler_(handler) {}

EventLoop::~EventLoop() { kill_children(); }

WorkerProcess EventLoop::start_child(WorkerProcessSpec spec) {
  spec.announce_fd = guard_.announce_fd();  // the child registers its process group itself
  WorkerProcess process = start_worker_process(spec);
  children_.push_back(process.pid);
  return process;
}

void EventLoop::add_output(std::unique_ptr<ChildOutput> output) { outputs_.push_back(std::move(output)); }

void EventLoop::add(LoopParticipant& participant) { participants_.push_back(&participant); }

void EventLoop::remove(LoopParticipant& participant) {
  participants_.erase(std::remove(participants_.begin(), participants_.end(), &participant), participants_.end());
  std::replace(poll_owners_.begin(), poll_owners_.end(), &participant, static_cast<LoopParticipant*>(nullptr));
}

void EventLoop::signal_children(int signal) {
  for (pid_t child : children_) signal_process_group(child, signal);
}

void EventLoop::kill_children() {
  for (pid_t child : children_) {
    signal_process_group(child, SIGKILL);
    reap(child);
    guard_.forget(child);
  }
  children_.clear();
}

void EventLoop::reap_children(LoopTime now) {
  std::vector<ChildExit> exits;
  std::vector<pid_t> running;
  for (pid_t child : children_) {
    const std::optional<ExitStatus> status = collect_exit(child, guard_);
    if (status) {
      exits.push_back(ChildExit{child, *status});
    } else {
      running.push_back(child);
    }
  }
  children_ = std::move(running);
  // As one batch: the handler may start new children (the next attempt) while it handles the last exit.
  if (!exits.empty()) handler_.on_child_exits(exits, now);
}

std::optional<LoopTime> EventLoop::next_wake() const {
  std::optional<LoopTime> wake = drain_deadline_;
  for (const auto& output : outputs_) keep_earliest(wake, output->next_deadline());
  for (const LoopParticipant* participant : participants_) keep_earliest(wake, participant->next_deadline());
  return wake;
}

void EventLoop::wait_once() {
  poll_fds_.clear();
  poll_owners_.clear();
  poll_fds_.push_back(pollfd{signals_.fd(), POLLIN, 0});
  poll_owners_.push_back(nullptr);
  const std::size_t outputs_first = poll_fds_.size();
  auto add_fds_of = [this](LoopParticipant* owner) {
    owner->add_fds(poll_fds_);
    poll_owners_.resize(poll_fds_.size(), owner);
  };
  for (const auto& output : outputs_) add_fds_of(output.get());
  const std::size_t participants_first = poll_fds_.size();
  for (LoopParticipant* participant : participants_) add_fds_of(participant);

  const std::optional<LoopTime> wake = next_wake();
  const int ready = wait_ready(poll_fds_.data(), poll_fds_.size(), wake, "in the event loop");
  const LoopTime now = LoopClock::now();

  if (ready > 0) {
    // Output first: a worker's last lines are in its log before its exit is reported.
    for (std::size_t index = outputs_first; index < participants_first; ++index) {
      if (poll_fds_[index].revents != 0) poll_owners_[index]->on_ready(poll_fds_[index], now);
    }
    if (poll_fds_[0].revents != 0) {
      for (int signal : signals_.take_pending()) {
        if (signal == SIGCHLD) {
          reap_children(now);
        } else {
          handler_.on_signal(signal, now);
        }
      }
    }
    for (std::size_t index = participants_first; index < poll_fds_.size(); ++index) {
      if (poll_fds_[index].revents != 0 && poll_owners_[index]) poll_owners_[index]->on_ready(poll_fds_[index], now);
    }
  }
  for (const auto& output : outputs_) output->on_time(now);
  for (std::size_t index = 0; index < participants_.size(); ++index) participants_[index]->on_time(now);
  outputs_.erase(std::remove_if(outputs_.begin(), outputs_.end(),
                                [](const std::unique_ptr<ChildOutput>& output) { return !output->open(); }),
                 outputs_.end());
}

bool EventLoop::outputs_drained(LoopTime now) {
  const bool any_open = std::any_of(outputs_.begin(), outputs_.end(),
                                    [](const std::unique_ptr<ChildOutput>& output) { return output->open(); });
  if (!any_open) {
    outputs_.clear();
    return true;
  }
  if (!drain_deadline_) drain_deadline_ = now + kDrainTimeout;
  if (now < *drain_deadline_) return false;
  for (auto& output : outputs_) {  // a descendant still holds a pipe open: stop waiting for it
    if (output->open()) output->close_now();
  }
  outputs_.clear();
  return true;
}

}  // namespace mgtrain
