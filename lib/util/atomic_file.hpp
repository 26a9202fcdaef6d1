// Writing a file so that readers (and a crash or SIGKILL at any instant) see either the old content under
// its final name or the complete new one, never a torn file: write a temporary file in the same directory,
// fsync it, rename it onto the final path, fsync the directory. Used for checkpoints and their pointer files.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "util/fd.hpp"

namespace mgtrain {

// One atomic write of `final_path`. The constructor creates `<dir>/.<name>.tmp.<pid>` (O_CREAT|O_EXCL, so a
// stale one from a killed writer with the same pid is an error, not overwritten silently; see
// remove_stale_temp_files in checkpoint/checkpoint_directory.hpp; it also means one writer per final path per process
// at a time). Without commit() the destructor removes it.
// Every failure throws SystemError naming the temporary (or final) path and strerror (ENOSPC, EFBIG, EROFS, ...).
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::string final_path, mode_t mode = 0644);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Appends all `size` bytes straight from `data` (no copy), looping on short writes and EINTR.
  void write(const void* data, std::size_t size);
  // Overwrites bytes already written, e.g. a header whose checksum is known only at the end.
  void pwrite_at(std::uint64_t offset, const void* data, std::size_t size);
  // fsync the file, rename it onto the final path, fsync the directory. After it the writer is done.
  void commit();

  // Called with "before-fsync", "before-rename" and "before-dir-fsync" at those points of commit(). Only for
  // tests: the checkpoint writer's one test seam (checkpoint/checkpoint_test_hook.hpp) pauses there; unset, commit()
  // calls nothing.
  void set_commit_stage_callback(std::function<void(std::string_view stage)> callback) {
    on_stage_ = std::move(callback);
  }

  const std::string& final_path() const { return final_path_; }
  const std::string& temp_path() const { return temp_path_; }
  std::uint64_t bytes_written() const { return bytes_written_; }  // by write(), i.e. the append position

 private:
  void stage(std::string_view name) {
    if (on_stage_) on_stage_(name);
  }

  std::string final_path_;
  std::string directory_;
  std::string temp_path_;
  Fd fd_;
  std::uint64_t bytes_written_ = 0;
  bool committed_ = false;
  std::function<void(std::string_view)> on_stage_;
};

// Atomically replaces `path` with `content` (small files: the checkpoint directory's `latest`/`best` pointers).
void write_file_atomically(const std::string& path, std::string_view content);

// Sets SIGXFSZ to SIG_IGN, so that exceeding RLIMIT_FSIZE makes write() fail with EFBIG ("File too large",
// reported with the path) instead of the signal's default action killing the process without a word.
// Processes that write checkpoints (the worker) call it once at start.
void ignore_file_size_signal();

}  // namespace mgtrain
