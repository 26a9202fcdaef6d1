// The torchrun personality's launcher-side rules that `mgtrain launch` does not share (docs/torchrun.md#the-torchrun-
// personality): where logs go when no --log-dir is given, what the launcher's own TORCHELASTIC_ERROR_FILE holds (as
// torchrun's @record main writes it), and the launcher's death by a signal torchrun does not handle.
#pragma once

#include <string>

#include "config/config_loader.hpp"
#include "supervise/failure_report.hpp"
#include "util/environment.hpp"

namespace mgtrain {

// torchrun keeps its logs in a fresh temporary directory (torchelastic_XXXX) and writes nothing under the current
// directory unless --log-dir is given. `mgtrain launch` defaults to ./runs; the personality, when launch.log_dir is
// still its default, uses $TMPDIR (or /tmp)/mgtrain-<user>/runs (log_layout::temp_log_dir), checkpoint.dir with it.
LoadedConfig with_torchrun_log_dir(const LoadedConfig& loaded, const EnvMap& environment);

// The launcher's TORCHELASTIC_ERROR_FILE after workers failed, when the environment names one.
// `mgtrain launch`: always written (launcher_error_file_json: the root cause's error file with errorCode, or a
// ChildFailedError record, plus "other_failures"). Torchrun personality, as torchrun: only when the root cause wrote
// an error file, which is copied with "errorCode" set (torch's dump_error_file); nothing otherwise.
void write_launcher_error_file(const FailureReport& report, const EnvMap& environment, Personality personality);

// Torchrun personality: the record torchrun's @record main writes when it stops on an exception, e.g. a handled
// signal ("SignalException: Process <pid> got signal: 15") or a launch error: {"message": {"message": TEXT,
// "extraInfo": {"py_callstack": ..., "timestamp": "<unix seconds>"}}}. Nothing when the environment names no file.
void write_torchrun_exception_file(const std::string& text, const EnvMap& environment);
std::string torchrun_signal_exception_text(int signal);

// Torchrun personality, a signal not in --signals-to-handle (SignalResponse::kStopAndDie), once the workers are
// stopped and the report written: the launcher dies by `signal` (default action), as torchrun does.
[[noreturn]] void die_by_signal(int signal);

}  // namespace mgtrain
