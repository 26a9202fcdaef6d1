// The status API's routes, token check, snapshot and command queue (see status_server.hpp); the HTTP
// itself is the dlopen'ed module of status_http.hpp.
#include "observe/status_server.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <mutex>

#include "contract/log_layout.hpp"
#include "observe/status_http.hpp"
#include "observe/status_page.hpp"
#include "observe/status_token.hpp"
#include "util/error.hpp"
#include "util/fd.hpp"
#include "util/file_io.hpp"
#include "util/json_text.hpp"
#include "util/time_format.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain {
namespace {

// The file's text, "" when it cannot be read (not written yet).
std::string file_text(const std::string& path) { return try_read_file(path).value_or(""); }

HttpAnswer json_answer(int status, const std::string& body) {
  HttpAnswer answer;
  answer.status = status;
  answer.content_type = "application/json";
  answer.body = body;
  answer.headers.emplace_back("Cache-Control", "no-store");
  return answer;
}

}  // namespace

struct StatusServer::State {
  Options options;
  std::unique_ptr<HttpServer> http;
  Fd event_fd;

  std::mutex mutex;  // guards snapshot and commands
  StatusSnapshot snapshot;
  std::vector<StatusCommand> commands;

  // The snapshot with each rank's heartbeat line read now (the files are the workers'; reading is safe here).
  StatusSnapshot current() {
    StatusSnapshot copy;
    {
      std::lock_guard<std::mutex> lock(mutex);
      copy = snapshot;
    }
    copy.time = unix_seconds_now();
    for (RankStatus& rank : copy.ranks) {
      if (!rank.heartbeat_file.empty()) rank.heartbeat = parse_heartbeat_line(file_text(rank.heartbeat_file));
    }
    return copy;
  }

  bool authorized(const HttpRequest& request) const {
    const std::string prefix = "Bearer ";
    return request.authorization.compare(0, prefix.size(), prefix) == 0 &&
           tokens_equal(options.token, std::string_view(request.authorization).substr(prefix.size()));
  }

  static HttpAnswer unauthorized() {
    HttpAnswer answer = json_answer(401,
                                    "{\"error\":\"missing or wrong bearer token: send 'Authorization: Bearer <token>' "
                                    "with the token from <run dir>/status_token\"}\n");
    answer.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"mgtrain\"");
    return answer;
  }

  HttpAnswer command(const HttpRequest& request, StatusCommand what, const char* name) {
    if (!authorized(request)) return unauthorized();
    {
      std::lock_guard<std::mutex> lock(mutex);
      commands.push_back(what);
    }
    const std::uint64_t one = 1;
    (void)!write(event_fd.get(), &one, sizeof one);
    return json_answer(202, std::string("{\"accepted\":\"") + name + "\"}\n");
  }

  // POST /stacks: the launcher's dump, on this thread (status_stacks.hpp; the dumper answers busy itself).
  HttpAnswer stacks(const HttpRequest& request) {
    if (!authorized(request)) return unauthorized();
    if (!options.dump_stacks) return json_answer(404, "{\"error\":\"this launcher does not dump stacks\"}\n");
    const StatusSnapshot now = current();
    StacksDump dump;
    try {
      dump = options.dump_stacks(now);
    } catch (const std::exception& error) {
      return json_answer(500, "{\"error\":" + json_string(error.what()) + "}\n");
    }
    HttpAnswer answer = json_answer(stacks_http_status(dump), stacks_to_json(dump, now.run_id) + "\n");
    if (dump.outcome == StacksOutcome::kBusy) answer.headers.emplace_back("Retry-After", "5");
    return answer;
  }

  HttpAnswer handle(const HttpRequest& request) {
    const std::string& path = request.path;
    if (request.method == "GET") {
      if (path == "/healthz") return HttpAnswer{200, "text/plain", "ok\n", {}};
      if (path == "/status") return json_answer(200, status_to_json(current()) + "\n");
      if (path == "/metrics") {
        return HttpAnswer{200, "text/plain; version=0.0.4; charset=utf-8", status_to_prometheus(current()), {}};
      }
      if (path == "/api/metrics") {
        return json_answer(200, metrics_curves_json(file_text(log_layout::metrics_jsonl(options.run_dir))) + "\n");
      }
      if (path == "/" || path == "/index.html") {
        return HttpAnswer{200, "text/html; charset=utf-8", status_page_html(), {{"Cache-Control", "no-store"}}};
      }
    } else if (request.method == "POST") {
      if (path == "/checkpoint") return command(request, StatusCommand::kCheckpoint, "checkpoint");
      if (path == "/stop") return command(request, StatusCommand::kStop, "stop");
      if (path == "/stacks") return stacks(request);
    }
    const bool known = path == "/healthz" || path == "/status" || path == "/metrics" || path == "/api/metrics" ||
                       path == "/" || path == "/checkpoint" || path == "/stop" || path == "/stacks";
    if (known) return json_answer(405, "{\"error\":\"method not allowed\"}\n");
    return json_answer(404, "{\"error\":\"no such page: try /, /status, /metrics, /healthz\"}\n");
  }
};

