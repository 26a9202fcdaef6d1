// SLURM hostlist expansion against the forms SLURM documents, and its errors.
#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "core/hostlist.hpp"

using namespace mgtrain;
using Hosts = std::vector<std::string>;

TEST_CASE("plain names and comma lists", "[hostlist]") {
  CHECK(expand_hostlist("node1") == Hosts{"node1"});
  CHECK(expand_hostlist("a,b,c") == Hosts{"a", "b", "c"});
}

TEST_CASE("ranges, lists and zero padding", "[hostlist]") {
  CHECK(expand_hostlist("node[01-04,07]") == Hosts{"node01", "node02", "node03", "node04", "node07"});
  CHECK(expand_hostlist("n[8-11]") == Hosts{"n8", "n9", "n10", "n11"});
  CHECK(expand_hostlist("n[08-10]") == Hosts{"n08", "n09", "n10"});
  CHECK(expand_hostlist("n[098-101]") == Hosts{"n098", "n099", "n100", "n101"});
  CHECK(expand_hostlist("n[0]") == Hosts{"n0"});
}

TEST_CASE("several bracket groups multiply out, leftmost slowest", "[hostlist]") {
  CHECK(expand_hostlist("gpu-[1-2]x-[a,b]") == Hosts{"gpu-1x-a", "gpu-1x-b", "gpu-2x-a", "gpu-2x-b"});
  CHECK(expand_hostlist("r[1-2]n[1-2]") == Hosts{"r1n1", "r1n2", "r2n1", "r2n2"});
}

TEST_CASE("commas between host expressions, and inside brackets", "[hostlist]") {
  CHECK(expand_hostlist("a[1-2],b[3,5],c") == Hosts{"a1", "a2", "b3", "b5", "c"});
}

TEST_CASE("malformed expressions are errors naming the expression", "[hostlist][errors]") {
  CHECK_THROWS_WITH(expand_hostlist("node[1-2"), "hostlist 'node[1-2': '[' without ']'");
  CHECK_THROWS_WITH(expand_hostlist("node]1"), "hostlist 'node]1': ']' without '['");
  CHECK_THROWS_WITH(expand_hostlist("n[3-1]"), "hostlist 'n[3-1]': range '3-1' goes backwards");
  CHECK_THROWS_WITH(expand_hostlist("n[a-c]"), "hostlist 'n[a-c]': 'a-c' is not a numeric range like 01-04");
  CHECK_THROWS_WITH(expand_hostlist("a,,b"), "hostlist 'a,,b': empty host expression between commas");
  CHECK_THROWS_WITH(expand_hostlist("n[1,,2]"), "hostlist 'n[1,,2]': empty entry inside [...]");
  CHECK_THROWS_WITH(expand_hostlist(""), "hostlist '': empty host expression between commas");
  CHECK_THROWS_AS(expand_hostlist("n[0-99999999999]"), UsageError);
  CHECK_THROWS_AS(expand_hostlist("n[0-999][0-999][0-999]"), UsageError);
}
