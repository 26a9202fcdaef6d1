// torchrun's console routing rule (tee over redirect, then the rank filter) and the pseudo-terminal choice.
#include "output/output_routing.hpp"

#include <cstddef>

namespace mgtrain {

StreamSet streams_of_std(int mode) { return StreamSet{(mode & 1) != 0, (mode & 2) != 0}; }

std::vector<ConsoleRouting> resolve_console_routing(const std::vector<StreamSet>& tees,
                                                    const std::vector<StreamSet>& redirects,
                                                    const std::vector<bool>& shown) {
  std::vector<ConsoleRouting> routing(shown.size());
  for (std::size_t rank = 0; rank < shown.size(); ++rank) {
    routing[rank].stdout_to_console = shown[rank] && (!redirects[rank].out || tees[rank].out);
    routing[rank].stderr_to_console = shown[rank] && (!redirects[rank].err || tees[rank].err);
    routing[rank].stdout_teed = shown[rank] && tees[rank].out;
    routing[rank].stderr_teed = shown[rank] && tees[rank].err;
  }
  return routing;
}

StreamSet terminal_streams(const TtyChoice& choice, int local_rank, const ConsoleRouting& routing,
                           bool stdout_is_terminal, bool stderr_is_terminal) {
  if (choice.mode == TtyMode::Off || local_rank != choice.local_rank) return StreamSet{};
  if (choice.mode == TtyMode::On) return StreamSet{true, true};
  return StreamSet{routing.stdout_to_console && stdout_is_terminal, routing.stderr_to_console && stderr_is_terminal};
}

}  // namespace mgtrain
