// The typed launch settings (config/launch_settings.hpp): each one parser, good and bad text in tables, through the
// parser itself and through the schema (every source gets the same rule and names the key, the source and what is
// allowed), and the text written back for `config show` / the worker's resolved config.yaml parsing to the same value;
// the hostfile form of the host list through its own parser.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "config/config_loader.hpp"
#include "config/config_schema.hpp"
#include "config/config_yaml.hpp"
#include "config/launch_settings.hpp"
#include "util/error.hpp"

using namespace mgtrain;

namespace {

struct Good {
  const char* key;
  const char* text;
  const char* written;  // what config show prints for it
};

// Every accepted form of every typed key, and its text once parsed.
const Good kGood[] = {
    {"launch.nproc", "4", "4"},
    {"launch.nproc", " 12 ", "12"},
    {"launch.nproc", "007", "7"},
    {"launch.nproc", "999999", "999999"},
    {"launch.nproc", "auto", "auto"},
    {"launch.nproc", "gpu", "gpu"},
    {"launch.nproc", "cpu", "cpu"},
    {"launch.nnodes", "2", "2"},
    {"launch.nnodes", "1:4", "1:4"},
    {"launch.nnodes", "3:3", "3"},
    {"launch.nnodes", "1 : 2", "1:2"},
    {"launch.gpu_ids", "", ""},
    {"launch.gpu_ids", "auto", "auto"},
    {"launch.gpu_ids", "0,2", "0,2"},
    {"launch.gpu_ids", "1, 3", "1,3"},
    {"launch.gpu_ids", "GPU-5a3c8e2f-1b2c-4d5e-8f90-123456789abc", "GPU-5a3c8e2f-1b2c-4d5e-8f90-123456789abc"},
    {"launch.gpu_ids", "MIG-GPU-5a3c/1/0,0", "MIG-GPU-5a3c/1/0,0"},
    {"launch.tee", "0", "0"},
    {"launch.tee", "3", "3"},
    {"launch.tee", "0:3,1:1", "0:3,1:1"},
    {"launch.redirect", "1:2, 9:3", "1:2,9:3"},
    {"launch.local_ranks_filter", "", ""},
    {"launch.local_ranks_filter", "0, 2", "0,2"},
    {"launch.tty", "auto", "auto"},
    {"launch.tty", "on", "on"},
    {"launch.tty", "off", "off"},
    {"launch.tty", "1", "1"},
    {"launch.rdzv_endpoint", "", ""},
    {"launch.rdzv_endpoint", "node0", "node0"},
    {"launch.rdzv_endpoint", "node0:29400", "node0:29400"},
    {"launch.rdzv_endpoint", "localhost:0", "localhost:0"},
    {"launch.rdzv_endpoint", "[::1]:1234", "[::1]:1234"},
    {"launch.rdzv_endpoint", "[fe80::1]", "[fe80::1]"},
    {"launch.rdzv_endpoint", "[fe80::1%eth0]:29400", "[fe80::1%eth0]:29400"},
    {"launch.rdzv_endpoint", "10.0.0.7:29400", "10.0.0.7:29400"},
    {"launch.rdzv_endpoint", "trainer-0.trainer.default.svc.cluster.local.:29400",
     "trainer-0.trainer.default.svc.cluster.local.:29400"},
    {"launch.rdzv_endpoint", "gpu_node07:29400", "gpu_node07:29400"},
    {"launch.hosts", "", ""},
    {"launch.hosts", "node0:4, node1:2", "node0:4,node1:2"},
    {"launch.hosts", "a,b", "a,b"},
    {"launch.hosts", "user@b:03", "user@b:3"},
    {"launch.hosts", "fe80::1,[fe80::2]:4,[::1]", "fe80::1,[fe80::2]:4,::1"},
};

struct Bad {
  const char* key;
  const char* text;
  const char* problem;  // what the error says, between the key and "(allowed: ...)"
};

const Bad kBad[] = {
    {"launch.nproc", "0", "'0' is not a process count"},
    {"launch.nproc", "-1", "'-1' is not a process count"},
    {"launch.nproc", "two", "'two' is not a process count"},
    {"launch.nproc", "", "'' is not a process count"},
    {"launch.nproc", "1000000", "'1000000' is not a process count"},
    {"launch.nproc", "2.5", "'2.5' is not a process count"},
    {"launch.nnodes", "0", "'0' is not a node count"},
    {"launch.nnodes", "3:2", "'3:2' is not a node count"},
    {"launch.nnodes", "1:", "'1:' is not a node count"},
    {"launch.nnodes", "1:2:3", "'1:2:3' is not a node count"},
    {"launch.gpu_ids", "0,x", "'x' in '0,x' is not a GPU index or a GPU-/MIG- UUID"},
    {"launch.gpu_ids", "-1", "'-1' is not a GPU index or a GPU-/MIG- UUID"},
    {"launch.gpu_ids", "GPU-", "'GPU-' is not a GPU index or a GPU-/MIG- UUID"},
    {"launch.gpu_ids", "gpu-aa", "'gpu-aa' is not a GPU index or a GPU-/MIG- UUID"},
    {"launch.gpu_ids", "0,,1", "'0,,1' has an empty entry"},
    {"launch.gpu_ids", "auto,0", "'auto' in 'auto,0': auto stands alone, it picks every GPU itself"},
    {"launch.tee", "4", "'4' is not a stream mapping"},
    {"launch.tee", "out", "'out' is not a stream mapping"},
    {"launch.tee", "", "'' is not a stream mapping"},
    {"launch.redirect", "0:1,x:2", "'x:2' in '0:1,x:2' is not a stream mapping (LOCAL_RANK:MODE)"},
    {"launch.redirect", "0:", "'0:' is not a stream mapping (LOCAL_RANK:MODE)"},
    {"launch.redirect", "0:4", "'0:4' is not a stream mapping (LOCAL_RANK:MODE)"},
    {"launch.local_ranks_filter", "a", "'a' is not a local rank"},
    {"launch.local_ranks_filter", "0,-2", "'-2' in '0,-2' is not a local rank"},
    {"launch.tty", "yes", "'yes' is not auto, on, off or a local rank"},
    {"launch.tty", "-1", "'-1' is not auto, on, off or a local rank"},
    {"launch.rdzv_endpoint", ":29400", "':29400' has no host"},
    {"launch.rdzv_endpoint", "::1:29400",
     "'::1:29400' has several ':': write an IPv6 address in brackets, e.g. [::1]:29400"},
    {"launch.rdzv_endpoint", "node0:", "'node0:' has no valid port (0-65535)"},
    {"launch.rdzv_endpoint", "node0:70000", "'node0:70000' has no valid port (0-65535)"},
    {"launch.rdzv_endpoint", "node0:http", "'node0:http' has no valid port (0-65535)"},
    {"launch.rdzv_endpoint", "[::1", "'[::1' is not HOST:PORT"},
    {"launch.rdzv_endpoint", "[]:1", "'[]:1' is not HOST:PORT"},
    {"launch.rdzv_endpoint", "[::1]1234", "'[::1]1234' is not HOST:PORT"},
    {"launch.rdzv_endpoint", "+1",
     "'+1' has a malformed host: '+' is not allowed in a host name (letters, digits, '-', '_' and '.')"},
    {"launch.rdzv_endpoint", "node-:29400",
     "'node-:29400' has a malformed host: 'node-': a part of a host name does not start or end with '-'"},
    {"launch.rdzv_endpoint", "a..b",
     "'a..b' has a malformed host: a host name has no empty part ('.' at its start or twice in a row)"},
    {"launch.rdzv_endpoint", "10.0.0.256:1",
     "'10.0.0.256:1' has a malformed host: it ends in a number but is not an IPv4 address (a.b.c.d, each 0-255)"},
    {"launch.rdzv_endpoint", "[fe80::zz]",
     "'[fe80::zz]' has a malformed host: 'fe80::zz' is not an IPv6 address (and a host name has no ':')"},
    {"launch.master_addr", "+1",
     "'+1' is not a valid host: '+' is not allowed in a host name (letters, digits, '-', '_' and '.')"},
    {"launch.master_addr", "-node0",
     "'-node0' is not a valid host: '-node0': a part of a host name does not start or end with '-'"},
    {"launch.master_addr", "1.2.3",
     "'1.2.3' is not a valid host: it ends in a number but is not an IPv4 address (a.b.c.d, each 0-255)"},
    {"launch.hosts", "a:x", "'a:x': 'x' is not a number of workers (slots): use a positive number"},
    {"launch.hosts", "a:2,b:0", "'b:0' in 'a:2,b:0': '0' is not a number of workers (slots): use a positive number"},
    {"launch.hosts", "a:", "'a:': '' is not a number of workers (slots): use a positive number"},
    {"launch.hosts", "a,,b", "'a,,b' has an empty entry"},
    {"launch.hosts", "a,b,", "'a,b,' has an empty entry"},
    {"launch.hosts", ":4", "':4' has no host name"},
    {"launch.hosts", "node 0:4", "'node 0:4' has blanks in its host name"},
    {"launch.hosts", "[fe80::1:4", "'[fe80::1:4': write an IPv6 address as [ADDRESS] or [ADDRESS]:SLOTS"},
    {"launch.hosts", "[]:4", "'[]:4' has no host name"},
};

LoadedConfig load_override(const std::string& key, const std::string& text) {
  ConfigRequest request;
  request.overrides = {key + "=" + text};
  LoadOptions options;
  options.make_run_id = [] { return std::string("r"); };
  return load_config_text("", "", request, {}, options);
}

std::string written(const LoadedConfig& loaded, const std::string& key) {
  return find_key(key)->read(loaded.config).Scalar();
}

}  // namespace

