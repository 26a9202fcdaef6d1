// Out-of-line parts of the error types.
#include "util/error.hpp"

#include <cstring>

namespace mgtrain {

SystemError::SystemError(const std::string& what, int err)
    : Error(what + ": " + std::strerror(err), exit_code::kFailure), errno_(err) {}

}  // namespace mgtrain
