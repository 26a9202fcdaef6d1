// Small text helpers that every library needs (C++17 has no std::string::starts_with): prefix and suffix tests,
// text cut into lines, a tensor shape as text, rank numbers as runs, and control characters escaped for messages.
// Parsing text into values is in value_parsing.hpp; JSON strings in json_text.hpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mgtrain {

bool starts_with(std::string_view text, std::string_view prefix);
bool ends_with(std::string_view text, std::string_view suffix);

// The lines of `text`, each ended by `terminator` (the last one may lack it), without their terminators:
// "a\n\nb" -> {"a", "", "b"}, "a\n" -> {"a"}, "" -> {}. '\0' cuts /proc's argv-style files.
// (value_parsing's split(text, ',') is for separated lists: "a," -> {"a", ""}.)
std::vector<std::string> split_lines(std::string_view text, char terminator = '\n');

// "[2, 3]", "[]" for a scalar: a tensor's shape in messages. Torch-free: LibTorch callers pass sizes().vec().
std::string shape_text(const std::vector<std::int64_t>& shape);

// Rank numbers as runs, sorted, each once. Compact (the console's "[ranks 0-7,9]"): "0-3,5,7-8", every run of two or
// more a range. Prose (messages: "ranks 0-2, 5 waiting"): "0-3, 5, 7, 8", runs of three or more a range, a pair spelled
// out.
enum class RankRuns { Compact, Prose };
std::string rank_runs(std::vector<int> ranks, RankRuns style);

// `text` with its control characters (bytes 0-31 and 127) written as escapes, "\0", "\t", "\n", "\r" and "\xNN"
// for the others (ESC: "\x1b"), except those in `kept`; everything else, UTF-8 included, stays as it is. For messages
// that quote a value: a NUL would cut the message (an exception's what() is a C string), and the others would move
// the terminal's cursor or hide what follows. Backslashes stay single: "a\\0b" and "a<NUL>b" read alike.
std::string escape_control_characters(std::string_view text, std::string_view kept = {});

// `text` itself when it has at most `limit` bytes; else its start, cut where a UTF-8 character begins, and "...": at
// most `limit` bytes in all, the mark alone when `limit` is below 3 (for one-line messages with a size bound).
std::string cut_with_ellipsis(std::string text, std::size_t limit);

}  // namespace mgtrain
