// Loop participants (a stack dump, a node's diagnosis, the dumping room) run in a test on the launcher's one event
// loop, as the supervisor runs them: LoopRunner owns an EventLoop whose handler ignores signals and children (it
// starts none), and turns it until a condition holds or a limit passes.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <vector>

#include "process/event_loop.hpp"

namespace mgtrain::testing {

class LoopRunner final : public LoopHandler, public LoopParticipant {
 public:
  LoopRunner() : loop_(*this) { loop_.add(*this); }
  ~LoopRunner() override { loop_.remove(*this); }
  LoopRunner(const LoopRunner&) = delete;
  LoopRunner& operator=(const LoopRunner&) = delete;

  void add(LoopParticipant& participant) { loop_.add(participant); }
  void remove(LoopParticipant& participant) { loop_.remove(participant); }
  // Turns the loop until `done` holds (true) or `limit` has passed (false).
  bool run_until(const std::function<bool()>& done, std::chrono::steady_clock::duration limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (!done()) {
      if (std::chrono::steady_clock::now() >= until) return false;
      loop_.wait_once();
    }
    return true;
  }

  void on_child_exits(const std::vector<ChildExit>& exits, LoopTime now) override { (void)exits, (void)now; }
  void on_signal(int signal, LoopTime now) override { (void)signal, (void)now; }
  // The condition is looked at every 20 ms at least, whatever the participants wait for.
  std::optional<LoopTime> next_deadline() const override { return LoopClock::now() + std::chrono::milliseconds(20); }

 private:
  EventLoop loop_;
};

}  // namespace mgtrain::testing
