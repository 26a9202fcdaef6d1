// The one event loop with real child processes, pipes and signals: output read before the exit is
// reported, exits in one batch, signals to the handler, process groups signalled, participants' ready
// descriptors and deadlines, the drain after the end, children killed when the loop goes away.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include <sys/wait.h>

#include "process/event_loop.hpp"
#include "process/orphan_guard.hpp"
#include "process/worker_process.hpp"

using namespace mgtrain;
using namespace std::chrono_literals;

namespace {

// Collects what a child writes.
class TextOutput final : public ChildOutput {
 public:
  TextOutput(Fd source, std::string& text) : source_(std::move(source)), text_(text) {}
  void add_fds(std::vector<pollfd>& fds) override {
    if (source_) fds.push_back(pollfd{source_.get(), POLLIN, 0});
  }
  void on_ready(const pollfd& ready, LoopTime) override {
    CHECK(ready.fd == source_.get());
    char buffer[4096];
    const ssize_t got = read(source_.get(), buffer, sizeof buffer);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (got <= 0) return close_now();
    text_.append(buffer, static_cast<std::size_t>(got));
  }
  bool open() const override { return source_.valid(); }
  void close_now() override {
    closed_now = true;
    source_.reset();
  }
  bool closed_now = false;

 private:
  Fd source_;
  std::string& text_;
};

struct Recorder : LoopHandler {
  std::vector<ChildExit> exits;
  std::vector<int> signals;
  std::vector<std::string> text_at_exit;
  const std::string* text = nullptr;
  void on_child_exits(const std::vector<ChildExit>& batch, LoopTime) override {
    for (const ChildExit& exit : batch) {
      exits.push_back(exit);
      if (text) text_at_exit.push_back(*text);
    }
  }
  void on_signal(int signal, LoopTime) override { signals.push_back(signal); }
};

WorkerProcessSpec shell(const std::string& script) {
  WorkerProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", script};
  spec.environment = {"PATH=/usr/bin:/bin"};
  return spec;
}

pid_t start_with_text(EventLoop& loop, const std::string& script, std::string& out, std::string& err) {
  WorkerProcess process = loop.start_child(shell(script));
  loop.add_output(std::make_unique<TextOutput>(std::move(process.stdout_pipe), out));
  loop.add_output(std::make_unique<TextOutput>(std::move(process.stderr_pipe), err));
  return process.pid;
}

void run_to_end(EventLoop& loop) {
  const auto give_up = LoopClock::now() + 20s;
  while (loop.any_child_running() || !loop.outputs_drained(LoopClock::now())) {
    REQUIRE(LoopClock::now() < give_up);
    loop.wait_once();
  }
}

// Gone, or a zombie nobody of ours reaps (reparented): either way not running.
bool process_gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const std::size_t paren = line.rfind(')');
  return paren != std::string::npos && line.size() > paren + 2 && line[paren + 2] == 'Z';
}

bool gone_within(pid_t pid, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!process_gone(pid)) {
    if (std::chrono::steady_clock::now() > until) return false;
    usleep(10000);
  }
  return true;
}

}  // namespace

TEST_CASE("event loop: a child's output is read before its exit is reported", "[event-loop]") {
  Recorder recorder;
  std::string out, err;
  recorder.text = &out;
  EventLoop loop(recorder);
  const pid_t pid = start_with_text(loop, "echo hello; echo oops >&2; exit 3", out, err);
  CHECK(loop.any_child_running());
  run_to_end(loop);
  REQUIRE(recorder.exits.size() == 1);
  CHECK(recorder.exits[0].pid == pid);
  CHECK(recorder.exits[0].status.value == 3);
  CHECK_FALSE(recorder.exits[0].status.signaled);
  CHECK(recorder.text_at_exit == std::vector<std::string>{"hello\n"});
  CHECK(out == "hello\n");
  CHECK(err == "oops\n");
  CHECK(recorder.signals.empty());
}

TEST_CASE("event loop: several children, signals to the handler, signal_children reaches process groups",
          "[event-loop]") {
  Recorder recorder;
  EventLoop loop(recorder);
  std::string out1, err1, out2, err2;
  // Each prints the pid of a grandchild in its process group, then waits.
  const pid_t first = start_with_text(loop, "sleep 30 & echo $!; wait", out1, err1);
  const pid_t second = start_with_text(loop, "sleep 30 & echo $!; wait", out2, err2);
  const auto give_up = LoopClock::now() + 10s;
  while (out1.find('\n') == std::string::npos || out2.find('\n') == std::string::npos) {
    REQUIRE(LoopClock::now() < give_up);
    loop.wait_once();
  }
  kill(getpid(), SIGUSR2);  // a real signal, through the signalfd
  while (recorder.signals.empty()) {
    REQUIRE(LoopClock::now() < give_up);
    loop.wait_once();
  }
  CHECK(recorder.signals == std::vector<int>{SIGUSR2});
  CHECK(loop.any_child_running());

  loop.signal_children(SIGTERM);
  run_to_end(loop);
  REQUIRE(recorder.exits.size() == 2);
  for (const ChildExit& exit : recorder.exits) {
    CHECK((exit.pid == first || exit.pid == second));
    CHECK(exit.status.signaled);
    CHECK(exit.status.value == SIGTERM);
  }
  CHECK(gone_within(std::stoi(out1), 2000ms));  // the grandchildren went with their groups
  CHECK(gone_within(std::stoi(out2), 2000ms));
}

