// libmgtrain_status_http.so: the status API's HTTP server and client on cpp-httplib, loaded by the launcher
// with dlopen only when needed (see status_http.hpp). The only file that includes <httplib.h>.
#include <fcntl.h>

#include <httplib.h>

#include <chrono>
#include <thread>

#include "observe/status_http.hpp"

namespace mgtrain {
namespace {

class HttplibServer final : public HttpServer {
 public:
  HttplibServer() {
    // Two threads answer: enough for a dashboard and a scraper, and the launcher stays small.
    server_.new_task_queue = [] { return new httplib::ThreadPool(2); };
    server_.set_socket_options([](socket_t fd) {
      httplib::default_socket_options(fd);
      fcntl(fd, F_SETFD, FD_CLOEXEC);  // workers forked later must not hold the listening socket
    });
    server_.set_keep_alive_max_count(20);
  }

  ~HttplibServer() override {
    if (!thread_.joinable()) return;
    // stop() only acts once listening began: wait for that (bounded), then stop and join.
    for (int i = 0; i < 1000 && !server_.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    server_.stop();
    thread_.join();
  }

  bool bind(const std::string& host, int port) override { return server_.bind_to_port(host, port); }

  void start(HttpHandler handler) override {
    handler_ = std::move(handler);
    auto answer = [this](const httplib::Request& request, httplib::Response& response) {
      HttpAnswer a = handler_(HttpRequest{request.method, request.path, request.get_header_value("Authorization")});
      response.status = a.status;
      for (const auto& [name, value] : a.headers) response.set_header(name, value);
      response.set_content(a.body, a.content_type);
    };
    server_.Get(".*", answer);
    // With a content reader httplib hands POSTs over without reading a body first, so `curl -X POST` (no
    // Content-Length) works instead of getting 400; the API's POSTs take no body.
    server_.Post(".*", [answer](const httplib::Request& request, httplib::Response& response,
                                const httplib::ContentReader&) { answer(request, response); });
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }

 private:
  httplib::Server server_;
  HttpHandler handler_;
  std::thread thread_;
};

HttpServer* create_server() { return new HttplibServer(); }

// httplib's error in words for a person ("Connection" alone says little).
std::string error_text(httplib::Error error) {
  switch (error) {
    case httplib::Error::Connection:
      return "could not connect: refused or timed out";
    case httplib::Error::ConnectionTimeout:
      return "could not connect: timed out";
    case httplib::Error::Read:
    case httplib::Error::Write:
      return "the connection broke before an answer came";
    default:
      return httplib::to_string(error);
  }
}

// The answer of a request into the module's out-parameters; false (with `error`) when none came.
bool take_answer(const httplib::Result& result, int& status, std::string& body, std::string& error) {
  if (!result) {
    error = error_text(result.error());
    return false;
  }
  status = result->status;
  body = result->body;
  return true;
}

bool get(const std::string& host, int port, const std::string& path, int& status, std::string& body,
         std::string& error) {
  httplib::Client client(host, port);
  client.set_connection_timeout(2, 0);
  client.set_read_timeout(5, 0);
  return take_answer(client.Get(path), status, body, error);
}

bool post(const std::string& host, int port, const std::string& path, const std::string& authorization, int timeout_s,
          int& status, std::string& body, std::string& error) {
  httplib::Client client(host, port);
  client.set_connection_timeout(2, 0);
  client.set_read_timeout(timeout_s, 0);
  httplib::Headers headers;
  if (!authorization.empty()) headers.emplace("Authorization", authorization);
  return take_answer(client.Post(path, headers, "", "text/plain"), status, body, error);
}

const StatusHttpModule kModule{create_server, get, post};

}  // namespace
}  // namespace mgtrain

extern "C" __attribute__((visibility("default"))) const mgtrain::StatusHttpModule* mgtrain_status_http_module_v2() {
  return &mgtrain::kModule;
}
