// The workers' store port of each attempt, and its retries (see store_ports.hpp).
#include "supervise/store_ports.hpp"

#include "contract/log_layout.hpp"
#include "output/file_tail.hpp"
#include "supervise/failure_report.hpp"
#include "util/timespec.hpp"

namespace mgtrain {

StorePorts::StorePorts(const LaunchPlan& plan, PortProbe& ports, int first_port, const SupervisionPolicy& policy,
                       ConsoleWriter& console)
    : plan_(plan), ports_(ports), first_port_(first_port), policy_(policy), console_(console) {}

StorePorts::AttemptPort StorePorts::begin_attempt(int attempt, bool coordinated) {
  AttemptPort result;
  result.port = coordinated    ? plan_.master_port
                : attempt == 0 ? first_port_
                               : (plan_.picks_port() ? ports_.pick_free_port() : plan_.master_port);
  port_by_attempt_.resize(static_cast<std::size_t>(attempt) + 1);
  port_by_attempt_[attempt] = result.port;
  if (!coordinated && attempt > 0 && policy_.record().port_retries() > retries_announced_) {
    retries_announced_ = policy_.record().port_retries();
    result.retry = true;
    console_.message(log::Level::Warning,
                     "rank 0 could not start the workers' store: port {} was already in use (taken by another "
                     "program after the launcher picked it); starting the workers again on port {} (port retry {} of "
                     "{}, not counted as a restart); the failed try's logs are in {}",
                     port_by_attempt_.at(attempt - 1), result.port, policy_.record().port_retries(), kMaxPortRetries,
                     log_layout::attempt_dir(plan_.run_dir, attempt - 1));
  }
  return result;
}

bool StorePorts::store_port_taken(const WorkerFailure& root,
                                  std::chrono::steady_clock::time_point attempt_started) const {
  if (!plan_.picks_port() || root.hung || plan_.global_rank(root.local_rank) != 0) return false;
  if (root.attempt != policy_.record().attempt() || root.time - attempt_started > steady_seconds(kStoreStartWindowS)) {
    return false;
  }
  const std::string rank_directory = log_layout::rank_dir(plan_.run_dir, root.attempt, 0);
  return says_address_in_use(read_last_lines(log_layout::stderr_log(rank_directory), kStderrTailLines));
}

std::string StorePorts::hint(int attempt) const {
  const std::string port = std::to_string(port_by_attempt_.at(attempt));
  if (!plan_.picks_port()) {
    return "port " + port +
           " (launch.master_port: given, not picked by mgtrain) was probably in use when rank 0 started the " +
           "workers' store: free it, choose another with --master-port, or --master-port 0 to let mgtrain pick one " +
           "(and pick again when another program takes it)";
  }
  if (policy_.record().port_retries() < kMaxPortRetries)
    return "";  // not the store's start, as far as the supervisor saw
  return "the ports mgtrain picked were taken " + std::to_string(kMaxPortRetries + 1) +
         " times before rank 0 started the workers' store (last: port " + port +
         "): another program on this machine takes ports quickly; give a port reserved for this job with "
         "--master-port";
}

}  // namespace mgtrain
