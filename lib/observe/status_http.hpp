// The seam between the status API and its HTTP library. cpp-httplib (Debian's libcpp-httplib.so pulls in
// OpenSSL and brotli) lives in a module, libmgtrain_status_http.so (status_http_httplib.cpp), that the
// launcher dlopens only when a status server or `mgtrain status` needs it: linked into `mgtrain` it cost
// every start ~5 ms and ~4 MB, --version included. Both sides are built together (same compiler and
// standard library), so the interface is plain C++.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace mgtrain {

struct HttpRequest {
  std::string method;         // "GET", "POST", ...
  std::string path;           // without the query string
  std::string authorization;  // the Authorization header ("" when absent)
};

struct HttpAnswer {
  int status = 200;
  std::string content_type = "text/plain";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

using HttpHandler = std::function<HttpAnswer(const HttpRequest&)>;

// An HTTP server answering every request through one handler, from threads of its own.
class HttpServer {
 public:
  virtual ~HttpServer() = default;  // stops serving and joins its threads
  // Binds (SO_REUSEADDR, close-on-exec); false when the address or port cannot be had.
  virtual bool bind(const std::string& host, int port) = 0;
  virtual void start(HttpHandler handler) = 0;  // after bind
};

// What the module exports (mgtrain_status_http_module_v2).
struct StatusHttpModule {
  HttpServer* (*create_server)();
  // GET http://host:port/path: true with the status and body of any answer, false with `error` when none came.
  bool (*get)(const std::string& host, int port, const std::string& path, int& status, std::string& body,
              std::string& error);
  // POST http://host:port/path without a body, with "Authorization: <authorization>" unless it is "", waiting up to
  // `timeout_s` for the answer (a dump of stacks takes seconds): as get.
  bool (*post)(const std::string& host, int port, const std::string& path, const std::string& authorization,
               int timeout_s, int& status, std::string& body, std::string& error);
};

// The module, loaded once: next to the running executable (build tree), else in ../lib/mgtrain (installed).
// Throws Error naming the paths tried and dlopen's reason.
const StatusHttpModule& status_http_module();

}  // namespace mgtrain

extern "C" const mgtrain::StatusHttpModule* mgtrain_status_http_module_v2();