TEST_CASE("every accepted form loads through the schema and is written back in its canonical text",
          "[config][settings]") {
  for (const Good& good : kGood) {
    INFO(good.key << " = '" << good.text << "'");
    const LoadedConfig loaded = load_override(good.key, good.text);
    CHECK(written(loaded, good.key) == good.written);
    // The written text is what the worker's resolved config.yaml holds: it loads back to the same value.
    CHECK(written(load_override(good.key, good.written), good.key) == good.written);
    LoadOptions resolved;
    resolved.resolved = true;
    const LoadedConfig worker = load_config_text(config_to_yaml(loaded.config), "config.yaml", {}, {}, resolved);
    CHECK(written(worker, good.key) == good.written);
  }
}

TEST_CASE("every refused form names the source, the key, the problem and what is allowed",
          "[config][settings][errors]") {
  for (const Bad& bad : kBad) {
    INFO(bad.key << " = '" << bad.text << "'");
    const std::string allowed = find_key(bad.key)->allowed_text();
    const std::string expected =
        fmt::format("override {}={}: {}: {} (allowed: {})", bad.key, bad.text, bad.key, bad.problem, allowed);
    CHECK_THROWS_WITH(load_override(bad.key, bad.text), expected);
  }
  // A YAML file names the line and column; the allowed text is the type's.
  CHECK_THROWS_WITH(load_config_text("launch:\n  tty: maybe\n", "job.yaml", {}, {}),
                    "job.yaml:2:8: launch.tty: 'maybe' is not auto, on, off or a local rank "
                    "(allowed: auto, on, off, or a local rank)");
  CHECK(find_key("launch.gpu_ids")->allowed_text() == GpuList::kAllowed);
}

