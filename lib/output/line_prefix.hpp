// The prefix of each worker line on the launcher's console: mgtrain's "[rank N] ", or torch 2.x's
// TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE, a Python string.Template with ${role_name}, ${rank}, ${local_rank}
// and ${hostname} (torch/distributed/elastic/agent/server/local_elastic_agent.py). The rendered template is
// the whole prefix, used as written (no space is added), as torch's tail_log does. In the torchrun personality
// (console_prefix) only teed streams get a prefix, torchrun's "[<role><local rank>]:" unless a template is set.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace mgtrain {

inline constexpr const char* kLogLinePrefixTemplateVariable = "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE";

// What a template may refer to, for one worker.
struct PrefixFields {
  std::string role_name;  // the workers' ROLE_NAME (launch.role)
  int rank = 0;           // global rank
  int local_rank = 0;
  std::string hostname;
};

class LinePrefix {
 public:
  // mgtrain's own prefix: "[rank N] ".
  LinePrefix() = default;
  // A checked template. `source` names where it came from in error messages. Python's rules: "$$" is a
  // literal "$", "$name" and "${name}" are placeholders, a "$" followed by anything else stays as it is.
  // Throws UsageError for a placeholder torch does not know (torch would print it unreplaced, which is
  // always a typo) or an unclosed "${".
  static LinePrefix from_template(const std::string& text, const std::string& source);
  // The template of a setting (the flag, or the launcher's environment) when set and not empty (torch treats "" as
  // unset); else the default prefix.
  static LinePrefix from_setting(const std::optional<std::string>& value, const std::string& source);

  std::string render(const PrefixFields& fields) const;
  bool is_template() const { return template_.has_value(); }

 private:
  // The template cut into literal text and placeholders.
  struct Part {
    bool placeholder = false;
    std::string text;  // the literal, or the placeholder's name
  };
  std::optional<std::vector<Part>> template_;
};

// The prefix of one worker stream's console lines. mgtrain's console prefixes every line (`configured`: "[rank N] "
// or the template). torchrun's (`torchrun_console`) prints a stream that is not teed as the worker wrote it (the
// worker owns the launcher's stdout/stderr there), and a teed one behind the template, else "[<role><local rank>]:"
// (tail_log.py's TailLog header, e.g. "[default0]:").
std::string console_prefix(const LinePrefix& configured, bool torchrun_console, bool teed, const PrefixFields& fields);

}  // namespace mgtrain