TEST_CASE("event loop: participants get their ready descriptors and their deadlines", "[event-loop]") {
  struct PipeWatcher : LoopParticipant {
    int fd = -1;
    std::optional<LoopTime> deadline;
    std::vector<int> ready_fds;
    int on_time_calls = 0;
    void add_fds(std::vector<pollfd>& fds) override { fds.push_back(pollfd{fd, POLLIN, 0}); }
    void on_ready(const pollfd& ready, LoopTime) override {
      ready_fds.push_back(ready.fd);
      char byte;
      CHECK(read(fd, &byte, 1) == 1);
    }
    std::optional<LoopTime> next_deadline() const override { return deadline; }
    void on_time(LoopTime now) override {
      ++on_time_calls;
      if (deadline && now >= *deadline) deadline.reset();
    }
  };
  Recorder recorder;
  EventLoop loop(recorder);
  Pipe a = make_pipe(), b = make_pipe();
  PipeWatcher first, second;
  first.fd = a.read.get();
  second.fd = b.read.get();
  loop.add(first);
  loop.add(second);

  REQUIRE(write(b.write.get(), "x", 1) == 1);
  loop.wait_once();
  CHECK(first.ready_fds.empty());
  CHECK(second.ready_fds == std::vector<int>{b.read.get()});
  CHECK(first.on_time_calls == 1);
  CHECK(second.on_time_calls == 1);

  // Nothing ready: the nearest deadline ends the wait.
  const LoopTime before = LoopClock::now();
  first.deadline = before + 50ms;
  second.deadline = before + 5s;
  loop.wait_once();
  CHECK(LoopClock::now() - before >= 50ms);
  CHECK(LoopClock::now() - before < 4s);
  CHECK_FALSE(first.deadline);
  CHECK(second.deadline);

  loop.remove(second);
  second.deadline.reset();
  REQUIRE(write(b.write.get(), "y", 1) == 1);
  first.deadline = LoopClock::now() + 20ms;
  loop.wait_once();
  CHECK(second.ready_fds.size() == 1);  // no longer asked
  CHECK(second.on_time_calls == 2);
}

TEST_CASE("event loop: the drain gives up on a pipe an escaped descendant keeps open", "[event-loop]") {
  Recorder recorder;
  EventLoop loop(recorder);
  std::string out, err;
  // The descendant leaves the child's process group (setsid), so the group kill at the exit misses it; the
  // child waits until it has (field 5 of /proc/PID/stat: the process group).
  WorkerProcess process =
      loop.start_child(shell("setsid sleep 30 & p=$!; while [ \"$(cut -d' ' -f5 /proc/$p/stat)\" = $$ ]; do sleep "
                             "0.01; done; echo $p; exit 0"));
  auto output = std::make_unique<TextOutput>(std::move(process.stdout_pipe), out);
  TextOutput* watched = output.get();
  loop.add_output(std::move(output));
  loop.add_output(std::make_unique<TextOutput>(std::move(process.stderr_pipe), err));
  while (loop.any_child_running()) loop.wait_once();
  const LoopTime ended = LoopClock::now();
  CHECK_FALSE(loop.outputs_drained(ended));
  CHECK_FALSE(watched->closed_now);
  run_to_end(loop);
  CHECK(LoopClock::now() - ended >= EventLoop::kDrainTimeout);
  CHECK(LoopClock::now() - ended < EventLoop::kDrainTimeout + 3s);
  const pid_t escaped = std::stoi(out);
  kill(escaped, SIGKILL);
  CHECK(recorder.exits.size() == 1);
}

TEST_CASE("event loop: children still running are killed and reaped when it goes away", "[event-loop]") {
  Recorder recorder;
  pid_t pid = -1;
  {
    EventLoop loop(recorder);
    std::string out, err;
    pid = start_with_text(loop, "exec sleep 30", out, err);
    CHECK(kill(pid, 0) == 0);
  }
  CHECK(kill(pid, 0) == -1);  // reaped: the pid is gone
  CHECK(errno == ESRCH);
  CHECK(recorder.exits.empty());
}

TEST_CASE("orphan guard: the groups it watches when its pipe closes are killed, a forgotten one is not",
          "[event-loop]") {
  auto sleeper = [] {
    WorkerProcessSpec spec;
    spec.argv = {"/bin/sleep", "60"};
    spec.die_with_parent = false;
    return start_child(spec);  // a process group of its own
  };
  WorkerProcess watched = sleeper(), forgotten = sleeper();
  char line[OrphanGuard::kMessageSize];
  CHECK(std::string(line, OrphanGuard::message_line(true, 4194304, line)) == "+4194304\n");
  CHECK(std::string(line, OrphanGuard::message_line(false, 7, line)) == "-7\n");
  {
    OrphanGuard guard;
    for (pid_t group : {watched.pid, forgotten.pid}) {
      const std::size_t length = OrphanGuard::message_line(true, group, line);
      REQUIRE(write(guard.announce_fd(), line, length) == static_cast<ssize_t>(length));
    }
    guard.forget(forgotten.pid);
  }  // the pipe closes as when the launcher dies; the guard has exited once this returns
  int status = 0;
  REQUIRE(waitpid(watched.pid, &status, 0) == watched.pid);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
  CHECK(waitpid(forgotten.pid, &status, WNOHANG) == 0);  // still running
  kill(forgotten.pid, SIGKILL);
  waitpid(forgotten.pid, nullptr, 0);
}