TEST_CASE("the parsers give typed values", "[config][settings]") {
  CHECK(NprocSpec::parse("3").value() == NprocSpec::workers(3));
  CHECK(NprocSpec::parse("gpu").value().kind == NprocSpec::Kind::Gpu);
  CHECK(NprocSpec::parse("auto").value() != NprocSpec::parse("cpu").value());
  const NodeRange elastic = NodeRange::parse("2:5").value();
  CHECK((elastic.min == 2 && elastic.max == 5 && elastic.is_range()));
  CHECK_FALSE(NodeRange::parse("4").value().is_range());

  const GpuList gpus = GpuList::parse("2,GPU-aa").value();
  REQUIRE(gpus.kind == GpuList::Kind::Listed);
  REQUIRE(gpus.listed.size() == 2);
  CHECK((gpus.listed[0].is_index() && gpus.listed[0].index == 2));
  CHECK((!gpus.listed[1].is_index() && gpus.listed[1].uuid == "GPU-aa"));
  CHECK(GpuList::parse("").value().kind == GpuList::Kind::AllVisible);
  CHECK(GpuList::parse("auto").value().kind == GpuList::Kind::Auto);

  const StdSpec all = StdSpec::parse("2").value();
  CHECK((all.mode_of(0) == 2 && all.mode_of(7) == 2));
  const StdSpec mapped = StdSpec::parse("0:1,1:3,0:2").value();  // the last entry of a rank wins
  CHECK(mapped.mode_of(0) == 2);
  CHECK(mapped.mode_of(1) == 3);
  CHECK(mapped.mode_of(2) == 0);  // not named: nothing

  CHECK(LocalRanks::parse("").value().all());
  CHECK(LocalRanks::parse("2,0").value().ranks == std::vector<int>{2, 0});
  CHECK(TtySpec::parse("on").value() == (TtySpec{TtySpec::Kind::On, 0}));
  CHECK(TtySpec::parse("0").value() == (TtySpec{TtySpec::Kind::Rank, 0}));  // a rank, written back as "0", not "on"
  CHECK(TtySpec::parse("0").value().text() == "0");

  const RdzvEndpoint v6 = RdzvEndpoint::parse("[::1]:0").value();
  CHECK((v6.host == "::1" && v6.port == 0 && v6.port_or_default() == 0));
  CHECK(RdzvEndpoint::parse("node0").value().port_or_default() == RdzvEndpoint::kDefaultPort);
  CHECK(RdzvEndpoint::parse(" ").value().empty());

  const HostList hosts = HostList::parse("node0:4, user@node1").value();
  CHECK(hosts.hosts == std::vector<HostSlots>{{"node0", 4}, {"user@node1", 0}});  // 0: launch.nproc applies
  CHECK(HostList::parse(" ").value().empty());

  const Parsed<NprocSpec> failed = NprocSpec::parse("many");
  CHECK_FALSE(failed.ok());
  CHECK(failed.error() == "'many' is not a process count");
  CHECK_THROWS_AS(failed.value(), Error);
}

