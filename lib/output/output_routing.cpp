// Parsing of torchrun-style --tee / --redirect / --local-ranks-filter values.
#include "output/output_routing.hpp"

#include <cstdint>
#include <optional>

#include "util/error.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain {
namespace {

// The comma-separated entries, each trimmed.
std::vector<std::string> split_trimmed(const std::string& text, char separator) {
  std::vector<std::string> parts = split(text, separator);
  for (std::string& part : parts) part = trim(part);
  return parts;
}

// A stream selection or local rank: up to 9 digits.
constexpr std::size_t kMaxDigits = 9;

StreamSet stream_set_from_value(const std::string& value, const std::string& text, const std::string& setting) {
  const std::optional<std::uint64_t> number = parse_digits(value, kMaxDigits);
  if (!number || *number > 3) {
    throw UsageError(setting + ": '" + text + "' is not a stream selection: use 0 (none), 1 (stdout), 2 (stderr), "
                     "3 (both), or a per-local-rank mapping such as 0:1,1:3");
  }
  return StreamSet{(*number & 1) != 0, (*number & 2) != 0};
}

}  // namespace

std::vector<StreamSet> parse_stream_selection(const std::string& text, int nproc, const std::string& setting) {
  std::string trimmed = trim(text);
  if (trimmed.find(':') == std::string::npos) {
    return std::vector<StreamSet>(nproc, stream_set_from_value(trimmed, text, setting));
  }
  std::vector<StreamSet> result(nproc);
  for (const std::string& entry : split_trimmed(trimmed, ',')) {
    std::size_t colon = entry.find(':');
    const std::optional<std::uint64_t> rank =
        colon == std::string::npos ? std::nullopt : parse_digits(trim(entry.substr(0, colon)), kMaxDigits);
    if (!rank) {
      throw UsageError(setting + ": '" + entry + "' in '" + text + "' is not LOCAL_RANK:STREAMS: write e.g. 0:1,1:3");
    }
    StreamSet streams = stream_set_from_value(trim(entry.substr(colon + 1)), text, setting);
    if (*rank < static_cast<std::uint64_t>(nproc)) result[*rank] = streams;
  }
  return result;
}

std::vector<bool> parse_local_ranks_filter(const std::string& text, int nproc) {
  std::string trimmed = trim(text);
  if (trimmed.empty()) return std::vector<bool>(nproc, true);
  std::vector<bool> selected(nproc, false);
  for (const std::string& entry : split_trimmed(trimmed, ',')) {
    const std::optional<std::uint64_t> rank = parse_digits(entry, kMaxDigits);
    if (!rank) {
      throw UsageError("launch.local_ranks_filter: '" + entry + "' in '" + text +
                       "' is not a local rank: write a comma-separated list such as 0 or 0,2");
    }
    if (*rank >= static_cast<std::uint64_t>(nproc)) {
      throw UsageError("launch.local_ranks_filter: local rank " + entry + " does not exist (this node runs " +
                       std::to_string(nproc) + " worker" + (nproc == 1 ? "" : "s") + ", local ranks 0.." +
                       std::to_string(nproc - 1) + ")");
    }
    selected[*rank] = true;
  }
  return selected;
}

std::vector<ConsoleRouting> resolve_console_routing(const std::string& tee, const std::string& redirect,
                                                    const std::string& local_ranks_filter, int nproc) {
  std::vector<StreamSet> tees = parse_stream_selection(tee, nproc, "launch.tee");
  std::vector<StreamSet> redirects = parse_stream_selection(redirect, nproc, "launch.redirect");
  std::vector<bool> shown = parse_local_ranks_filter(local_ranks_filter, nproc);
  std::vector<ConsoleRouting> routing(nproc);
  for (int rank = 0; rank < nproc; ++rank) {
    routing[rank].stdout_to_console = shown[rank] && (!redirects[rank].out || tees[rank].out);
    routing[rank].stderr_to_console = shown[rank] && (!redirects[rank].err || tees[rank].err);
  }
  return routing;
}

TtyChoice parse_tty_choice(const std::string& text, int nproc) {
  const std::string value = trim(text);
  if (value == "auto") return TtyChoice{TtyMode::Auto, 0};
  if (value == "on") return TtyChoice{TtyMode::On, 0};
  if (value == "off") return TtyChoice{TtyMode::Off, 0};
  const std::optional<std::uint64_t> rank = parse_digits(value, kMaxDigits);
  if (!rank) {
    throw UsageError("launch.tty: '" + text + "' is not a choice: use auto, on (local rank 0), off, or the local rank "
                     "that gets the terminal, e.g. 1");
  }
  if (*rank >= static_cast<std::uint64_t>(nproc)) {
    throw UsageError("launch.tty: local rank " + value + " does not exist (this node runs " + std::to_string(nproc) +
                     " worker" + (nproc == 1 ? "" : "s") + ", local ranks 0.." + std::to_string(nproc - 1) + ")");
  }
  return TtyChoice{TtyMode::On, static_cast<int>(*rank)};
}

StreamSet terminal_streams(const TtyChoice& choice, int local_rank, const ConsoleRouting& routing,
                           bool stdout_is_terminal, bool stderr_is_terminal) {
  if (choice.mode == TtyMode::Off || local_rank != choice.local_rank) return StreamSet{};
  if (choice.mode == TtyMode::On) return StreamSet{true, true};
  return StreamSet{routing.stdout_to_console && stdout_is_terminal, routing.stderr_to_console && stderr_is_terminal};
}

}  // namespace mgtrain
