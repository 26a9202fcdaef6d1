// The waits of the step (train/parallel/spin_budget.hpp): the budget a waiter polls for grows with waits that ended
// while it polled and shrinks with waits that had to sleep; and spin() itself, with conditions that hold at once,
// after a number of polls, or never (no clock of another program is asserted on).
#include "catch_with_torch.hpp"

#include <atomic>
#include <chrono>
#include <thread>

#include "train/parallel/spin_budget.hpp"

using namespace mgtrain;
using namespace std::chrono_literals;

TEST_CASE("spin budget: waits that sleep halve it down to the floor, waits met while polling widen it", "[ddp][spin]") {
  SpinBudget budget;
  CHECK(budget.budget() == SpinBudget::kStart);
  budget.learn(false, 20us);
  CHECK(budget.budget() == SpinBudget::kStart / 2);
  for (int i = 0; i < 20; ++i) budget.learn(false, 10us);  // a busy machine: the party is never running
  CHECK(budget.budget() == SpinBudget::kFloor);            // a short probe is left, never nothing
  budget.learn(true, 1us);  // the machine got quiet: a party that arrived within the probe
  CHECK(budget.budget() == SpinBudget::kFloor);
  budget.learn(true, 9us);  // twice what the wait took
  CHECK(budget.budget() == 18us);
  budget.learn(true, 3us);  // a quicker arrival does not shrink it
  CHECK(budget.budget() == 18us);
  budget.learn(true, 1s);  // never beyond the ceiling
  CHECK(budget.budget() == SpinBudget::kCeiling);
  CHECK(budget.arrivals() == 4);
  CHECK(budget.sleeps() == 21);
}

TEST_CASE("spin budget: spin() returns what the condition says and learns only from real waits", "[ddp][spin]") {
  SpinBudget budget;
  CHECK(budget.spin([] { return true; }));  // no wait at all: nothing learnt
  CHECK(budget.arrivals() + budget.sleeps() == 0);

  int polls = 0;
  CHECK(budget.spin([&polls] { return ++polls == 5; }));  // met while polling
  CHECK(polls == 5);
  CHECK(budget.arrivals() == 1);
  CHECK(budget.budget() >= SpinBudget::kStart);

  CHECK_FALSE(budget.spin([] { return false; }));  // never: it gives up (the caller sleeps) and halves the budget
  CHECK(budget.sleeps() == 1);
  CHECK(budget.budget() < SpinBudget::kCeiling);
}

TEST_CASE("spin budget: a party on another thread is seen arriving, whether polled or slept for", "[ddp][spin]") {
  SpinBudget budget;
  for (int round = 0; round < 20; ++round) {
    std::atomic<bool> arrived{false};
    std::thread party([&arrived] { arrived.store(true, std::memory_order_release); });
    if (!budget.spin([&arrived] { return arrived.load(std::memory_order_acquire); })) {
      while (!arrived.load(std::memory_order_acquire)) std::this_thread::yield();  // the caller's sleep
    }
    party.join();
    CHECK(arrived.load());
  }
  CHECK(budget.arrivals() + budget.sleeps() <= 20);
  CHECK(budget.budget() >= SpinBudget::kFloor);
  CHECK(budget.budget() <= SpinBudget::kCeiling);
}
