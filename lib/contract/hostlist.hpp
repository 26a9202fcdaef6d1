// SLURM hostlist expressions, expanded natively as `scontrol show hostnames` does (SLURM 22.05):
//   node[01-04,07]     node01 node02 node03 node04 node07   ranges and single numbers inside brackets
//   n[8-11] n[098-101] n8 n9 n10 n11, n098 n099 n100 n101    width = digits of the lower bound (zero padding)
//   r[1-2]n[1-2]       r1n1 r1n2 r2n1 r2n2                  several groups multiply out, leftmost slowest
//   a[1-2],b[3,5] c    a1 a2 b3 b5 c                        commas or whitespace separate host expressions
// Brackets hold numbers only (SLURM rejects "n[a,b]"), a range spans at most 65536 hosts (SLURM's limit),
// and order and duplicates are kept. Differences from SLURM, all on input SLURM never produces itself:
// text after the last group ("n[1-2]-ib") is accepted; empty entries ("a,,b", "n[1-]"), an unclosed
// "[" and a stray "]" are errors where SLURM skips or guesses.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace mgtrain {

// Throws UsageError "hostlist 'EXPR': PROBLEM" (unbalanced bracket, bad or reversed range, ...).
// `limit` caps the number of hosts in all, so a hostile "n[0-65535][0-65535]" cannot exhaust memory.
std::vector<std::string> expand_hostlist(const std::string& expression, std::size_t limit = 1'000'000);

// Largest number of hosts one range may span, as in SLURM ("n[0-65535]" is the widest).
inline constexpr unsigned long long kMaxHostlistRange = 65536;

}  // namespace mgtrain
