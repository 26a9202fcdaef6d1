// Temp file + fsync + rename + directory fsync (see atomic_file.hpp).
#include "util/atomic_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

#include "util/error.hpp"

namespace mgtrain {
namespace {

// Largest single write() request: Linux transfers at most 0x7ffff000 bytes per call anyway.
constexpr std::size_t kMaxWriteChunk = std::size_t{1} << 30;

void fsync_or_throw(int fd, const std::string& path) {
  while (::fsync(fd) != 0) {
    if (errno != EINTR) throw SystemError(fmt::format("fsync {}", path), errno);
  }
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(std::string final_path, mode_t mode) : final_path_(std::move(final_path)) {
  const std::size_t slash = final_path_.rfind('/');
  const std::string name = slash == std::string::npos ? final_path_ : final_path_.substr(slash + 1);
  directory_ = slash == std::string::npos ? "." : slash == 0 ? "/" : final_path_.substr(0, slash);
  if (name.empty() || name == "." || name == "..") {
    throw Error(fmt::format("{}: not a file path (it names a directory)", final_path_));
  }
  temp_path_ = fmt::format("{}/.{}.tmp.{}", directory_, name, ::getpid());
  fd_.reset(::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  if (!fd_) throw SystemError(fmt::format("create {}", temp_path_), errno);
}

AtomicFileWriter::~AtomicFileWriter() {
  fd_.reset();
  if (!committed_) ::unlink(temp_path_.c_str());
}

void AtomicFileWriter::write(const void* data, std::size_t size) {
  if (!fd_) throw Error(fmt::format("write {}: the file is already committed", temp_path_));
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_.get(), p, size < kMaxWriteChunk ? size : kMaxWriteChunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw SystemError(fmt::format("write {}", temp_path_), errno);
    }
    // write() returning 0 for a non-zero request does not happen for regular files; treat it as full.
    if (n == 0) throw SystemError(fmt::format("write {}", temp_path_), ENOSPC);
    p += n;
    size -= static_cast<std::size_t>(n);
    bytes_written_ += static_cast<std::uint64_t>(n);
  }
}

void AtomicFileWriter::pwrite_at(std::uint64_t offset, const void* data, std::size_t size) {
  if (!fd_) throw Error(fmt::format("write {}: the file is already committed", temp_path_));
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::pwrite(fd_.get(), p, size < kMaxWriteChunk ? size : kMaxWriteChunk, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw SystemError(fmt::format("write {} at offset {}", temp_path_, offset), errno);
    }
    if (n == 0) throw SystemError(fmt::format("write {} at offset {}", temp_path_, offset), ENOSPC);
    p += n;
    size -= static_cast<std::size_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
}

void AtomicFileWriter::commit() {
  if (!fd_) throw Error(fmt::format("commit {}: already committed", final_path_));
  stage("before-fsync");
  fsync_or_throw(fd_.get(), temp_path_);
  // close() can report a deferred write error (NFS); after fsync it is the last word on the data.
  if (!fd_.close()) throw SystemError(fmt::format("close {}", temp_path_), errno);
  stage("before-rename");
  if (::rename(temp_path_.c_str(), final_path_.c_str()) != 0) {
    throw SystemError(fmt::format("rename {} to {}", temp_path_, final_path_), errno);
  }
  committed_ = true;
  stage("before-dir-fsync");
  const Fd dir_fd(::open(directory_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir_fd) throw SystemError(fmt::format("open directory {} to fsync it", directory_), errno);
  int err = 0;
  while (::fsync(dir_fd.get()) != 0) {
    if (errno == EINTR) continue;
    // EINVAL: this file system cannot sync directories (some FUSE ones); the rename is all it offers.
    if (errno != EINVAL) err = errno;
    break;
  }
  if (err != 0) throw SystemError(fmt::format("fsync directory {}", directory_), err);
}

void write_file_atomically(const std::string& path, std::string_view content) {
  AtomicFileWriter writer(path);
  writer.write(content.data(), content.size());
  writer.commit();
}

void ignore_file_size_signal() {
  struct sigaction action {};
  action.sa_handler = SIG_IGN;
  sigemptyset(&action.sa_mask);
  if (::sigaction(SIGXFSZ, &action, nullptr) != 0) throw SystemError("sigaction SIGXFSZ", errno);
}

}  // namespace mgtrain
