// A node's stack dumps, a hang's and on request, on the event loop (see rank_diagnostics.hpp).
#include "launch/rank_diagnostics.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>

#include "diagnose/process_facts.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "util/time_format.hpp"
#include "util/timespec.hpp"

namespace mgtrain {

namespace {
// How much longer than its own deadline POST /stacks waits for the loop's answer (a loop turn, writing the files).
constexpr double kAnswerMarginS = 10.0;
// How often a job-wide request looks for the nodes' answers.
constexpr auto kJobPoll = std::chrono::milliseconds(50);

StacksDump busy_dump() {
  StacksDump busy;
  busy.outcome = StacksOutcome::kBusy;
  busy.message =
      "the ranks' stacks are being dumped now (a hang's diagnostics or another request); ask again when that is done";
  return busy;
}

StacksDump not_running(const std::string& why) {
  StacksDump dump;
  dump.outcome = StacksOutcome::kNotRunning;
  dump.message = why;
  return dump;
}
}  // namespace

RankDiagnostics::RankDiagnostics(diagnose::DumpOptions options)
    : options_(std::move(options)), wake_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (!wake_) throw SystemError("eventfd() for the stack dumps on request", errno);
}

RankDiagnostics::~RankDiagnostics() { close_requests(); }

void RankDiagnostics::collect_diagnostics(int attempt, const std::vector<Target>& ranks,
                                          std::chrono::steady_clock::time_point deadline) {
  attempt_ = attempt;
  HangCollection collection{{}, deadline};
  for (const Target& target : ranks) {
    diagnose::RankProcess process;
    process.rank = target.global_rank;
    process.pid = target.pid;
    process.kind = diagnose::guess_program_kind(target.pid);
    process.rank_directory = target.rank_directory;
    process.python_hook_armed = process.kind == diagnose::ProgramKind::python;  // worker_env gave it the hook
    collection.ranks.push_back(std::move(process));
  }
  attempt_directory_ =
      ranks.empty() ? std::string() : std::filesystem::path(ranks.front().rank_directory).parent_path().string();
  hang_finished_ = false;
  reported_ = false;
  if (run_) {
    hang_waiting_ = std::move(collection);  // an on-demand dump ends first
  } else {
    start_hang(collection);
  }
}

void RankDiagnostics::start_hang(const HangCollection& collection) {
  hang_finished_ = false;
  run_ = std::make_unique<diagnose::RankDiagnosisRun>(collection.ranks, attempt_directory_, collection.deadline,
                                                      /*flight_recorder=*/true, /*stacks_number=*/0, options_);
}

bool RankDiagnostics::done() {
  if (!hang_finished_) return false;
  if (!std::exchange(reported_, true)) {
    for (const std::string& line : diagnosis_summary(last_, attempt_directory_)) log::info("{}", line);
  }
  return true;
}

std::vector<std::string> RankDiagnostics::top_frames_of(int attempt, int global_rank) const {
  if (!hang_finished_ || attempt != attempt_) return {};
  for (const diagnose::RankDiagnosis& rank : last_.ranks) {
    if (rank.rank == global_rank) return rank.dump.top_frames;
  }
  return {};
}

StacksDump RankDiagnostics::request_stacks(const StatusSnapshot& snapshot, double timeout_s) {
  auto request = std::make_shared<Request>();
  request->snapshot = snapshot;
  request->timeout_s = timeout_s;
  std::unique_lock<std::mutex> lock(mutex_);
  if (closed_) return not_running("run " + snapshot.run_id + " has ended: nothing to dump");
  waiting_.push_back(request);
  const std::uint64_t one = 1;
  (void)!write(wake_.get(), &one, sizeof one);
  const bool got = answered_.wait_for(lock, std::chrono::duration<double>(timeout_s + kAnswerMarginS),
                                      [&] { return request->answer.has_value(); });
  if (got) return *request->answer;
  StacksDump late;
  late.outcome = StacksOutcome::kBusy;
  late.message = "the launcher did not answer within " + format_seconds(timeout_s + kAnswerMarginS);
  return late;
}

void RankDiagnostics::answer(Request& request, StacksDump dump) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    request.answer = std::move(dump);
  }
  answered_.notify_all();
}

void RankDiagnostics::close_requests() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    for (const auto& request : waiting_) {
      request->answer = not_running("run " + request->snapshot.run_id + " ended before the dump");
    }
    waiting_.clear();
    if (on_demand_ && !on_demand_->answer) {
      on_demand_->answer = not_running("run " + on_demand_->snapshot.run_id + " ended before the dump completed");
    }
    if (job_request_ && !job_request_->answer) {
      job_request_->answer = not_running("run " + job_request_->snapshot.run_id + " ended before every node answered");
    }
  }
  for_job_ = nullptr;  // its node agent is gone with the loop
  answered_.notify_all();
}

