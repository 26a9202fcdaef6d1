// SLURM hostlist expansion against the forms SLURM documents, its errors, and a cross-check against
// `scontrol show hostnames` where SLURM's client is installed.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "contract/hostlist.hpp"
#include "process/run_capture.hpp"
#include "support/temp_dir.hpp"
#include "util/error.hpp"
#include "util/value_parsing.hpp"

using namespace mgtrain;
using Hosts = std::vector<std::string>;

TEST_CASE("plain names and comma lists", "[hostlist]") {
  CHECK(expand_hostlist("node1") == Hosts{"node1"});
  CHECK(expand_hostlist("a,b,c") == Hosts{"a", "b", "c"});
  CHECK(expand_hostlist("n1-3") == Hosts{"n1-3"});
  CHECK(expand_hostlist("n1,n1") == Hosts{"n1", "n1"});  // duplicates stay, as in SLURM
}

TEST_CASE("whitespace separates like a comma", "[hostlist]") {
  CHECK(expand_hostlist("node1 node2") == Hosts{"node1", "node2"});
  CHECK(expand_hostlist(" a\tb[1-2] , c ") == Hosts{"a", "b1", "b2", "c"});
}

TEST_CASE("ranges, lists and zero padding", "[hostlist]") {
  CHECK(expand_hostlist("node[01-04,07]") == Hosts{"node01", "node02", "node03", "node04", "node07"});
  CHECK(expand_hostlist("n[8-11]") == Hosts{"n8", "n9", "n10", "n11"});
  CHECK(expand_hostlist("n[08-10]") == Hosts{"n08", "n09", "n10"});
  CHECK(expand_hostlist("n[098-101]") == Hosts{"n098", "n099", "n100", "n101"});
  CHECK(expand_hostlist("n[0]") == Hosts{"n0"});
  CHECK(expand_hostlist("n[007]") == Hosts{"n007"});
  CHECK(expand_hostlist("n[2-2]") == Hosts{"n2"});
  CHECK(expand_hostlist("n[001-3]") == Hosts{"n001", "n002", "n003"});  // the width is the lower bound's
  CHECK(expand_hostlist("n[1-003]") == Hosts{"n1", "n2", "n3"});
  CHECK(expand_hostlist("n[1-3,2]") == Hosts{"n1", "n2", "n3", "n2"});
  CHECK(expand_hostlist("[1-2]") == Hosts{"1", "2"});
  CHECK(expand_hostlist("n[0-65535]").size() == 65536);
}

TEST_CASE("several bracket groups multiply out, leftmost slowest", "[hostlist]") {
  CHECK(expand_hostlist("r[1-2]n[1-2]") == Hosts{"r1n1", "r1n2", "r2n1", "r2n2"});
  CHECK(expand_hostlist("n[1-2]-[01-02]") == Hosts{"n1-01", "n1-02", "n2-01", "n2-02"});
  CHECK(expand_hostlist("n[1-2][3-4]") == Hosts{"n13", "n14", "n23", "n24"});
  CHECK(expand_hostlist("rack[1-2]-node[01-02]-ib") == Hosts{"rack1-node01-ib", "rack1-node02-ib", "rack2-node01-ib",
                                                             "rack2-node02-ib"});  // a suffix: beyond SLURM 22.05
}

TEST_CASE("commas between host expressions, and inside brackets", "[hostlist]") {
  CHECK(expand_hostlist("a[1-2],b[3,5],c") == Hosts{"a1", "a2", "b3", "b5", "c"});
}

