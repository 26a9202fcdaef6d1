// The launcher's status API over HTTP (docs/monitoring.md): GET /healthz, /status (JSON), /metrics
// (Prometheus), /api/metrics (rank 0's loss curves), / (the dashboard page); POST /checkpoint, POST /stop and
// POST /stacks with the run's bearer token. Served by cpp-httplib (the dlopen'ed module of status_http.hpp)
// from its own threads; the supervisor loop stays the only owner of worker state: it publishes snapshots
// here, and the POST commands wait in a queue whose eventfd the loop polls. POST /stacks waits for its answer: the
// launcher's dumper (status_stacks.hpp) hands the ranks of the last snapshot to the loop, which dumps them and
// answers (busy at once while another dump runs).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "observe/status_snapshot.hpp"
#include "observe/status_stacks.hpp"

namespace mgtrain {

enum class StatusCommand { kCheckpoint, kStop };

class StatusServer {
 public:
  struct Options {
    std::string bind = "127.0.0.1";
    int port = 0;
    std::string token;         // POST requests must carry "Authorization: Bearer <token>"
    std::string run_dir;       // where metrics.jsonl is read from
    StacksDumper dump_stacks;  // POST /stacks; empty: answered 404
  };
  // Binds the port now: UsageError naming the address and port when it cannot (busy, bad address);
  // Error when the HTTP module cannot be loaded.
  explicit StatusServer(const Options& options);
  ~StatusServer();  // stops serving and joins its thread
  StatusServer(const StatusServer&) = delete;
  StatusServer& operator=(const StatusServer&) = delete;

  // Starts answering, from a thread of its own. Call after the supervisor blocked its signals (the
  // threads inherit the mask, so signals keep going to the loop's signalfd).
  void start();
  void publish(const StatusSnapshot& snapshot);
  // Readable while commands wait; take_commands() empties the queue.
  int command_fd() const;
  std::vector<StatusCommand> take_commands();
  std::string endpoint() const;  // "host:port"

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// An HTTP GET on a status server ("host:port"): the body of a 200 answer, or nullopt with `error` set
// (connection refused, timeout, other status). Used by `mgtrain status`.
std::optional<std::string> status_http_get(const std::string& endpoint, const std::string& path, std::string& error);

// An HTTP POST (no body) on a status server with "Authorization: Bearer <token>", waiting up to `timeout_s`: true
// with the status and body of any answer, false with `error` set when none came (refused, timeout).
// Used by `mgtrain status --stacks`.
bool status_http_post(const std::string& endpoint, const std::string& path, const std::string& token, int timeout_s,
                      int& status, std::string& body, std::string& error);

}  // namespace mgtrain
