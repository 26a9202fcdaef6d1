// Records SIGTERM/SIGUSR1 for the training loop (see stop_request.hpp).
#include "train/stop_request.hpp"

#include <csignal>

namespace mgtrain {
namespace {

volatile std::sig_atomic_t g_requested = 0;
struct sigaction g_previous_term {}, g_previous_usr1 {};

void record(int signal) { g_requested = signal; }

}  // namespace

StopRequestHandler::StopRequestHandler() {
  struct sigaction action {};
  action.sa_handler = record;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // blocking calls go on; the loop looks at the flag between steps
  sigaction(SIGTERM, &action, &g_previous_term);
  sigaction(SIGUSR1, &action, &g_previous_usr1);
}

StopRequestHandler::~StopRequestHandler() {
  sigaction(SIGTERM, &g_previous_term, nullptr);
  sigaction(SIGUSR1, &g_previous_usr1, nullptr);
}

int StopRequestHandler::requested() { return g_requested; }

}  // namespace mgtrain
