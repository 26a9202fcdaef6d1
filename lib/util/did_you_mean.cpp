// Edit-distance suggestions for misspelled keys, choices, flags and variables.
#include "util/did_you_mean.hpp"

#include <algorithm>

namespace mgtrain {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  // Optimal string alignment distance: insertions, deletions, substitutions and adjacent swaps cost 1.
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

std::optional<std::string> closest_match(const std::string& word, const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  std::size_t best_distance = 0;
  const std::size_t limit = std::max<std::size_t>(2, word.size() / 3);
  for (const auto& candidate : candidates) {
    // The distance is at least the difference in length: a candidate that far off cannot pass the limit below, and
    // skipping it keeps a huge word (a 16 MiB key) from costing its length times each candidate's.
    const std::size_t length_gap =
        word.size() > candidate.size() ? word.size() - candidate.size() : candidate.size() - word.size();
    if (length_gap > limit) continue;
    std::size_t distance = edit_distance(word, candidate);
    if (!best || distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  if (best && best_distance > 0 && best_distance <= limit) return best;
  return std::nullopt;
}

std::string did_you_mean_suffix(const std::string& word, const std::vector<std::string>& candidates) {
  auto match = closest_match(word, candidates);
  return match ? " (did you mean " + *match + "?)" : "";
}

}  // namespace mgtrain