TEST_CASE("malformed expressions are errors naming the expression", "[hostlist][errors]") {
  CHECK_THROWS_WITH(expand_hostlist("node[1-2"), "hostlist 'node[1-2': '[' without ']'");
  CHECK_THROWS_WITH(expand_hostlist("node]1"), "hostlist 'node]1': ']' without '['");
  CHECK_THROWS_WITH(expand_hostlist("n[3-1]"), "hostlist 'n[3-1]': range '3-1' goes backwards");
  CHECK_THROWS_WITH(
      expand_hostlist("n[a-c]"),
      "hostlist 'n[a-c]': 'a-c' inside [...] is not a number or a range like 01-04 (SLURM hostlists range "
      "over numbers only)");
  CHECK_THROWS_WITH(expand_hostlist("gpu-[1-2]x-[a,b]"), Catch::Contains("'a' inside [...] is not a number"));
  CHECK_THROWS_WITH(expand_hostlist("n[1-]"), Catch::Contains("'1-' inside [...] is not a number"));
  CHECK_THROWS_WITH(expand_hostlist("n[-2]"), Catch::Contains("'-2' inside [...] is not a number"));
  CHECK_THROWS_WITH(expand_hostlist("n[1-2-3]"), Catch::Contains("'1-2-3' inside [...] is not a number"));
  CHECK_THROWS_WITH(expand_hostlist("a,,b"), "hostlist 'a,,b': empty host expression before ','");
  CHECK_THROWS_WITH(expand_hostlist(",a"), "hostlist ',a': empty host expression before ','");
  CHECK_THROWS_WITH(expand_hostlist("a,"), "hostlist 'a,': empty host expression after ','");
  CHECK_THROWS_WITH(expand_hostlist("n[1,,2]"), "hostlist 'n[1,,2]': empty entry inside [1,,2]");
  CHECK_THROWS_WITH(expand_hostlist("n[]"), "hostlist 'n[]': empty brackets []");
  CHECK_THROWS_WITH(expand_hostlist("n[[1]]"), "hostlist 'n[[1]]': nested '['");
  CHECK_THROWS_WITH(expand_hostlist("n[1 -2]"), "hostlist 'n[1 -2]': whitespace inside [...]");
  CHECK_THROWS_WITH(expand_hostlist(""), "hostlist '': no host names");
  CHECK_THROWS_WITH(expand_hostlist("  "), "hostlist '  ': no host names");
  CHECK_THROWS_WITH(expand_hostlist("n[0-65536]"),
                    "hostlist 'n[0-65536]': range '0-65536' spans more than 65536 hosts");
  CHECK_THROWS_WITH(expand_hostlist("n[0-99999999999999999999]"),
                    "hostlist 'n[0-99999999999999999999]': number '99999999999999999999' is too large");
  CHECK_THROWS_WITH(expand_hostlist("n[0-999][0-999][0-999]"),
                    "hostlist 'n[0-999][0-999][0-999]': more than 1000000 hosts");
  CHECK_THROWS_WITH(expand_hostlist("n[1-4]", 3), "hostlist 'n[1-4]': more than 3 hosts");
  CHECK_THROWS_AS(expand_hostlist("a[1-2],b[1-2]", 3), UsageError);
}

namespace {

// `scontrol show hostnames EXPR` with a throw-away slurm.conf (scontrol needs one even for this):
// the hosts, or nullopt when SLURM refuses the expression.
std::optional<Hosts> scontrol_hostnames(const std::string& expression, const std::string& conf) {
  CaptureOptions options;
  options.set_env = {{"SLURM_CONF", conf}};
  options.timeout_s = 20;
  CapturedRun run = run_and_capture({"scontrol", "show", "hostnames", expression}, options);
  // SLURM 22.05 exits 0 even when it refuses; it says "Invalid hostlist" on stderr and prints nothing.
  if (run.exit_code != 0 || run.err.find("Invalid hostlist") != std::string::npos || run.out.empty())
    return std::nullopt;
  Hosts hosts;
  for (const auto& line : split(run.out, '\n'))
    if (!line.empty()) hosts.push_back(line);
  return hosts;
}

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  for (const auto& dir : split(path ? path : "", ':'))
    if (!dir.empty() && access((dir + "/" + program).c_str(), X_OK) == 0) return true;
  return false;
}

}  // namespace

TEST_CASE("the same hosts as scontrol show hostnames", "[hostlist][scontrol]") {
  if (!on_path("scontrol")) {
    WARN("SKIP: scontrol is not installed (apt-get install slurm-client), the cross-check did not run");
    return;
  }
  const mgtrain::testing::TempDir temp_dir("mgtrain-hostlist-scontrol");
  const std::filesystem::path dir = temp_dir.path();
  const std::string conf = (dir / "slurm.conf").string();
  std::ofstream(conf) << "ClusterName=hostlist-check\nSlurmctldHost=localhost\n";
  // Forms SLURM accepts: both give the same hosts in the same order.
  for (const std::string expression : {"node1",
                                       "a,b,c",
                                       "node[01-04,07]",
                                       "n[8-11]",
                                       "n[08-10]",
                                       "n[098-101]",
                                       "n[0]",
                                       "n[007]",
                                       "n[001-3]",
                                       "n[1-003]",
                                       "n[1-3,2]",
                                       "[1-2]",
                                       "r[1-2]n[1-2]",
                                       "n[1-2]-[01-02]",
                                       "n[1-2][3-4]",
                                       "a[1-2],b[3,5],c",
                                       "node1 node2",
                                       "n1-3",
                                       "n1,n1",
                                       "x[0-9][00-19]",
                                       "gpu-node[0001-0003,0100]",
                                       "a[1-2] b[3-4],c[5]"}) {
    INFO(expression);
    auto expected = scontrol_hostnames(expression, conf);
    REQUIRE(expected);
    CHECK(expand_hostlist(expression) == *expected);
  }
  // Forms SLURM refuses: refused here too.
  for (const std::string expression : {"n[3-1]", "n[a-c]", "gpu-[1-2]x-[a,b]", "n[1,,2]", "n[]", "n[-2]", "n[1-2-3]",
                                       "n[[1]]", "n[0-65536]", "n[1-2 ]"}) {
    INFO(expression);
    CHECK_FALSE(scontrol_hostnames(expression, conf));
    CHECK_THROWS_AS(expand_hostlist(expression), UsageError);
  }
}
