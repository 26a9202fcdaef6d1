// Reading the JSON a torch worker writes to TORCHELASTIC_ERROR_FILE when its entry point is wrapped
// in torch.distributed.elastic.multiprocessing.errors.record:
//   {"message": {"message": "RuntimeError: ...", "extraInfo": {"py_callstack": "Traceback ...", "timestamp":
//   "1700000000"}}}
// Older writers put a plain string in "message" and the timestamp next to it.
#pragma once

#include <string>

namespace mgtrain {

struct TorchErrorRecord {
  std::string message;    // e.g. "RuntimeError: boom"
  std::string traceback;  // py_callstack
  std::string timestamp;  // as written: Unix seconds
  std::string problem;    // non-empty when the file was not understood; then `excerpt` holds its start
  std::string excerpt;
};

// Never throws: a malformed file yields a record with `problem` set.
TorchErrorRecord parse_torch_error_file(const std::string& text);

}  // namespace mgtrain
