// Records SIGTERM/SIGUSR1 (stop) and SIGUSR2 (save now) for the training loop (see stop_request.hpp).
#include "train/loop/stop_request.hpp"

#include <csignal>

namespace mgtrain {
namespace {

volatile std::sig_atomic_t g_requested = 0;
bool g_stop_agreed = false;
struct sigaction g_previous_term {
}, g_previous_usr1{};

void record(int signal) { g_requested = signal; }

volatile std::sig_atomic_t g_save_requested = 0;
void record_save_request(int) { g_save_requested = 1; }

// An action that runs `handler` (or SIG_IGN) with SA_RESTART: blocking calls go on; the loop looks at the flags
// between steps.
struct sigaction action_for(void (*handler)(int)) {
  struct sigaction action {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  return action;
}

}  // namespace

StopRequestHandler::StopRequestHandler() {
  const struct sigaction action = action_for(record);
  sigaction(SIGTERM, &action, &g_previous_term);
  sigaction(SIGUSR1, &action, &g_previous_usr1);
}

StopRequestHandler::~StopRequestHandler() {
  if (g_stop_agreed) return;  // stop_agreed() set SIG_IGN: keep it until the process exits
  sigaction(SIGTERM, &g_previous_term, nullptr);
  sigaction(SIGUSR1, &g_previous_usr1, nullptr);
}

int StopRequestHandler::requested() { return g_requested; }

void StopRequestHandler::stop_agreed() {
  g_stop_agreed = true;
  const struct sigaction ignore = action_for(SIG_IGN);
  sigaction(SIGTERM, &ignore, nullptr);
  sigaction(SIGUSR1, &ignore, nullptr);
}

void StopRequestHandler::record_early_warning() {
  const struct sigaction action = action_for(record);
  sigaction(SIGUSR1, &action, nullptr);
}

void StopRequestHandler::release_early_warning() {
  std::signal(SIGUSR1, SIG_DFL);
  if (g_requested == SIGUSR1) std::raise(SIGUSR1);
}

void SaveRequest::install() {
  const struct sigaction action = action_for(record_save_request);
  sigaction(SIGUSR2, &action, nullptr);
}

bool SaveRequest::pending() { return g_save_requested != 0; }

void SaveRequest::clear() { g_save_requested = 0; }

}  // namespace mgtrain