TEST_CASE("a host is an IPv4 or IPv6 address or an RFC 1123 name (with '_'), nothing else", "[config][settings]") {
  const std::string label63(63, 'a');
  const std::string name253 = label63 + "." + label63 + "." + label63 + "." + std::string(61, 'b');
  REQUIRE(name253.size() == 253);
  for (const std::string& good : {std::string("node0"),
                                  std::string("localhost"),
                                  std::string("n"),
                                  std::string("0node"),
                                  std::string("gpu-node-07"),
                                  std::string("gpu_node_07"),
                                  std::string("Node0.Example.COM"),
                                  std::string("trainer-0.trainer.default.svc.cluster.local."),
                                  std::string("xn--bcher-kva.example"),
                                  std::string("127.0.0.1"),
                                  std::string("10.0.0.255"),
                                  std::string("10.0.0.1a"),
                                  std::string("::1"),
                                  std::string("::"),
                                  std::string("fe80::1%eth0"),
                                  std::string("2001:db8::8a2e:370:7334"),
                                  std::string("::ffff:10.0.0.1"),
                                  label63,
                                  name253,
                                  name253 + "."}) {
    INFO(good);
    CHECK(host_name_problem(good) == std::nullopt);
  }
  const std::pair<std::string, std::string> bad[] = {
      {"", "the host is empty"},
      {"+1", "'+' is not allowed in a host name (letters, digits, '-', '_' and '.')"},
      {"node 0", "a blank is not allowed in a host name (letters, digits, '-', '_' and '.')"},
      {std::string("a\x01"
                   "b",
                   3),
       "byte 0x01 is not allowed in a host name (letters, digits, '-', '_' and '.')"},
      {"n\xc3\xb6"
       "de",
       "byte 0xc3 is not allowed in a host name (letters, digits, '-', '_' and '.')"},
      {"user@node0", "'@' is not allowed in a host name (letters, digits, '-', '_' and '.')"},
      {"node0/24", "'/' is not allowed in a host name (letters, digits, '-', '_' and '.')"},
      {"-node", "'-node': a part of a host name does not start or end with '-'"},
      {"node-.example", "'node-': a part of a host name does not start or end with '-'"},
      {".node", "a host name has no empty part ('.' at its start or twice in a row)"},
      {"node..example", "a host name has no empty part ('.' at its start or twice in a row)"},
      {".", "a host name has no empty part ('.' at its start or twice in a row)"},
      {"node0..", "a host name has no empty part ('.' at its start or twice in a row)"},
      {label63 + "a", "a part of a host name has at most 63 characters, 'aaaaaaaaaaaaaaaa...' has 64"},
      {name253 + "b", "a host name has at most 253 characters, this one 254"},
      {"1", "it ends in a number but is not an IPv4 address (a.b.c.d, each 0-255)"},
      {"10.0.0.256", "it ends in a number but is not an IPv4 address (a.b.c.d, each 0-255)"},
      {"10.0.0.1.", "it ends in a number but is not an IPv4 address (a.b.c.d, each 0-255)"},
      {"node.42", "it ends in a number but is not an IPv4 address (a.b.c.d, each 0-255)"},
      {"fe80::zz", "'fe80::zz' is not an IPv6 address (and a host name has no ':')"},
      {"node0:1", "'node0:1' is not an IPv6 address (and a host name has no ':')"},
      {"fe80::1%", "the IPv6 zone after '%' is empty"},
      {"fe80::1%a b", "a blank is not allowed in an IPv6 zone"},
  };
  for (const auto& [host, problem] : bad) {
    INFO(host);
    CHECK(host_name_problem(host) == std::optional<std::string>(problem));
  }
}

