// Bounded, exact config input (docs/config.md, "Input limits"): only regular files up to 16 MiB are read, one YAML
// document, at most 64 levels and 100000 values, yaml-cpp's parser messages with what was expected, addresses in
// IPv6 brackets. Each rule with the input that breaks it, through load_config as the launcher calls it.
#include <sys/stat.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "config/config_file.hpp"
#include "config/config_loader.hpp"
#include "config/yaml_document.hpp"
#include "support/temp_dir.hpp"
#include "util/environment.hpp"
#include "util/error.hpp"

using namespace mgtrain;
using mgtrain::testing::TempDir;

namespace {

LoadOptions fixed_run_id() {
  LoadOptions options;
  options.make_run_id = [] { return std::string("run-x"); };
  return options;
}

LoadedConfig load_text(const std::string& yaml, ConfigRequest request = {}) {
  return load_config_text(yaml, "x.yaml", request, {}, fixed_run_id());
}

// The UsageError message of loading `yaml` as x.yaml; fails the test when it loads.
std::string text_error(const std::string& yaml, ConfigRequest request = {}) {
  try {
    load_text(yaml, request);
  } catch (const UsageError& e) {
    CHECK(e.exit_code() == 2);
    return e.what();
  }
  FAIL("expected a UsageError");
  return "";
}

// The UsageError message of loading the file at `path`.
std::string file_error(const std::string& path) {
  ConfigRequest request;
  request.path = path;
  try {
    load_config(request, {}, fixed_run_id());
  } catch (const UsageError& e) {
    CHECK(e.exit_code() == 2);
    return e.what();
  }
  FAIL("expected a UsageError");
  return "";
}

void write_file(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Lists (flow) nested `levels` deep: [[[...]]].
std::string flow_nesting(int levels) { return std::string(levels, '[') + std::string(levels, ']'); }

// Mappings (block) nested `levels` deep: "a:\n  a:\n    a: 1"; `last` ends the innermost.
std::string block_nesting(int levels, const std::string& last = "1") {
  std::string text;
  for (int i = 0; i < levels; ++i) text += std::string(2 * i, ' ') + (i + 1 == levels ? "a: " + last + "\n" : "a:\n");
  return text;
}

}  // namespace

TEST_CASE("a FIFO as config is refused at once, naming it", "[config][input]") {
  TempDir dir;
  const std::string fifo = dir / "cfg.yaml";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const auto start = std::chrono::steady_clock::now();
  const std::string message = file_error(fifo);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
  CHECK(message == fifo + ": is a FIFO (named pipe), expected a config file (a regular file of at most 16 MiB)");
}

TEST_CASE("devices and directories are refused as config files", "[config][input]") {
  CHECK(file_error("/dev/zero") ==
        "/dev/zero: is a character device, expected a config file (a regular file of at most 16 MiB)");
  TempDir dir;
  CHECK(file_error(dir.path()) ==
        dir.path() + ": is a directory, expected a config file (a regular file of at most 16 MiB)");
  CHECK(contains(file_error(dir / "absent.yaml"), "absent.yaml: cannot read the config file: No such file"));
}

TEST_CASE("a config file over 16 MiB is refused, one of exactly 16 MiB is read", "[config][input]") {
  TempDir dir;
  const std::string big = dir / "big.yaml";
  write_file(big, std::string(17u * 1024 * 1024, '#'));
  CHECK(file_error(big) == big + ": the config file is larger than the limit of 16 MiB (16777216 bytes)");
  const std::string limit = dir / "limit.yaml";
  write_file(limit, "train:\n  epochs: 3\n#" + std::string(kMaxConfigFileBytes - 21, ' ') + "\n");
  REQUIRE(std::filesystem::file_size(limit) == kMaxConfigFileBytes);
  ConfigRequest request;
  request.path = limit;
  CHECK(load_config(request, {}, fixed_run_id()).config.train.epochs == 3);
}

TEST_CASE("the bounded reader stops at the limit", "[config][input]") {
  TempDir dir;
  write_file(dir / "f", "0123456789");
  CHECK(read_bounded_file(dir / "f", "hostfile", 10) == "0123456789");
  try {
    read_bounded_file(dir / "f", "hostfile", 9);
    FAIL("expected a UsageError");
  } catch (const UsageError& e) {
    CHECK(std::string(e.what()) == dir / "f" + ": the hostfile is larger than the limit of 9 bytes (9 bytes)");
  }
}

TEST_CASE("nesting: 64 levels are read, 65 are refused by name at the 65th", "[config][input]") {
  // 64 levels of lists parse (then the config is refused for not being a mapping, not for its depth).
  CHECK(contains(text_error(flow_nesting(64)), "the config must be a mapping"));
  CHECK(text_error(flow_nesting(65)) ==
        "x.yaml:1:65: nesting deeper than 64 levels (lists and mappings inside each other; a config needs 3): close "
        "the brackets or reduce the indentation");
  CHECK(contains(text_error(block_nesting(64)), "x.yaml:1:1: a: unknown key"));
  CHECK(contains(text_error(block_nesting(65)), "x.yaml:65:129: nesting deeper than 64 levels"));
  // Mixed: 40 mappings, then 25 lists inside.
  CHECK(contains(text_error(block_nesting(40, flow_nesting(25))), "x.yaml:40:106: nesting deeper than 64 levels"));
  CHECK(contains(text_error(block_nesting(40, flow_nesting(24))), "x.yaml:1:1: a: unknown key"));
  // 10,000 unclosed '[' (the issue's case) and 16 MiB of them: the same message, at once.
  CHECK(contains(text_error(std::string(10000, '[')), "x.yaml:1:65: nesting deeper than 64 levels"));
  const auto start = std::chrono::steady_clock::now();
  CHECK(contains(text_error("train:\n  x:\n" + std::string(kMaxConfigFileBytes - 20, '[')),
                 "x.yaml:3:65: nesting deeper than 64 levels"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
}

TEST_CASE("brackets in quoted, plain and block-scalar strings are not nesting", "[config][input]") {
  const std::string many(100, '[');
  CHECK(load_text("launch:\n  python: a" + many + "\n").config.launch.python == "a" + many);
  CHECK(load_text("launch:\n  python: '" + many + "'\n").config.launch.python == many);
  CHECK(load_text("launch:\n  python: \"" + many + "\"\n").config.launch.python == many);
  CHECK(load_text("launch:\n  python: |\n    " + many + "\n    x\n").config.launch.python == many + "\nx\n");
  CHECK(load_text("launch:\n  python: x # " + many + "\n").config.launch.python == "x");
}

TEST_CASE("a second YAML document is refused at its line", "[config][input]") {
  CHECK(text_error("train:\n  epochs: 1\n---\nunknown_key: 1\n") ==
        "x.yaml:3:1: a second YAML document starts here; a config is one document (delete the '---' line and what "
        "follows, or merge its keys into the first document)");
  CHECK(contains(text_error("---\ntrain:\n  epochs: 1\n...\n---\n"), "x.yaml:5:1: a second YAML document"));
  // One document with an explicit start is fine.
  CHECK(load_text("---\ntrain:\n  epochs: 2\n").config.train.epochs == 2);
}

TEST_CASE("parser messages name file:line:col and what was expected", "[config][input]") {
  CHECK(text_error("train:\n  epochs: [1, 2\n") ==
        "x.yaml:3:1: malformed YAML: a [ ] list is not closed: expected ',' and another item, or ']' (yaml-cpp: end "
        "of sequence flow not found)");
  CHECK(contains(text_error("train:\n\tepochs: 1\n"), "x.yaml:2:8: malformed YAML: a tab in the indentation"));
  CHECK(contains(text_error("train: {epochs: 1\n"), "a { } mapping is not closed"));
  CHECK(contains(text_error("train: *nothing\n"), "whose &anchor is not defined"));
  // Every message of yaml-cpp's table has its own hint; "bad file" never stands alone.
  for (const char* message :
       {YAML::ErrorMsg::END_OF_MAP, YAML::ErrorMsg::END_OF_MAP_FLOW, YAML::ErrorMsg::END_OF_SEQ,
        YAML::ErrorMsg::END_OF_SEQ_FLOW, YAML::ErrorMsg::TAB_IN_INDENTATION, YAML::ErrorMsg::MAP_VALUE,
        YAML::ErrorMsg::BLOCK_ENTRY, YAML::ErrorMsg::UNKNOWN_TOKEN, YAML::ErrorMsg::BAD_FILE,
        YAML::ErrorMsg::INVALID_ESCAPE, YAML::ErrorMsg::UNKNOWN_ANCHOR}) {
    INFO(message);
    CHECK(contains(yaml_parser_hint(message), "expected"));
    CHECK_FALSE(contains(yaml_parser_hint(message), "not valid YAML"));
  }
  CHECK(contains(yaml_parser_hint("unknown escape character: q"), "double-quoted"));
  CHECK(contains(yaml_parser_hint("something new"), "not valid YAML"));
}

TEST_CASE("values are bounded and aliases cannot multiply the work", "[config][input]") {
  std::string many = "[";
  for (int i = 0; i <= 100000; ++i) many += "1,";
  CHECK(contains(text_error("x: " + many + "]\n"), "more than 100000 values"));
  // A billion laughs: 9 levels of 10 aliases each, 10^9 values if expanded.
  std::string laughs = "a0: &a0 [lol]\n";
  for (int level = 1; level < 10; ++level) {
    laughs += "a" + std::to_string(level) + ": &a" + std::to_string(level) + " [";
    for (int i = 0; i < 10; ++i) laughs += (i ? ", *a" : "*a") + std::to_string(level - 1);
    laughs += "]\n";
  }
  const auto start = std::chrono::steady_clock::now();
  CHECK(contains(text_error(laughs), "x.yaml:1:1: a0: unknown key"));
  CHECK(contains(text_error("model:\n  hidden_sizes: *a9\n" + laughs.substr(laughs.find('\n') + 1)),
                 "malformed YAML"));  // the anchor comes after its use
  CHECK(contains(text_error("train: &t {epochs: 1}\nmodel: *t\n"), "model.epochs: unknown key"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
  // A 1 MiB unknown key is refused without the suggestion search costing its length times every key's.
  ConfigRequest huge;
  huge.overrides = {"train." + std::string(1 << 20, 'k') + "=1"};
  CHECK(contains(text_error("", huge), "unknown key"));
}

TEST_CASE("addresses take IPv6 in brackets and store them without", "[config][input]") {
  ConfigRequest request;
  request.flags = {{"launch.master_addr", "[::1]", "--master-addr"},
                   {"launch.local_addr", "[::1]", "--local-addr"},
                   {"launch.status_bind", "[::1]", "--status-bind"},
                   {"launch.rdzv_endpoint", "[::1]:29400", "--rdzv-endpoint"}};
  const LoadedConfig loaded = load_text("", request);
  CHECK(loaded.config.launch.master_addr == "::1");
  CHECK(loaded.config.launch.local_addr == "::1");
  CHECK(loaded.config.launch.status_bind == "::1");
  CHECK(loaded.config.launch.rdzv_endpoint.host == "::1");
  CHECK(loaded.config.launch.rdzv_endpoint.port_or_default() == 29400);
  CHECK(load_text("launch:\n  master_addr: '[fe80::1]'\n").config.launch.master_addr == "fe80::1");
  ConfigRequest bad;
  bad.flags = {{"launch.master_addr", "[::1", "--master-addr"}};
  CHECK(contains(text_error("", bad), "'[::1' has a bracket that does not enclose the whole address"));
  // A list key still reads a flow list from a flag, with the same bounds and messages.
  ConfigRequest list;
  list.overrides = {"model.hidden_sizes=[8, [9"};
  CHECK(contains(text_error("", list), "model.hidden_sizes: malformed list '[8, [9' (at column"));
  list.overrides = {"model.hidden_sizes=" + flow_nesting(65)};
  CHECK(contains(text_error("", list), "nesting deeper than 64 levels"));
}

TEST_CASE("a rendezvous endpoint's host holds no blanks or stray brackets", "[config][input]") {
  for (const char* endpoint : {"a b:29400", "a\tb", "[::1]]:1", "x]"}) {
    INFO(endpoint);
    ConfigRequest request;
    request.flags = {{"launch.rdzv_endpoint", endpoint, "--rdzv-endpoint"}};
    CHECK(contains(text_error("", request), "launch.rdzv_endpoint: '"));
  }
}

TEST_CASE("a value's control characters are shown escaped, from every source, and never cut the message",
          "[config][input]") {
  auto no_control_characters = [](const std::string& message) {
    for (const char c : message)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
    return true;
  };
  // YAML's "\0" is a NUL: the message used to end at it ("launch.rdzv_endpoint: 'a").
  const std::string yaml = text_error("launch:\n  rdzv_endpoint: \"a\\0b\"\n");
  CHECK(yaml ==
        "x.yaml:2:18: launch.rdzv_endpoint: 'a\\0b' has a malformed host: byte 0x00 is not allowed in a host name "
        "(letters, digits, '-', '_' and '.') (allowed: empty, or HOST[:PORT])");
  CHECK(contains(text_error("launch:\n  run_id: \"x/\\ty\\e[2J\"\n"), "launch.run_id: 'x/\\ty\\x1b[2J' must be"));
  // The environment, a flag (argv cannot carry a NUL, but other control characters) and an override.
  const EnvMap env = {{"MGTRAIN_LAUNCH_RDZV_ENDPOINT",
                       "node\x01"
                       "0:29400"}};
  try {
    load_config_text("", "", {}, env, fixed_run_id());
    FAIL("expected a UsageError");
  } catch (const UsageError& e) {
    CHECK(contains(e.what(),
                   "environment MGTRAIN_LAUNCH_RDZV_ENDPOINT: launch.rdzv_endpoint: 'node\\x01"
                   "0:29400'"));
    CHECK(no_control_characters(e.what()));
  }
  ConfigRequest flag;
  flag.flags = {{"launch.master_addr",
                 "a\x01"
                 "b\x7f",
                 "--master-addr"}};
  const std::string from_flag = text_error("", flag);
  CHECK(contains(from_flag,
                 "--master-addr a\\x01"
                 "b\\x7f: launch.master_addr: 'a\\x01"
                 "b\\x7f' is not a valid host: "
                 "byte 0x01 is not allowed in a host name"));
  CHECK(no_control_characters(from_flag));
  ConfigRequest line_feed;
  line_feed.overrides = {"launch.run_id=a/\nb"};
  const std::string from_override = text_error("", line_feed);
  CHECK(contains(from_override, "override launch.run_id=a/\\nb: launch.run_id: 'a/\\nb' must be a plain name"));
  CHECK(no_control_characters(from_override));
}

TEST_CASE("a message quoting a huge value is cut to its start and end", "[config][input]") {
  const std::string message = text_error("launch:\n  nproc: " + std::string(1 << 20, '9') + "x\n");
  CHECK(message.size() < 4200);
  CHECK(contains(message, "x.yaml:2:10: launch.nproc: '999"));
  CHECK(contains(message, "characters left out ...]"));
  CHECK(contains(message, "(allowed: N >= 1, auto, gpu or cpu)"));
}

TEST_CASE("an unquoted bracketed IPv6 address in a YAML file is a list, and the message says to quote it",
          "[config][input]") {
  CHECK(contains(text_error("launch:\n  rdzv_endpoint: [::1]:29400\n"), "malformed YAML"));
  CHECK(text_error("launch:\n  master_addr: [::1]\n") ==
        "x.yaml:2:16: launch.master_addr: expected a string, got a list (in YAML a value starting with '[' is a list: "
        "quote it, e.g. '[::1]:29400')");
  CHECK(load_text("launch:\n  rdzv_endpoint: '[::1]:29400'\n").config.launch.rdzv_endpoint.host == "::1");
}
