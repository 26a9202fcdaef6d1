// "did you mean ...?" suggestions: the closest candidate by edit distance, if it is close enough.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace mgtrain {

std::size_t edit_distance(const std::string& a, const std::string& b);

// The candidate nearest to `word` when the distance is small relative to its length, else nullopt.
std::optional<std::string> closest_match(const std::string& word, const std::vector<std::string>& candidates);

// " (did you mean X?)" or "".
std::string did_you_mean_suffix(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace mgtrain
