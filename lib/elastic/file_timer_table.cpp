// Parses file timer requests (nlohmann::json) and keeps the timer table.
#include "elastic/file_timer_table.hpp"

#include <limits>

#include <nlohmann/json.hpp>

namespace mgtrain {

std::optional<FileTimerRequest> parse_file_timer_request(std::string_view line, std::string& problem) {
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception&) {
    problem = "not JSON";
    return std::nullopt;
  }
  if (!root.is_object()) {
    problem = "not a JSON object";
    return std::nullopt;
  }
  auto version = root.find("version");
  if (version == root.end() || !version->is_number_integer() || version->get<long>() != 1) {
    problem = "\"version\" is not 1 (torch's FileTimerClient writes version 1)";
    return std::nullopt;
  }
  auto pid = root.find("pid");
  auto scope = root.find("scope_id");
  auto expiration = root.find("expiration_time");
  auto signal = root.find("signal");
  if (pid == root.end() || !pid->is_number_integer() || pid->get<long>() <= 0) {
    problem = "\"pid\" is not a positive integer";
    return std::nullopt;
  }
  if (scope == root.end() || !scope->is_string()) {
    problem = "\"scope_id\" is not a string";
    return std::nullopt;
  }
  if (expiration == root.end() || !expiration->is_number()) {
    problem = "\"expiration_time\" is not a number";
    return std::nullopt;
  }
  if (signal == root.end() || !signal->is_number_integer() || signal->get<long>() < 0 || signal->get<long>() > 64) {
    problem = "\"signal\" is not a signal number";
    return std::nullopt;
  }
  FileTimerRequest request;
  request.pid = pid->get<long>();
  request.scope_id = scope->get<std::string>();
  request.expiration_time = expiration->get<double>();
  request.signal = signal->get<int>();
  return request;
}

std::vector<std::string> FileTimerTable::feed(std::string_view bytes) {
  std::vector<std::string> problems;
  partial_line_.append(bytes);
  std::size_t start = 0;
  for (std::size_t end = partial_line_.find('\n'); end != std::string::npos; end = partial_line_.find('\n', start)) {
    std::string_view line(partial_line_.data() + start, end - start);
    start = end + 1;
    ++lines_seen_;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    std::string problem;
    if (std::optional<FileTimerRequest> request = parse_file_timer_request(line, problem)) {
      apply(*request);
    } else {
      problems.push_back("line " + std::to_string(lines_seen_) + " of the timer pipe: " + problem + ": " +
                         std::string(line.substr(0, 200)));
    }
  }
  partial_line_.erase(0, start);
  // torch's client refuses requests longer than PIPE_BUF; a longer unterminated line is garbage.
  if (partial_line_.size() > 65536) {
    problems.push_back("the timer pipe sent more than 64 KiB without a newline; dropped");
    partial_line_.clear();
  }
  return problems;
}

void FileTimerTable::apply(const FileTimerRequest& request) {
  auto key = std::make_pair(request.pid, request.scope_id);
  if (request.expiration_time < 0) {
    timers_.erase(key);  // release
  } else {
    timers_[key] = request;
  }
}

std::optional<double> FileTimerTable::next_expiration() const {
  if (timers_.empty()) return std::nullopt;
  double earliest = std::numeric_limits<double>::infinity();
  for (const auto& [key, request] : timers_) earliest = std::min(earliest, request.expiration_time);
  return earliest;
}

std::vector<ExpiredFileTimer> FileTimerTable::take_expired(double now) {
  std::map<long, ExpiredFileTimer> by_pid;
  for (const auto& [key, request] : timers_) {
    if (request.expiration_time > now) continue;
    auto found = by_pid.find(request.pid);
    if (found == by_pid.end() || request.expiration_time < found->second.expiration_time) {
      by_pid[request.pid] = ExpiredFileTimer{request.pid, request.scope_id, request.expiration_time, request.signal};
    }
  }
  std::vector<ExpiredFileTimer> expired;
  for (const auto& [pid, timer] : by_pid) {
    forget_pid(pid);
    expired.push_back(timer);
  }
  return expired;
}

void FileTimerTable::forget_pid(long pid) {
  for (auto it = timers_.begin(); it != timers_.end();) {
    it = it->first.first == pid ? timers_.erase(it) : std::next(it);
  }
}

}  // namespace mgtrain
