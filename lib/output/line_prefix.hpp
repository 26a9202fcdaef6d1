// The prefix of each worker line on the launcher's console: mgtrain's "[rank N] ", or torch 2.x's
// TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE, a Python string.Template with ${role_name}, ${rank}, ${local_rank}
// and ${hostname} (torch/distributed/elastic/agent/server/local_elastic_agent.py). The rendered template is
// the whole prefix, used as written (no space is added), as torch's tail_log does.
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
  // The template from the launcher's environment when set and not empty (torch treats "" as unset).
  static LinePrefix from_environment(const std::optional<std::string>& value);

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

}  // namespace mgtrain