void RankDiagnostics::take_requests(LoopTime now) {
  std::uint64_t count = 0;
  (void)!read(wake_.get(), &count, sizeof count);
  std::vector<std::shared_ptr<Request>> requests;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    requests.swap(waiting_);
  }
  for (const auto& request : requests) {
    if (request->snapshot.job_wide && job_source_.start) {  // every node dumps its own (dump_for_job)
      if (job_request_) {
        answer(*request, busy_dump());
      } else if (std::optional<StacksDump> refused = job_source_.start(request->timeout_s)) {
        answer(*request, std::move(*refused));
      } else {
        job_request_ = request;
        job_poll_ = now + kJobPoll;
      }
      continue;
    }
    if (busy()) {
      answer(*request, busy_dump());
      continue;
    }
    StacksRequest plan = plan_stacks_request(request->snapshot);
    if (plan.answer.outcome == StacksOutcome::kNotRunning) {
      answer(*request, std::move(plan.answer));
      continue;
    }
    on_demand_ = request;
    start_on_demand(std::move(plan), request->timeout_s, now);
  }
}

void RankDiagnostics::dump_for_job(const StatusSnapshot& snapshot, double timeout_s,
                                   std::function<void(StacksDump)> done) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) return;
  }
  if (busy()) return done(busy_dump());
  StacksRequest plan = plan_stacks_request(snapshot);
  if (plan.answer.outcome == StacksOutcome::kNotRunning) return done(std::move(plan.answer));
  for_job_ = std::move(done);
  start_on_demand(std::move(plan), timeout_s, std::chrono::steady_clock::now());
}

void RankDiagnostics::start_on_demand(StacksRequest plan, double timeout_s, LoopTime now) {
  run_ =
      std::make_unique<diagnose::RankDiagnosisRun>(plan.ranks, plan.attempt_directory, now + steady_seconds(timeout_s),
                                                   /*flight_recorder=*/false, plan.stacks_number, options_);
  on_demand_plan_ = std::move(plan);
  if (run_->done()) run_ended(now);
}

void RankDiagnostics::run_ended(LoopTime now) {
  const std::unique_ptr<diagnose::RankDiagnosisRun> run = std::move(run_);
  if (on_demand_) {
    answer(*on_demand_, answer_stacks_request(std::move(on_demand_plan_), run->result()));
    on_demand_.reset();
  } else if (for_job_) {
    std::exchange(for_job_, nullptr)(answer_stacks_request(std::move(on_demand_plan_), run->result()));
  } else {  // the hang's
    last_ = run->result();
    hang_finished_ = true;
  }
  if (!hang_waiting_) return;
  HangCollection collection = std::move(*hang_waiting_);
  hang_waiting_.reset();
  if (now < collection.deadline) return start_hang(collection);
  last_ = diagnose::NodeDiagnosis{};
  last_.ranks.push_back(diagnose::RankDiagnosis{-1, diagnose::DumpResult{}, {}});
  last_.ranks.back().dump.notes.push_back(
      "the stacks could not be collected: an on-demand dump (POST /stacks) held the ranks until the deadline");
  hang_finished_ = true;
}

void RankDiagnostics::add_fds(std::vector<pollfd>& fds) {
  fds.push_back(pollfd{wake_.get(), POLLIN, 0});
  if (run_) run_->add_fds(fds);
}

void RankDiagnostics::on_ready(const pollfd& ready, LoopTime now) {
  if (ready.fd == wake_.get()) return take_requests(now);
  if (run_) run_->on_ready(ready, now);
}

std::optional<LoopTime> RankDiagnostics::next_deadline() const {
  std::optional<LoopTime> next = run_ ? run_->next_deadline() : std::nullopt;
  if (job_request_ && (!next || job_poll_ < *next)) next = job_poll_;
  return next;
}

void RankDiagnostics::on_time(LoopTime now) {
  if (job_request_ && now >= job_poll_) {
    if (std::optional<StacksDump> whole = job_source_.take()) {
      answer(*job_request_, std::move(*whole));
      job_request_.reset();
    } else {
      job_poll_ = now + kJobPoll;
    }
  }
  if (!run_) return;
  run_->on_time(now);
  if (run_->done()) run_ended(now);
}

std::vector<std::string> diagnosis_summary(const diagnose::NodeDiagnosis& diagnosis, const std::string& attempt_dir) {
  std::vector<std::string> lines;
  std::size_t written = 0;
  for (const diagnose::RankDiagnosis& rank : diagnosis.ranks) {
    if (!rank.dump.output_path.empty() && rank.rank >= 0) ++written;
  }
  lines.push_back("stacks of " + std::to_string(written) + " rank" + (written == 1 ? "" : "s") + " in " + attempt_dir +
                  "/rank_*/stacks.txt (" + format_seconds(diagnosis.seconds) + ")");
  for (const diagnose::RankDiagnosis& rank : diagnosis.ranks) {
    for (const std::string& note : rank.dump.notes) lines.push_back(note);
  }
  if (!diagnosis.flight_recorder_folder.empty()) {
    lines.push_back("NCCL flight recorder dumps of " + std::to_string(diagnosis.flight_recorder_gathered.size()) +
                    " rank(s) in " + diagnosis.flight_recorder_folder + " (read them with torchfrtrace)");
  }
  return lines;
}

}  // namespace mgtrain
