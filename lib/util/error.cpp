// Out-of-line parts of the error types.
#include "util/error.hpp"

#include <cstring>

#include "util/strings.hpp"

namespace mgtrain {

Error::Error(const std::string& message, int exit_code)
    : std::runtime_error(escape_control_characters(message, "\n\t")), exit_code_(exit_code) {}

SystemError::SystemError(const std::string& what, int err)
    : Error(what + ": " + std::strerror(err), exit_code::kFailure), errno_(err) {}

}  // namespace mgtrain
