// The launch settings whose text has a grammar of its own, as typed values: launch.nproc (NprocSpec), nnodes
// (NodeRange), gpu_ids (GpuList), tee and redirect (StdSpec), local_ranks_filter (LocalRanks), tty (TtySpec),
// rdzv_endpoint (RdzvEndpoint), hosts (HostList; a hostfile's text, read at launch time, through HostList's other
// parser) and signals_to_handle (SignalList).
// Each type has ONE parse function; the schema (config_schema_keys.cpp) calls it for every source (YAML, MGTRAIN_*,
// --set, flags, PET_* variables, SLURM's detected values), so a value is checked once, where it enters, and its
// error names the key and the source. text() writes the value back (`config show`, the resolved config.yaml the
// worker loads) and parses to the same value. Nothing else parses these texts: the launch plan
// (supervise/launch_plan.cpp) only resolves the values against the host (GPU count, CPUs, the resolved nproc).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "util/error.hpp"

namespace mgtrain {

// What a parse function gives: the value, or what is wrong with the text, e.g. "'many' is not a process count"
// (without the key or the source: the schema puts those in front and the allowed values behind).
template <class T>
class Parsed {
 public:
  Parsed(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor): `return NodeRange{...};`
  static Parsed failure(std::string error) {
    Parsed parsed;
    parsed.error_ = std::move(error);
    return parsed;
  }
  bool ok() const { return value_.has_value(); }
  // The value; on a failure it throws Error with the error text (for callers that know the text is good, e.g. tests).
  const T& value() const;
  const std::string& error() const { return error_; }

 private:
  Parsed() = default;
  std::optional<T> value_;
  std::string error_;
};

// launch.nproc: workers on this node, a count or how to count them on the host.
struct NprocSpec {
  enum class Kind { Count, Auto, Gpu, Cpu };  // auto: one per visible GPU, else 1; gpu: one per GPU; cpu: one per CPU
  static constexpr const char* kAllowed = "N >= 1, auto, gpu or cpu";
  Kind kind = Kind::Count;
  int count = 1;  // Kind::Count: 1 to 999999

  static NprocSpec workers(int count) { return NprocSpec{Kind::Count, count}; }
  static Parsed<NprocSpec> parse(const std::string& text);
  std::string text() const;
  bool is_count() const { return kind == Kind::Count; }
};

// launch.nnodes: "N", or "MIN:MAX" for an elastic job (1 <= MIN <= MAX <= 999999).
struct NodeRange {
  static constexpr const char* kAllowed = "N >= 1, or MIN:MAX with 1 <= MIN <= MAX";
  int min = 1;
  int max = 1;

  static NodeRange exactly(int count) { return NodeRange{count, count}; }
  static Parsed<NodeRange> parse(const std::string& text);
  std::string text() const;  // "N" when MIN == MAX
  bool is_range() const { return min != max; }
};

// One entry of launch.gpu_ids: an index into the GPUs CUDA sees (after CUDA_VISIBLE_DEVICES), or a GPU-/MIG- UUID
// that CUDA_VISIBLE_DEVICES takes as it is.
struct GpuId {
  int index = -1;    // >= 0: an index (0 to 999999)
  std::string uuid;  // otherwise: "GPU-..." or "MIG-..."
  bool is_index() const { return index >= 0; }
  std::string text() const;
};

// launch.gpu_ids: empty (every visible GPU, CUDA_VISIBLE_DEVICES untouched), auto (the GPUs with the most free
// memory, host/gpu_selection.hpp), or the GPUs listed, local rank i getting the i-th.
struct GpuList {
  enum class Kind { AllVisible, Auto, Listed };
  static constexpr const char* kAllowed = "empty, auto, or comma-separated GPU indices and GPU-/MIG- UUIDs";
  Kind kind = Kind::AllVisible;
  std::vector<GpuId> listed;  // Kind::Listed: one or more

  static Parsed<GpuList> parse(const std::string& text);
  std::string text() const;  // entries joined by ","
};

// launch.tee / launch.redirect: torchrun's Std, one mode for every local rank ("3"), or "rank:mode" pairs
// ("0:1,1:3"; a rank not named gets 0; ranks beyond nproc are ignored, as torchrun does). A mode is a set of
// streams: 0 none, 1 stdout, 2 stderr, 3 both.
struct StdSpec {
  static constexpr const char* kAllowed = "0-3, or rank:mode pairs like 0:3,1:1";
  int all = 0;                                // without pairs: every local rank's mode
  std::vector<std::pair<int, int>> per_rank;  // (local rank, mode), in the order written; the last one of a rank wins

  static Parsed<StdSpec> parse(const std::string& text);
  std::string text() const;
  int mode_of(int local_rank) const;
};

// launch.local_ranks_filter: the local ranks whose output reaches the console; empty: every rank.
struct LocalRanks {
  static constexpr const char* kAllowed = "empty, or comma-separated local ranks";
  std::vector<int> ranks;  // 0 to 999999999 each, in the order written

  static Parsed<LocalRanks> parse(const std::string& text);
  std::string text() const;  // ranks joined by ","
  bool all() const { return ranks.empty(); }
};

// launch.tty: which worker writes to a pseudo-terminal: auto, on (local rank 0), off, or a local rank.
struct TtySpec {
  enum class Kind { Auto, On, Off, Rank };
  static constexpr const char* kAllowed = "auto, on, off, or a local rank";
  Kind kind = Kind::Auto;
  int rank = 0;  // Kind::Rank: 0 to 999999999