TEST_CASE("the defaults are the typed settings' defaults, written as before", "[config][settings]") {
  const Config defaults;
  const std::pair<const char*, const char*> expected[] = {
      {"launch.nproc", "1"},  {"launch.nnodes", "1"},       {"launch.gpu_ids", ""},
      {"launch.tee", "0"},    {"launch.redirect", "0"},     {"launch.local_ranks_filter", ""},
      {"launch.tty", "auto"}, {"launch.rdzv_endpoint", ""}, {"launch.hosts", ""}};
  for (const auto& [key, text] : expected) {
    INFO(key);
    CHECK(find_key(key)->read(defaults).Scalar() == text);
    CHECK(find_key(key)->type_name == "string");
  }
}

TEST_CASE("launch.gpu_ids GPU UUIDs: a config is accepted exactly like --gpu-ids", "[config][settings][gpu]") {
  const std::string uuid = "GPU-5a3c8e2f-1b2c-4d5e-8f90-123456789abc";
  LoadOptions options;
  options.make_run_id = [] { return std::string("r"); };
  const std::string yaml = "launch:\n  gpu_ids: " + uuid + ",MIG-bb\n";
  const LoadedConfig from_yaml = load_config_text(yaml, "job.yaml", {}, {}, options);
  ConfigRequest flag;
  flag.flags = {{"launch.gpu_ids", uuid + ",MIG-bb", "--gpu-ids"}};
  const LoadedConfig from_flag = load_config_text("", "", flag, {}, options);
  CHECK(from_yaml.config.launch.gpu_ids == from_flag.config.launch.gpu_ids);
  REQUIRE(from_yaml.config.launch.gpu_ids.listed.size() == 2);
  CHECK(from_yaml.config.launch.gpu_ids.listed[0].uuid == uuid);
  CHECK(from_yaml.config.launch.gpu_ids.text() == uuid + ",MIG-bb");
  // The resolved config.yaml the launcher writes for the worker loads back to the same list.
  LoadOptions resolved = options;
  resolved.resolved = true;
  const LoadedConfig worker = load_config_text(config_to_yaml(from_yaml.config), "config.yaml", {}, {}, resolved);
  CHECK(worker.config.launch.gpu_ids == from_yaml.config.launch.gpu_ids);
}

TEST_CASE("an IPv6 endpoint from a flag or --set is text, not a YAML list", "[config][settings]") {
  ConfigRequest request;
  request.flags = {{"launch.rdzv_endpoint", "[::1]:29400", "--rdzv-endpoint"}};
  request.overrides = {"model.hidden_sizes=[8, 4]"};  // a list key still takes a flow list
  const LoadedConfig loaded = load_config_text("", "", request, {});
  CHECK(loaded.config.launch.rdzv_endpoint == (RdzvEndpoint{"::1", 29400}));
  CHECK(loaded.config.model.hidden_sizes == std::vector<std::int64_t>{8, 4});
}

TEST_CASE("a hostfile: DeepSpeed-style lines, errors naming the file and line", "[config][settings][hosts]") {
  const std::string text = "# the cluster\nnode0 slots=8\n\n  node1   slots=8  # second\nnode2\n";
  const HostList file = HostList::parse_hostfile(text, "hosts.txt").value();
  CHECK(file.hosts == std::vector<HostSlots>{{"node0", 8}, {"node1", 8}, {"node2", 0}});
  CHECK(file.text() == "node0:8,node1:8,node2");  // the same list as --hosts writes it
  CHECK(HostList::parse(file.text()).value() == file);
  const std::pair<const char*, const char*> bad[] = {
      {"node0 slots=8\nnode1 gpus=8\n", "hosts.txt:2: unexpected 'gpus=8': write lines like `node0 slots=4`"},
      {"node0 slots=x\n", "hosts.txt:1: 'x' is not a number of workers (slots): use a positive number"},
      {"node0\n\nnode1 slots=0\n", "hosts.txt:3: '0' is not a number of workers (slots): use a positive number"},
      {"# nothing\n", "hosts.txt: the hostfile names no host: write one line per host, e.g. `node0 slots=4`"},
      {"", "hosts.txt: the hostfile names no host: write one line per host, e.g. `node0 slots=4`"},
  };
  for (const auto& [text, error] : bad) {
    INFO(text);
    CHECK(HostList::parse_hostfile(text, "hosts.txt").error() == error);
  }
}
