// libFuzzer target for the checkpoint reader (lib/checkpoint/checkpoint_header.cpp, checkpoint_file.cpp): any
// bytes, as a whole checkpoint file and as the header's JSON alone, are either a valid checkpoint or refused
// with CorruptCheckpoint naming the path — no crash, no other exception, no sanitizer report, no read outside
// the file. tests/fuzz/CMakeLists.txt builds it with clang++ -fsanitize=fuzzer,address,undefined; ctest runs a
// fixed number of inputs from checkpoint_corpus/.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "checkpoint/checkpoint_file.hpp"
#include "checkpoint/checkpoint_header.hpp"

namespace {

const std::string& scratch_path() {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    std::string pattern = std::string(dir && *dir ? dir : "/tmp") + "/mgtrain_checkpoint_fuzz_XXXXXX";
    int fd = mkstemp(pattern.data());
    if (fd < 0) std::abort();
    close(fd);
    std::atexit([] { unlink(scratch_path().c_str()); });
    return pattern;
  }();
  return path;
}

void write_all(const std::string& path, const std::uint8_t* data, std::size_t size) {
  int fd = open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) std::abort();
  while (size > 0) {
    ssize_t wrote = write(fd, data, size);
    if (wrote <= 0) std::abort();
    data += wrote;
    size -= static_cast<std::size_t>(wrote);
  }
  close(fd);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = scratch_path();
  try {
    auto parsed =
        mgtrain::checkpoint_header::parse("fuzz.header", std::string_view(reinterpret_cast<const char*>(data), size));
    for (const auto& tensor : parsed.tensors) {
      if (tensor.end < tensor.begin) __builtin_trap();
    }
  } catch (const mgtrain::CorruptCheckpoint& e) {
    if (std::string(e.what()).rfind("fuzz.header", 0) != 0) __builtin_trap();
  }
  write_all(path, data, size);
  try {
    mgtrain::CheckpointFile file = mgtrain::read_checkpoint_file(path);
    for (const auto& tensor : file.tensors()) {  // every byte the reader hands out lies inside the file
      if (tensor.offset > file.file_size() || tensor.nbytes > file.file_size() - tensor.offset) __builtin_trap();
      if (tensor.nbytes > 0) {
        volatile unsigned char sum = 0;
        for (std::uint64_t i = 0; i < tensor.nbytes; ++i) sum = sum + file.bytes(tensor)[i];
      }
    }
  } catch (const mgtrain::CorruptCheckpoint& e) {
    if (std::string(e.what()).rfind(path, 0) != 0) __builtin_trap();
  }
  return 0;
}