  static Parsed<TtySpec> parse(const std::string& text);
  std::string text() const;
};

// The grammar of a host that the rendezvous or the workers' store is reached at or bound to (rdzv_endpoint's host,
// master_addr, local_addr, status_bind): an IPv4 address (a.b.c.d, each 0-255), an IPv6 address (bare, as inet_pton
// reads it, with an optional %zone), or a DNS name: labels of letters, digits, '-' and '_' joined by '.', none empty,
// none starting or ending with '-', at most 63 characters each and 253 in all, one trailing '.' allowed (RFC 1123;
// '_' is not in it, but glibc resolves such names and some clusters name their nodes so). A name whose last label is
// a number must be an IPv4 address ("1.2.3", "+1" and "10.0.0.256" are refused: getaddrinfo would read the first
// as an address and never find the others). nullopt for a valid host, else what is wrong with it, worded to follow
// a quote of the value: "'+' is not allowed in a host name (letters, digits, '-', '_' and '.')".
std::optional<std::string> host_name_problem(const std::string& host);

// launch.rdzv_endpoint: empty (static rendezvous, node ranks from node_rank), or HOST[:PORT], an IPv6 address in
// brackets ([::1]:29400), HOST as host_name_problem accepts it. Without a port, torchrun's c10d default 29400; port 0
// asks for a free port (one node only, the launch plan checks that).
struct RdzvEndpoint {
  static constexpr const char* kAllowed = "empty, or HOST[:PORT]";
  static constexpr int kDefaultPort = 29400;
  std::string host;         // empty: no endpoint
  std::optional<int> port;  // as written (0 to 65535); none: kDefaultPort

  static Parsed<RdzvEndpoint> parse(const std::string& text);
  std::string text() const;
  bool empty() const { return host.empty(); }
  int port_or_default() const { return port.value_or(kDefaultPort); }
};

// One host of launch.hosts or a hostfile: where a node agent runs ([user@]host, for the remote shell) and how many
// workers it runs.
struct HostSlots {
  std::string host;
  int slots = 0;  // 1 to 999999 workers on that host; 0: not given (launch.nproc applies)
};

// launch.hosts: empty (no --hosts), or "host[:slots],..." (e.g. node0:4,node1:4), one node agent per host, node ranks
// in this order. The last ':' of an entry starts its slots. A hostfile holds the same list as DeepSpeed-style lines.
struct HostList {
  static constexpr const char* kAllowed = "empty, or host[:slots],...";
  std::vector<HostSlots> hosts;

  static Parsed<HostList> parse(const std::string& text);
  // A hostfile's text: lines "host slots=4" ("host" alone: no count), '#' starts a comment, at least one host.
  // `name` (the file) and the line number start each error, e.g. "hosts.txt:2: unexpected 'gpus=8': ...".
  static Parsed<HostList> parse_hostfile(const std::string& text, const std::string& name);
  std::string text() const;  // entries joined by ","
  bool empty() const { return hosts.empty(); }
};

// launch.signals_to_handle: torchrun's --signals-to-handle, comma-separated names of the six signals the launcher
// receives; empty entries are skipped, a name given twice counts once.
struct SignalList {
  static constexpr const char* kAllowed = "comma-separated names of SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2";
  // torchrun's default, and what `mgtrain launch` stops on (TORCHELASTIC_SIGNALS_TO_HANDLE of its workers).
  static constexpr const char* kDefaultText = "SIGTERM,SIGINT,SIGHUP,SIGQUIT";
  std::vector<int> signals;  // in the order written

  static SignalList stopping_default();
  static Parsed<SignalList> parse(const std::string& text);
  std::string text() const;  // names joined by ","
};

bool operator==(const NprocSpec& a, const NprocSpec& b);
bool operator==(const NodeRange& a, const NodeRange& b);
bool operator==(const GpuId& a, const GpuId& b);
bool operator==(const GpuList& a, const GpuList& b);
bool operator==(const StdSpec& a, const StdSpec& b);
bool operator==(const LocalRanks& a, const LocalRanks& b);
bool operator==(const TtySpec& a, const TtySpec& b);
bool operator==(const RdzvEndpoint& a, const RdzvEndpoint& b);
bool operator==(const HostSlots& a, const HostSlots& b);
bool operator==(const HostList& a, const HostList& b);
inline bool operator==(const SignalList& a, const SignalList& b) { return a.signals == b.signals; }
inline bool operator!=(const NprocSpec& a, const NprocSpec& b) { return !(a == b); }
inline bool operator!=(const NodeRange& a, const NodeRange& b) { return !(a == b); }
inline bool operator!=(const GpuList& a, const GpuList& b) { return !(a == b); }
inline bool operator!=(const StdSpec& a, const StdSpec& b) { return !(a == b); }
inline bool operator!=(const LocalRanks& a, const LocalRanks& b) { return !(a == b); }
inline bool operator!=(const TtySpec& a, const TtySpec& b) { return !(a == b); }
inline bool operator!=(const RdzvEndpoint& a, const RdzvEndpoint& b) { return !(a == b); }
inline bool operator!=(const HostList& a, const HostList& b) { return !(a == b); }
inline bool operator!=(const SignalList& a, const SignalList& b) { return !(a == b); }

template <class T>
const T& Parsed<T>::value() const {
  if (!value_) throw Error(error_);
  return *value_;
}

}  // namespace mgtrain
