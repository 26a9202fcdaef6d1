// The one parser and writer of each typed launch setting (see launch_settings.hpp).
#include "config/launch_settings.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <iterator>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "util/exit_status.hpp"
#include "util/strings.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain {
namespace {

constexpr std::size_t kCountDigits = 6;  // worker and node counts, GPU indices: up to 999999
constexpr std::size_t kRankDigits = 9;   // local ranks: up to 999999999 (torchrun's "9:1" style values fit)

// A run of 1 to `max_digits` ASCII digits as an int; nullopt for anything else (signs, blanks, too long).
std::optional<int> digits(const std::string& text, std::size_t max_digits) {
  const std::optional<std::uint64_t> value = parse_digits(text, max_digits);
  if (!value) return std::nullopt;
  return static_cast<int>(*value);
}

std::optional<int> positive_count(const std::string& text) {
  const std::optional<int> value = digits(text, kCountDigits);
  if (!value || *value == 0) return std::nullopt;
  return value;
}

// The entries of a comma-separated list, each trimmed.
std::vector<std::string> entries_of(const std::string& text) {
  std::vector<std::string> entries = split(text, ',');
  for (std::string& entry : entries) entry = trim(entry);
  return entries;
}

// "'x'" for a list of one entry, "'x' in '0,x'" otherwise: what an error quotes.
std::string quoted(const std::string& entry, const std::string& whole) {
  return entry == whole ? fmt::format("'{}'", entry) : fmt::format("'{}' in '{}'", entry, whole);
}

template <class T, class Text>
std::string joined(const std::vector<T>& items, Text text_of) {
  std::string text;
  for (const T& item : items) text += (text.empty() ? "" : ",") + text_of(item);
  return text;
}

std::optional<int> std_mode(const std::string& text) {
  const std::optional<int> mode = digits(text, 1);
  if (!mode || *mode > 3) return std::nullopt;
  return mode;
}

bool is_gpu_uuid(const std::string& entry) {
  const bool prefixed = starts_with(entry, "GPU-") || starts_with(entry, "MIG-");
  return prefixed && entry.size() > 4 && entry.find_first_of(" \t") == std::string::npos;
}

// The one rule for a host's slots in both forms (--hosts' "host:4", a hostfile's "slots=4"): a positive count.
std::optional<int> host_slots(const std::string& text) { return positive_count(trim(text)); }

std::string slots_problem(const std::string& text) {
  return fmt::format("'{}' is not a number of workers (slots): use a positive number", text);
}

}  // namespace

// ---- nproc ----------------------------------------------------------------------------------

Parsed<NprocSpec> NprocSpec::parse(const std::string& raw) {
  const std::string text = trim(raw);
  if (text == "auto") return NprocSpec{Kind::Auto, 1};
  if (text == "gpu") return NprocSpec{Kind::Gpu, 1};
  if (text == "cpu") return NprocSpec{Kind::Cpu, 1};
  if (const std::optional<int> count = positive_count(text)) return workers(*count);
  return Parsed<NprocSpec>::failure(fmt::format("'{}' is not a process count", text));
}

std::string NprocSpec::text() const {
  switch (kind) {
    case Kind::Auto:
      return "auto";
    case Kind::Gpu:
      return "gpu";
    case Kind::Cpu:
      return "cpu";
    case Kind::Count:
      break;
  }
  return std::to_string(count);
}

// ---- nnodes ---------------------------------------------------------------------------------

Parsed<NodeRange> NodeRange::parse(const std::string& raw) {
  const std::string text = trim(raw);
  if (const std::optional<int> count = positive_count(text)) return exactly(*count);
  const std::size_t colon = text.find(':');
  if (colon != std::string::npos) {
    const std::optional<int> low = positive_count(trim(text.substr(0, colon)));
    const std::optional<int> high = positive_count(trim(text.substr(colon + 1)));
    if (low && high && *low <= *high) return NodeRange{*low, *high};
  }
  return Parsed<NodeRange>::failure(fmt::format("'{}' is not a node count", text));
}

std::string NodeRange::text() const { return min == max ? std::to_string(min) : fmt::format("{}:{}", min, max); }

// ---- gpu_ids --------------------------------------------------------------------------------

std::string GpuId::text() const { return is_index() ? std::to_string(index) : uuid; }

