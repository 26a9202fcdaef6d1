// The --hosts launcher's console (hosts/hosts_console.hpp): the agents' rank lines merged across hosts through a real
// ConsoleWriter, what passes untouched, and when deduplication is on: the job's ranks, and the agents told so.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "hosts/hosts_console.hpp"
#include "hosts/hosts_launch.hpp"
#include "util/fd.hpp"

using namespace mgtrain;
using namespace std::chrono_literals;
using Clock = HostsConsole::Clock;

namespace {

std::vector<HostSlots> hosts(const std::string& text) { return HostList::parse(text).value().hosts; }

std::string read_all(Fd& fd) {
  std::string text;
  char buffer[4096];
  ssize_t got = 0;
  while ((got = read(fd.get(), buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<std::size_t>(got));
  return text;
}

// Two agents' streams (`a` and `b`, each with its stdout and stderr) on one console, its stdout and stderr apart.
struct TwoHosts {
  Pipe out = make_pipe();
  Pipe err = make_pipe();
  std::string console_out;
  std::string console_err;
  int owners[4] = {};  // a's stdout, a's stderr, b's stdout, b's stderr

  template <typename Feed>
  void run(bool dedup, const JobRanks& ranks, Feed feed) {
    {
      ConsoleWriter writer(out.write.get(), err.write.get());
      HostsConsole console(writer, dedup, ranks, 1s);
      feed(console);
      console.release_all();
      writer.flush();
    }
    out.write.reset();
    err.write.reset();
    console_out = read_all(out.read);
    console_err = read_all(err.read);
  }
  const void* owner(char host, bool to_stderr) const { return &owners[(host == 'a' ? 0 : 2) + (to_stderr ? 1 : 0)]; }
};

LiveLineSplitter::Piece whole(std::string_view text) { return {text, true, true}; }

}  // namespace

TEST_CASE("hosts console: the same rank line of every host leaves once, behind the job's ranks", "[hosts][console]") {
  TwoHosts two;
  const auto t0 = Clock::now();
  std::vector<bool> held;
  two.run(true, JobRanks{4, true}, [&](HostsConsole& console) {
    console.add_piece(false, two.owner('a', false), "[a] ", whole("[ranks 0-1] same line"), t0);
    console.add_piece(false, two.owner('a', false), "[a] ", whole("[rank 0] rank 0"), t0);
    console.add_piece(true, two.owner('a', true), "[a] ", whole("[ranks 0-1] same line"), t0);
    // Agent b's own message keeps its place: it does not release what is held (b's ranks come after it).
    console.add_piece(true, two.owner('b', true), "[b] ", whole("mgtrain: round 0: node 1 of 2"), t0 + 1ms);
    held.push_back(console.deadline() == t0 + 1s);
    console.add_piece(false, two.owner('b', false), "[b] ", whole("[rank 2] same line"), t0 + 2ms);
    console.add_piece(false, two.owner('b', false), "[b] ", whole("[rank 3] same line"), t0 + 3ms);  // complete
    console.add_piece(false, two.owner('b', false), "[b] ", whole("[rank 3] rank 3"), t0 + 3ms);
    console.add_piece(true, two.owner('b', true), "[b] ", whole("[ranks 2-3] same line"), t0 + 4ms);
    // A line one host printed: after the window, as it came.
    console.release_due(t0 + 999ms);
    held.push_back(console.deadline() == t0 + 1s);  // a's "rank 0"
    console.release_due(t0 + 1s + 3ms);
    held.push_back(!console.deadline().has_value());
  });
  CHECK(held == std::vector<bool>{true, true, true});
  CHECK(two.console_out == "[ranks 0-3] same line\n[a] [rank 0] rank 0\n[b] [rank 3] rank 3\n");
  CHECK(two.console_err == "[ranks 0-3] same line\n[b] mgtrain: round 0: node 1 of 2\n");
}

TEST_CASE("hosts console: lines that are no rank's pass untouched, a partial line releases what is held",
          "[hosts][console]") {
  TwoHosts two;
  const auto t0 = Clock::now();
  two.run(true, JobRanks{4, true}, [&](HostsConsole& console) {
    console.add_piece(false, two.owner('a', false), "[a] ", whole("[rank 1] epoch 1"), t0);
    console.add_piece(false, two.owner('b', false), "[b] ", whole("r2: epoch 1"), t0);       // a custom prefix template
    console.add_piece(false, two.owner('b', false), "[b] ", whole("[rank 9] epoch 1"), t0);  // no rank of this job
    // b's progress bar: shown live, so a's held line leaves first.
    console.add_piece(false, two.owner('b', false), "[b] ", {"[rank 2]  50%\r", false, false}, t0 + 1ms);
    console.add_piece(false, two.owner('a', false), "[a] ", whole("[rank 0] epoch 1"), t0 + 2ms);
    console.add_piece(false, two.owner('b', false), "[b] ", {"[rank 2] 100%", true, false}, t0 + 3ms);
    console.add_piece(false, two.owner('a', false), "[a] ", whole("[rank 1] a\rb"), t0 + 4ms);  // '\r': live
  });
  CHECK(two.console_out ==
        "[a] [rank 1] epoch 1\n[b] r2: epoch 1\n[b] [rank 9] epoch 1\n[b] [rank 2]  50%\r"
        "\n[a] [rank 0] epoch 1\n[b] [rank 2] 100%\n[a] [rank 1] a\r[a] b\n");
}

TEST_CASE("hosts console: off, every piece goes out as it comes, behind its host", "[hosts][console]") {
  TwoHosts two;
  const auto t0 = Clock::now();
  two.run(false, JobRanks{4, true}, [&](HostsConsole& console) {
    console.add_piece(false, two.owner('a', false), "[a] ", whole("[rank 0] same"), t0);
    console.add_piece(false, two.owner('b', false), "[b] ", whole("[rank 2] same"), t0);
    CHECK_FALSE(console.deadline().has_value());
  });
  CHECK(two.console_out == "[a] [rank 0] same\n[b] [rank 2] same\n");
}

TEST_CASE("hosts console: auto counts the job's ranks, and every agent is told", "[hosts][console]") {
  CHECK(job_ranks(hosts("a:2,b:2"), NprocSpec::workers(9)).count == 4);  // slots win
  CHECK(job_ranks(hosts("a,b,c"), NprocSpec::workers(2)).count == 6);
  const JobRanks per_gpu = job_ranks(hosts("a,b,c,d"), NprocSpec{NprocSpec::Kind::Gpu, 1});
  CHECK((per_gpu.count == 4 && !per_gpu.exact));  // at least one per host
  CHECK(hosts_console_dedup_on(ConsoleDedupMode::Auto, Personality::Mgtrain, JobRanks{4, true}));
  CHECK_FALSE(hosts_console_dedup_on(ConsoleDedupMode::Auto, Personality::Mgtrain, JobRanks{3, true}));
  CHECK_FALSE(hosts_console_dedup_on(ConsoleDedupMode::Auto, Personality::Torchrun, JobRanks{8, true}));
  CHECK(hosts_console_dedup_on(ConsoleDedupMode::On, Personality::Mgtrain, JobRanks{2, true}));
  CHECK_FALSE(hosts_console_dedup_on(ConsoleDedupMode::Off, Personality::Mgtrain, JobRanks{8, true}));

  auto told = [](const std::string& host_list, const std::vector<FlagSetting>& flags,
                 ConsoleDedupMode mode = ConsoleDedupMode::Auto) {
    LaunchRequest request;
    request.config.flags = flags;
    LoadedConfig loaded;
    loaded.config.launch.run_id = "r1";
    loaded.config.launch.console_dedup = mode;
    std::string said;
    for (const std::vector<std::string>& args : agent_launch_arguments(hosts(host_list), request, loaded, {})) {
      std::string line;
      for (const std::string& arg : args) {
        if (arg == "--console-dedup" || arg.rfind("launch.console_dedup=", 0) == 0)
          line += (line.empty() ? "" : " ") + arg;
      }
      said += "[" + line + "]";
    }
    return said;
  };
  // Two ranks on each host, four in the job: each agent merges its own two (by itself it would not, from 2).
  CHECK(told("a:2,b:2", {}) == "[--console-dedup][--console-dedup]");
  CHECK(told("a:1,b:2", {}) == "[][]");
  CHECK(told("a:2,b:2", {{"launch.console_dedup", "off", "--no-console-dedup"}}, ConsoleDedupMode::Off) ==
        "[launch.console_dedup=off][launch.console_dedup=off]");
  CHECK(told("a:1,b:1", {{"launch.console_dedup", "on", "--console-dedup"}}, ConsoleDedupMode::On) ==
        "[launch.console_dedup=on][launch.console_dedup=on]");
}
