// The orphan guard process: a POSIX shell loop reading process-group ids from a pipe (see orphan_guard.hpp).
#include "process/orphan_guard.hpp"

#include <unistd.h>

#include <cerrno>

#include "process/worker_process.hpp"
#include "util/error.hpp"

namespace mgtrain {
namespace {

// Ignores every signal a terminal, a job control shell or a dying pipe could send; keeps the watched groups as
// " G1 G2 ... " (a forgotten group is cut out of it); at end of file, SIGKILL to each group left. Builtins only
// (read, case, kill): nothing is started, so it works whatever PATH the launcher had, and with none.
constexpr const char* kGuardScript = R"SH(trap '' INT TERM HUP QUIT USR1 USR2 PIPE TSTP TTIN TTOU
groups=' '
while IFS= read -r line; do
  case $line in
    +*) groups="$groups${line#+} " ;;
    -*) id=${line#-}
        case $groups in *" $id "*) groups="${groups%%" $id "*} ${groups#*" $id "}" ;; esac ;;
  esac
done
for group in $groups; do kill -s KILL -- "-$group" 2>/dev/null; done
exit 0
)SH";

}  // namespace

OrphanGuard::OrphanGuard() {
  Pipe pipe = make_pipe();
  WorkerProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", kGuardScript, "mgtrain-orphan-guard"};
  spec.stdin_fd = pipe.read.get();
  spec.grouping = ProcessGrouping::kOwnGroup;     // no terminal's signal reaches it
  spec.die_with_parent = false;                   // it outlives the launcher: that is what it is for
  const WorkerProcess guard = start_child(spec);  // its stdout and stderr (unused) close with `guard`
  pipe.read.reset();
  guard_pid_ = guard.pid;
  pipe_write_ = std::move(pipe.write);
}

OrphanGuard::~OrphanGuard() {
  pipe_write_.reset();
  if (guard_pid_ > 0) reap(guard_pid_);
}

std::size_t OrphanGuard::message_line(bool watch, pid_t process_group, char (&line)[kMessageSize]) {
  char digits[kMessageSize];
  std::size_t count = 0;
  auto value = static_cast<unsigned long>(process_group);
  do {
    digits[count++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value > 0 && count < kMessageSize - 2);
  std::size_t length = 0;
  line[length++] = watch ? '+' : '-';
  while (count > 0) line[length++] = digits[--count];
  line[length++] = '\n';
  return length;
}

void OrphanGuard::forget(pid_t process_group) {
  char line[kMessageSize];
  const std::size_t length = message_line(false, process_group, line);
  ssize_t written;
  do {
    written = write(pipe_write_.get(), line, length);
  } while (written < 0 && errno == EINTR);
}

}  // namespace mgtrain