Parsed<GpuList> GpuList::parse(const std::string& raw) {
  const std::string text = trim(raw);
  if (text.empty()) return GpuList{};
  if (text == "auto") return GpuList{Kind::Auto, {}};
  GpuList list{Kind::Listed, {}};
  for (const std::string& entry : entries_of(text)) {
    if (entry.empty()) return Parsed<GpuList>::failure(fmt::format("'{}' has an empty entry", text));
    if (const std::optional<int> index = digits(entry, kCountDigits)) {
      list.listed.push_back(GpuId{*index, ""});
    } else if (is_gpu_uuid(entry)) {
      list.listed.push_back(GpuId{-1, entry});
    } else if (entry == "auto") {
      return Parsed<GpuList>::failure(
          fmt::format("{}: auto stands alone, it picks every GPU itself", quoted(entry, text)));
    } else {
      return Parsed<GpuList>::failure(fmt::format("{} is not a GPU index or a GPU-/MIG- UUID", quoted(entry, text)));
    }
  }
  return list;
}

std::string GpuList::text() const {
  if (kind == Kind::AllVisible) return "";
  if (kind == Kind::Auto) return "auto";
  return joined(listed, [](const GpuId& id) { return id.text(); });
}

// ---- tee / redirect -------------------------------------------------------------------------

Parsed<StdSpec> StdSpec::parse(const std::string& raw) {
  const std::string text = trim(raw);
  if (text.find(':') == std::string::npos) {
    if (const std::optional<int> mode = std_mode(text)) return StdSpec{*mode, {}};
    return Parsed<StdSpec>::failure(fmt::format("'{}' is not a stream mapping", text));
  }
  StdSpec spec;
  for (const std::string& entry : entries_of(text)) {
    const std::size_t colon = entry.find(':');
    const bool pair = colon != std::string::npos;
    const std::optional<int> rank = pair ? digits(trim(entry.substr(0, colon)), kRankDigits) : std::nullopt;
    const std::optional<int> mode = pair ? std_mode(trim(entry.substr(colon + 1))) : std::nullopt;
    if (!rank || !mode) {
      return Parsed<StdSpec>::failure(fmt::format("{} is not a stream mapping (LOCAL_RANK:MODE)", quoted(entry, text)));
    }
    spec.per_rank.emplace_back(*rank, *mode);
  }
  return spec;
}

std::string StdSpec::text() const {
  if (per_rank.empty()) return std::to_string(all);
  return joined(per_rank,
                [](const std::pair<int, int>& pair) { return fmt::format("{}:{}", pair.first, pair.second); });
}

int StdSpec::mode_of(int local_rank) const {
  if (per_rank.empty()) return all;
  int mode = 0;
  for (const auto& [rank, rank_mode] : per_rank)
    if (rank == local_rank) mode = rank_mode;
  return mode;
}

// ---- local_ranks_filter ---------------------------------------------------------------------

Parsed<LocalRanks> LocalRanks::parse(const std::string& raw) {
  const std::string text = trim(raw);
  LocalRanks filter;
  if (text.empty()) return filter;
  for (const std::string& entry : entries_of(text)) {
    const std::optional<int> rank = digits(entry, kRankDigits);
    if (!rank) return Parsed<LocalRanks>::failure(fmt::format("{} is not a local rank", quoted(entry, text)));
    filter.ranks.push_back(*rank);
  }
  return filter;
}

std::string LocalRanks::text() const {
  return joined(ranks, [](int rank) { return std::to_string(rank); });
}

// ---- tty ------------------------------------------------------------------------------------

Parsed<TtySpec> TtySpec::parse(const std::string& raw) {
  const std::string text = trim(raw);
  if (text == "auto") return TtySpec{Kind::Auto, 0};
  if (text == "on") return TtySpec{Kind::On, 0};
  if (text == "off") return TtySpec{Kind::Off, 0};
  if (const std::optional<int> rank = digits(text, kRankDigits)) return TtySpec{Kind::Rank, *rank};
  return Parsed<TtySpec>::failure(fmt::format("'{}' is not auto, on, off or a local rank", text));
}

std::string TtySpec::text() const {
  switch (kind) {
    case Kind::Auto:
      return "auto";
    case Kind::On:
      return "on";
    case Kind::Off:
      return "off";
    case Kind::Rank:
      break;
  }
  return std::to_string(rank);
}

// ---- host names ----------------------------------------------------------------------------