StatusServer::StatusServer(const Options& options) : state_(std::make_unique<State>()) {
  state_->options = options;
  const std::string where = options.bind + ":" + std::to_string(options.port);
  state_->http.reset(status_http_module().create_server());
  if (options.port <= 0 || !state_->http->bind(options.bind, options.port)) {
    throw UsageError("cannot serve the status API on " + where +
                     ": the port is in use or the address is not one of this machine's; choose another with "
                     "--status-port (launch.status_port) or --status-bind (launch.status_bind)");
  }
  state_->event_fd.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!state_->event_fd) throw SystemError("eventfd() for the status server", errno);
}

StatusServer::~StatusServer() {
  state_->http.reset();  // stops serving first: no handler runs after this
  state_->event_fd.reset();
}

void StatusServer::start() {
  state_->http->start([state = state_.get()](const HttpRequest& request) { return state->handle(request); });
}

void StatusServer::publish(const StatusSnapshot& snapshot) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->snapshot = snapshot;
}

int StatusServer::command_fd() const { return state_->event_fd.get(); }

std::vector<StatusCommand> StatusServer::take_commands() {
  std::uint64_t count = 0;
  (void)!read(state_->event_fd.get(), &count, sizeof count);
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::vector<StatusCommand> taken;
  taken.swap(state_->commands);
  return taken;
}

std::string StatusServer::endpoint() const { return state_->options.bind + ":" + std::to_string(state_->options.port); }

namespace {

// "host:port" split, a wildcard host asked on loopback; false with `error` when it is not host:port.
bool split_endpoint(const std::string& endpoint, std::string& host, int& port, std::string& error) {
  const std::size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos) {
    error = "'" + endpoint + "' is not host:port";
    return false;
  }
  host = endpoint.substr(0, colon);
  if (host == "0.0.0.0" || host.empty()) host = "127.0.0.1";
  port = static_cast<int>(parse_int(endpoint.substr(colon + 1)).value_or(0));
  return true;
}

}  // namespace

bool status_http_post(const std::string& endpoint, const std::string& path, const std::string& token, int timeout_s,
                      int& status, std::string& body, std::string& error) {
  std::string host;
  int port = 0;
  if (!split_endpoint(endpoint, host, port, error)) return false;
  std::string why;
  if (!status_http_module().post(host, port, path, "Bearer " + token, timeout_s, status, body, why)) {
    error = "no answer from " + endpoint + " (" + why + ")";
    return false;
  }
  return true;
}

std::optional<std::string> status_http_get(const std::string& endpoint, const std::string& path, std::string& error) {
  std::string host;
  int port = 0;
  if (!split_endpoint(endpoint, host, port, error)) return std::nullopt;
  int status = 0;
  std::string body, why;
  if (!status_http_module().get(host, port, path, status, body, why)) {
    error = "no answer from " + endpoint + " (" + why + ")";
    return std::nullopt;
  }
  if (status != 200) {
    error = endpoint + path + " answered HTTP " + std::to_string(status);
    return std::nullopt;
  }
  return body;
}

}  // namespace mgtrain
