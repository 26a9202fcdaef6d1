// Suggestions, strict value parsing, the worker's identity from its environment, run_main (a binary's errors), and
// control characters escaped in messages.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>

#include "contract/worker_identity.hpp"
#include "util/did_you_mean.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"
#include "util/value_parsing.hpp"

using namespace mgtrain;

TEST_CASE("edit distance counts swaps as one edit", "[helpers]") {
  CHECK(edit_distance("batch_size", "batch_sise") == 1);
  CHECK(edit_distance("ab", "ba") == 1);
  CHECK(edit_distance("", "abc") == 3);
  CHECK(closest_match("adm", {"sgd", "adam", "adamw"}) == std::optional<std::string>("adam"));
  CHECK_FALSE(closest_match("zzzzzz", {"sgd", "adam"}));
  CHECK_FALSE(closest_match("adam", {"adam"}));  // an exact match needs no suggestion
}

TEST_CASE("strict integer, number and boolean parsing", "[helpers]") {
  CHECK(parse_int(" 42 ") == std::optional<std::int64_t>(42));
  CHECK(parse_int("-3") == std::optional<std::int64_t>(-3));
  CHECK_FALSE(parse_int("4x"));
  CHECK_FALSE(parse_int("1.0"));
  CHECK_FALSE(parse_int(""));
  CHECK_FALSE(parse_int("99999999999999999999"));
  CHECK(parse_number("1e-3") == std::optional<double>(1e-3));
  CHECK_FALSE(parse_number("nan"));
  CHECK_FALSE(parse_number("inf"));
  CHECK(parse_bool("YES") == std::optional<bool>(true));
  CHECK_FALSE(parse_bool("yep"));
  CHECK(format_number(0.01) == "0.01");
  CHECK(format_number(5) == "5.0");
  CHECK(format_number(1e-8) == "1e-08");
}

TEST_CASE("identity from torchrun's variables", "[identity]") {
  auto id = worker_identity_from_environment({{"RANK", "3"},
                                              {"WORLD_SIZE", "4"},
                                              {"LOCAL_RANK", "1"},
                                              {"LOCAL_WORLD_SIZE", "2"},
                                              {"MASTER_ADDR", "n0"},
                                              {"MASTER_PORT", "1234"}});
  CHECK(id.rank == 3);
  CHECK(id.local_rank == 1);
  CHECK(id.world_size == 4);
  CHECK(id.master_addr == "n0");
  CHECK(id.master_port == 1234);
}

TEST_CASE("under torchrun's agent store every rank connects as a client, keys per attempt", "[identity]") {
  auto id = worker_identity_from_environment({{"RANK", "0"},
                                              {"WORLD_SIZE", "2"},
                                              {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                                              {"TORCHELASTIC_RESTART_COUNT", "3"}});
  CHECK(id.agent_hosts_store);
  CHECK(id.restart_count == 3);
  CHECK_FALSE(worker_identity_from_environment({{"RANK", "0"}, {"WORLD_SIZE", "2"}}).agent_hosts_store);
}

TEST_CASE("identity from srun's variables when RANK is absent", "[identity]") {
  auto id = worker_identity_from_environment({{"SLURM_PROCID", "5"},
                                              {"SLURM_NTASKS", "8"},
                                              {"SLURM_LOCALID", "1"},
                                              {"SLURM_JOB_NODELIST", "node[01-02]"},
                                              {"SLURM_JOB_ID", "12345"}});
  CHECK(id.rank == 5);
  CHECK(id.world_size == 8);
  CHECK(id.local_rank == 1);
  CHECK(id.master_addr == "node01");
  CHECK(id.master_port == 20000 + 12345 % 20000);
}

TEST_CASE("no rank variables means one process", "[identity]") {
  auto id = worker_identity_from_environment({});
  CHECK(id.world_size == 1);
  CHECK(id.rank == 0);
}

TEST_CASE("inconsistent rank variables are errors naming the variable", "[identity][errors]") {
  CHECK_THROWS_WITH(worker_identity_from_environment({{"RANK", "2"}, {"WORLD_SIZE", "2"}}),
                    Catch::Contains("rank 2 is not below the world size 2"));
  CHECK_THROWS_WITH(worker_identity_from_environment({{"RANK", "x"}, {"WORLD_SIZE", "2"}}),
                    "environment: RANK='x' is not an integer >= 0");
  CHECK_THROWS_WITH(worker_identity_from_environment({{"RANK", "0"}}),
                    "environment: WORLD_SIZE is not set (needed with the other rank variables)");
}

namespace {

// What `body` wrote to stderr (fd 2) while it ran.
std::string stderr_of(const std::function<void()>& body) {
  std::FILE* capture = std::tmpfile();
  REQUIRE(capture);
  const int saved = ::dup(2);
  ::dup2(::fileno(capture), 2);
  body();
  ::dup2(saved, 2);
  ::close(saved);
  std::string text;
  std::rewind(capture);
  for (int c = std::fgetc(capture); c != EOF; c = std::fgetc(capture)) text += static_cast<char>(c);
  std::fclose(capture);
  return text;
}

}  // namespace

TEST_CASE("run_main: a binary's errors caught once, as one line and an exit code", "[helpers]") {
  int code = -1;
  CHECK(stderr_of([&] { code = log::run_main("prog", [] { return 3; }); }).empty());
  CHECK(code == 3);
  CHECK(stderr_of([&] { code = log::run_main("prog", []() -> int { throw UsageError("bad flag --x"); }); }) ==
        "prog: error: bad flag --x\n");
  CHECK(code == exit_code::kUsage);
  CHECK(stderr_of([&] { code = log::run_main("prog", []() -> int { throw Error("disk gone", 75); }); }) ==
        "prog: error: disk gone\n");
  CHECK(code == 75);
  CHECK(stderr_of([&] { code = log::run_main("prog", []() -> int { throw std::out_of_range("vector"); }); }) ==
        "prog: internal error: vector\n");
  CHECK(code == exit_code::kFailure);
}

TEST_CASE("control characters are escaped for messages, everything else is kept", "[helpers]") {
  const std::string nul_inside("a\0b", 3);
  CHECK(escape_control_characters(nul_inside) == "a\\0b");
  CHECK(escape_control_characters("tab\tline\ncr\r") == "tab\\tline\\ncr\\r");
  CHECK(escape_control_characters("\x01\x1b[31m\x7f") == "\\x01\\x1b[31m\\x7f");
  CHECK(escape_control_characters("n\xc3\xb6"
                                  "de [::1] \\ ok") ==
        "n\xc3\xb6"
        "de [::1] \\ ok");  // UTF-8 and '\\' stay
  CHECK(escape_control_characters("two\nlines\tand\x01", "\n\t") == "two\nlines\tand\\x01");
  // Every Error keeps line feeds and tabs (multi-line help) and escapes the rest: a NUL no longer cuts its what().
  const UsageError error("launch.rdzv_endpoint: '" + nul_inside + "\x1b[2J' is bad\n\tsee --help");
  CHECK(std::string(error.what()) == "launch.rdzv_endpoint: 'a\\0b\\x1b[2J' is bad\n\tsee --help");
  CHECK(std::string(SystemError(std::string("opening a\0b", 11), 2).what()) ==
        "opening a\\0b: No such file or directory");
}