namespace {

constexpr std::size_t kMaxNameChars = 253;
constexpr std::size_t kMaxLabelChars = 63;

bool name_character(unsigned char c) { return std::isalnum(c) || c == '-' || c == '_'; }

// One character as a message shows it: "'+'", "a blank", "byte 0x01" (a control character or a byte of UTF-8).
std::string shown_character(unsigned char c) {
  if (c == ' ') return "a blank";
  if (c > ' ' && c < 0x7f) return fmt::format("'{}'", static_cast<char>(c));
  return fmt::format("byte 0x{:02x}", c);
}

std::optional<std::string> ipv6_problem(const std::string& host) {
  const std::size_t percent = host.find('%');
  const std::string address = host.substr(0, percent);
  in6_addr parsed{};
  if (inet_pton(AF_INET6, address.c_str(), &parsed) != 1) {
    return fmt::format("'{}' is not an IPv6 address (and a host name has no ':')", address);
  }
  if (percent == std::string::npos) return std::nullopt;
  const std::string zone = host.substr(percent + 1);
  if (zone.empty()) return std::string("the IPv6 zone after '%' is empty");
  for (const unsigned char c : zone) {
    if (!name_character(c) && c != '.') return fmt::format("{} is not allowed in an IPv6 zone", shown_character(c));
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> host_name_problem(const std::string& host) {
  if (host.empty()) return std::string("the host is empty");
  if (host.find(':') != std::string::npos) return ipv6_problem(host);
  for (const unsigned char c : host) {
    if (!name_character(c) && c != '.') {
      return fmt::format("{} is not allowed in a host name (letters, digits, '-', '_' and '.')", shown_character(c));
    }
  }
  const std::string name = ends_with(host, ".") ? host.substr(0, host.size() - 1) : host;
  if (name.size() > kMaxNameChars) {
    return fmt::format("a host name has at most {} characters, this one {}", kMaxNameChars, name.size());
  }
  const std::vector<std::string> labels = split(name, '.');
  for (const std::string& label : labels) {
    if (label.empty()) return std::string("a host name has no empty part ('.' at its start or twice in a row)");
    if (label.size() > kMaxLabelChars) {
      return fmt::format("a part of a host name has at most {} characters, '{}...' has {}", kMaxLabelChars,
                         label.substr(0, 16), label.size());
    }
    if (label.front() == '-' || label.back() == '-') {
      return fmt::format("'{}': a part of a host name does not start or end with '-'", label);
    }
  }
  in_addr ipv4{};
  if (all_digits(labels.back()) && inet_pton(AF_INET, host.c_str(), &ipv4) != 1) {
    return std::string("it ends in a number but is not an IPv4 address (a.b.c.d, each 0-255)");
  }
  return std::nullopt;
}

// ---- rdzv_endpoint --------------------------------------------------------------------------

Parsed<RdzvEndpoint> RdzvEndpoint::parse(const std::string& raw) {
  const std::string text = trim(raw);
  if (text.empty()) return RdzvEndpoint{};
  auto fail = [&](const std::string& why) { return Parsed<RdzvEndpoint>::failure(fmt::format("'{}' {}", text, why)); };
  RdzvEndpoint endpoint;
  std::optional<std::string> port;  // the text after the host's ':'
  if (text.front() == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string::npos || close == 1) return fail("is not HOST:PORT");
    endpoint.host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') return fail("is not HOST:PORT");
      port = text.substr(close + 2);
    }
  } else {
    const std::size_t colon = text.rfind(':');
    if (colon == 0) return fail("has no host");
    if (colon != std::string::npos && text.find(':') != colon) {
      return fail("has several ':': write an IPv6 address in brackets, e.g. [::1]:29400");
    }
    endpoint.host = text.substr(0, colon);
    if (colon != std::string::npos) port = text.substr(colon + 1);
  }
  if (port) {
    const std::optional<int> number = digits(*port, 5);
    if (!number || *number > 65535) return fail("has no valid port (0-65535)");
    endpoint.port = number;
  }
  if (auto problem = host_name_problem(endpoint.host)) return fail("has a malformed host: " + *problem);
  return endpoint;
}

std::string RdzvEndpoint::text() const {
  if (empty()) return "";
  const std::string shown = host.find(':') == std::string::npos ? host : "[" + host + "]";
  return port ? fmt::format("{}:{}", shown, *port) : shown;
}

// ---- hosts / hostfile -----------------------------------------------------------------------

Parsed<HostList> HostList::parse(const std::string& raw) {
  const std::string text = trim(raw);
  HostList list;
  if (text.empty()) return list;
  for (const std::string& entry : entries_of(text)) {
    if (entry.empty()) return Parsed<HostList>::failure(fmt::format("'{}' has an empty entry", text));
    // An IPv6 address takes its slots in brackets ([fe80::1]:4); without brackets it has none (fe80::1).
    std::size_t colon = entry.rfind(':');
    std::string name = entry.substr(0, colon);
    if (starts_with(entry, "[")) {
      const std::size_t close = entry.find(']');
      if (close == std::string::npos || (close + 1 < entry.size() && entry[close + 1] != ':')) {
        return Parsed<HostList>::failure(
            fmt::format("{}: write an IPv6 address as [ADDRESS] or [ADDRESS]:SLOTS", quoted(entry, text)));
      }
      name = entry.substr(1, close - 1);
      colon = close + 1 < entry.size() ? close + 1 : std::string::npos;
    } else if (colon != std::string::npos && entry.find(':') != colon) {
      name = entry;
      colon = std::string::npos;
    }
    HostSlots host{trim(name), 0};
    if (host.host.empty()) return Parsed<HostList>::failure(fmt::format("{} has no host name", quoted(entry, text)));
    if (host.host.find_first_of(" \t") != std::string::npos) {
      return Parsed<HostList>::failure(fmt::format("{} has blanks in its host name", quoted(entry, text)));
    }
    if (colon != std::string::npos) {
      const std::string slots = entry.substr(colon + 1);
      const std::optional<int> count = host_slots(slots);
      if (!count) return Parsed<HostList>::failure(fmt::format("{}: {}", quoted(entry, text), slots_problem(slots)));
      host.slots = *count;
    }
    list.hosts.push_back(host);
  }
  return list;
}

Parsed<HostList> HostList::parse_hostfile(const std::string& text, const std::string& name) {
  HostList list;
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    std::istringstream words(line.substr(0, line.find('#')));
    HostSlots host;
    if (!(words >> host.host)) continue;
    for (std::string word; words >> word;) {
      if (word.rfind("slots=", 0) != 0) {
        return Parsed<HostList>::failure(
            fmt::format("{}:{}: unexpected '{}': write lines like `node0 slots=4`", name, number, word));
      }
      const std::optional<int> count = host_slots(word.substr(6));
      if (!count) {
        return Parsed<HostList>::failure(fmt::format("{}:{}: {}", name, number, slots_problem(word.substr(6))));
      }
      host.slots = *count;
    }
    list.hosts.push_back(host);
  }
  if (list.empty()) {
    return Parsed<HostList>::failure(
        fmt::format("{}: the hostfile names no host: write one line per host, e.g. `node0 slots=4`", name));
  }
  return list;
}

