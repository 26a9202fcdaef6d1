// SLURM hostlist expressions, expanded natively: "node[01-04,07]", "gpu-[1-2]x-[a,b]", "a,b[1-2]".
// Zero padding follows the range's lower bound ("[08-10]" gives 08, 09, 10); several bracket groups
// multiply out, the leftmost varying slowest; commas outside brackets separate host expressions.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace mgtrain {

// Throws UsageError naming the expression and the problem (unbalanced bracket, bad range, ...).
// `limit` caps the number of hosts, so a hostile "n[0-999999999]" cannot exhaust memory.
std::vector<std::string> expand_hostlist(const std::string& expression, std::size_t limit = 1'000'000);

}  // namespace mgtrain
