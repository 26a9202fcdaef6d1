// torch's NCCL flight recorder, pointed into the rank's log folder: the worker variables that make each rank keep
// a trace buffer and dump it there (on a collective's timeout, and on request through torch's debug pipe), and
// the collector that finds the dumps for the failure report. Names as torch 2.x reads them (c10d's
// FlightRecorder.hpp, ProcessGroupNCCL.hpp): each setting has a current name and an older alias.
#pragma once

#include <string>
#include <vector>

#include "util/environment.hpp"

namespace mgtrain::diagnose {

// The dumps' name prefix inside the rank folder: torch appends the rank ("nccl_trace_rank_3"; with
// TORCH_FR_DUMP_DYNAMIC_FILE_NAME more after it), and the debug pipe is "<prefix><rank>.pipe".
inline constexpr const char* kFlightRecorderPrefix = "nccl_trace_rank_";

// The variables to add for the rank whose folder is `rank_directory`, given the environment the worker would get
// (`environment`: a setting the user made under either of its names is left alone, and so is nothing added for
// it). Pure. Sets, under the TORCH_NCCL_ names every torch 2.x reads: the trace buffer size
// (TORCH_NCCL_TRACE_BUFFER_SIZE, alias TORCH_FR_BUFFER_SIZE; 0, no trace, in older 2.x), dump on timeout
// (TORCH_NCCL_DUMP_ON_TIMEOUT, alias TORCH_FR_DUMP_ON_TIMEOUT), the dump file prefix (TORCH_NCCL_DEBUG_INFO_TEMP_FILE,
// alias TORCH_FR_DUMP_TEMP_FILE; torch's default is under ~/.cache/torch or /tmp) and the debug pipe prefix
// (TORCH_NCCL_DEBUG_INFO_PIPE_FILE).
EnvMap flight_recorder_environment(const EnvMap& environment, const std::string& rank_directory);

// The flight recorder dumps in a rank folder (regular files named <prefix>*, not the .pipe), sorted by name.
std::vector<std::string> flight_recorder_files(const std::string& rank_directory);

// torch's reader (`torchfrtrace DIR`, torch.distributed.flight_recorder) wants every rank's dump in one folder:
// copies the dumps of `rank_directories` into `folder` (made if absent; e.g. attempt_N/flight_recorder) and returns
// the copies' paths. Names are kept (torch names each dump by its rank). A dump that cannot be copied is skipped.
std::vector<std::string> gather_flight_recorder_files(const std::vector<std::string>& rank_directories,
                                                      const std::string& folder);

// Asks every rank in the folder whose NCCL process group listens on its debug pipe (<prefix><rank>.pipe, a FIFO
// torch creates) to dump its trace now: writes one byte to each without blocking. Returns how many pipes took it
// (0: no NCCL group, or torch without the pipe; not an error).
int request_flight_recorder_dump(const std::string& rank_directory);

}  // namespace mgtrain::diagnose
