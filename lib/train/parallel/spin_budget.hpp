// How long a waiter polls before it sleeps, learnt at run time from what its waits met. Polling pays off only when
// the awaited party runs at the same time on another CPU and arrives within microseconds; on a busy machine (more
// runnable threads than CPUs, another job beside this one) the party is often not running at all, and polling only
// takes the CPU it needs. So: a wait that ended while polling widens the budget to twice what it took (up to
// kCeiling); a wait that had to sleep halves it (down to kFloor, a short probe that lets the budget grow again when
// the machine gets quiet). The caller sleeps (futex, condition variable) when spin() returns false. No core count
// enters: the same rule spins on an idle 64-core machine and sleeps at once beside a CPU hog on two cores.
#pragma once

#include <algorithm>
#include <chrono>

namespace mgtrain {

class SpinBudget {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr Clock::duration kFloor = std::chrono::microseconds(2);
  static constexpr Clock::duration kCeiling = std::chrono::microseconds(100);
  static constexpr Clock::duration kStart = std::chrono::microseconds(20);

  // Polls `ready` until it returns true (then true) or the budget is spent (then false: sleep).
  template <class Ready>
  bool spin(Ready&& ready) {
    if (ready()) return true;  // no wait: nothing learnt
    const Clock::time_point start = Clock::now();
    const Clock::time_point deadline = start + budget_;
    for (unsigned polls = 1;; ++polls) {
      relax();
      if (ready()) {
        learn(true, Clock::now() - start);
        return true;
      }
      if (polls % 16 == 0 && Clock::now() >= deadline) {
        learn(false, Clock::now() - start);
        return false;
      }
    }
  }

  // The rule alone: a wait that `arrived` while polling after `took`, or one that had to sleep.
  void learn(bool arrived, Clock::duration took) {
    budget_ = arrived ? std::min(std::max(budget_, 2 * took), kCeiling) : std::max(budget_ / 2, kFloor);
    (arrived ? arrivals_ : sleeps_) += 1;
  }

  Clock::duration budget() const { return budget_; }
  long long arrivals() const { return arrivals_; }  // waits that ended while polling
  long long sleeps() const { return sleeps_; }      // waits that went to sleep

 private:
  static void relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }

  Clock::duration budget_ = kStart;
  long long arrivals_ = 0;
  long long sleeps_ = 0;
};

}  // namespace mgtrain
