// `mgtrain config init`: the questions (the ones `accelerate config` asks, for mgtrain), answering them
// from flags or a prompt, and the commented starter YAML written from the schema.
#pragma once

#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/config_request.hpp"

namespace mgtrain {

struct InitQuestion {
  const char* flag;      // --nproc
  const char* key;       // launch.nproc
  const char* question;  // "Worker processes per node (N, gpu, cpu, auto)"
};

const std::vector<InitQuestion>& init_questions();

// Asks one question; returns the typed line, or nullopt at end of input.
using AskFunction = std::function<std::optional<std::string>(const std::string& prompt)>;

// Applies flag answers, then asks the remaining questions through `ask` (if given), re-asking after an
// invalid answer (the reason goes to `messages`). Throws UsageError for an invalid flag answer.
Config answer_init_questions(const std::vector<FlagSetting>& answers, const AskFunction* ask, std::ostream& messages);

// The starter file: every section and key with its doc as a comment and its value from `config`.
std::string starter_config_yaml(const Config& config);

}  // namespace mgtrain