std::string HostList::text() const {
  return joined(hosts, [](const HostSlots& host) {
    const bool ipv6 = host.host.find(':') != std::string::npos;
    if (host.slots == 0) return host.host;
    return ipv6 ? fmt::format("[{}]:{}", host.host, host.slots) : fmt::format("{}:{}", host.host, host.slots);
  });
}

// ---- equality: the same value, whatever text it came from ------------------------------------

bool operator==(const NprocSpec& a, const NprocSpec& b) {
  return a.kind == b.kind && (!a.is_count() || a.count == b.count);
}
bool operator==(const NodeRange& a, const NodeRange& b) { return a.min == b.min && a.max == b.max; }
bool operator==(const GpuId& a, const GpuId& b) { return a.index == b.index && a.uuid == b.uuid; }
bool operator==(const GpuList& a, const GpuList& b) { return a.kind == b.kind && a.listed == b.listed; }
bool operator==(const StdSpec& a, const StdSpec& b) { return a.all == b.all && a.per_rank == b.per_rank; }
bool operator==(const LocalRanks& a, const LocalRanks& b) { return a.ranks == b.ranks; }
bool operator==(const RdzvEndpoint& a, const RdzvEndpoint& b) { return a.host == b.host && a.port == b.port; }
bool operator==(const HostSlots& a, const HostSlots& b) { return a.host == b.host && a.slots == b.slots; }
bool operator==(const HostList& a, const HostList& b) { return a.hosts == b.hosts; }
bool operator==(const TtySpec& a, const TtySpec& b) {
  return a.kind == b.kind && (a.kind != TtySpec::Kind::Rank || a.rank == b.rank);
}

SignalList SignalList::stopping_default() { return parse(kDefaultText).value(); }

Parsed<SignalList> SignalList::parse(const std::string& text) {
  static constexpr int kHandled[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
  SignalList list;
  for (const std::string& part : split(text, ',')) {
    const std::string name = trim(part);
    if (name.empty()) continue;
    const int* found = std::find_if(std::begin(kHandled), std::end(kHandled),
                                    [&name](int signal) { return signal_name(signal) == name; });
    if (found == std::end(kHandled)) {
      return Parsed<SignalList>::failure(
          fmt::format("mgtrain cannot handle {}: list only SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2", name));
    }
    if (std::find(list.signals.begin(), list.signals.end(), *found) == list.signals.end())
      list.signals.push_back(*found);
  }
  return list;
}

std::string SignalList::text() const {
  return joined(signals, [](int signal) { return signal_name(signal); });
}

}  // namespace mgtrain
