// torchrun's --duplicate-*-filters: the comma list (",," a literal comma), substring matching, the shared filtered
// file with the console prefix, and a worker stream's matching lines copied there (stream_capture.hpp).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "output/duplicate_filter.hpp"
#include "output/stream_capture.hpp"
#include "support/temp_dir.hpp"
#include "util/error.hpp"
#include "util/fd.hpp"

using namespace mgtrain;
using mgtrain::testing::TempDir;

namespace {
std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}
using List = std::vector<std::string>;
}  // namespace

TEST_CASE("filters are torchrun's comma list: ',,' is a literal comma, an empty item stays", "[filters]") {
  CHECK(parse_duplicate_filters("apple,orange") == List{"apple", "orange"});
  CHECK(parse_duplicate_filters("a,,b") == List{"a,b"});
  CHECK(parse_duplicate_filters("a,,,b") == List{"a,", "b"});  // Python's replace(",,") goes left to right
  CHECK(parse_duplicate_filters("") == List{""});              // torchrun: [""], which every line contains
  CHECK(parse_duplicate_filters("zzz,") == List{"zzz", ""});
  CHECK(parse_duplicate_filters(" x ") == List{" x "});  // no trimming
}

TEST_CASE("the filtered file gets the matching lines behind their prefix, each line ended", "[filters]") {
  TempDir dir;
  const std::string path = dir.path() + "/filtered_stdout.log";
  {
    std::ofstream old(path);
    old << "from an earlier run\n";
  }
  FilteredLog log(path, {"apple", "pear"});
  log.add_lines("an apple\nplum\npear and apple\n", "[default0]:");
  log.add_lines("no newline apple", "[default1]:");
  log.add_lines("", "[default1]:");
  CHECK(read_all(path) == "[default0]:an apple\n[default0]:pear and apple\n[default1]:no newline apple\n");
  CHECK_THROWS_AS(FilteredLog(dir.path() + "/missing/f.log", {"x"}), SystemError);
}

TEST_CASE("a worker stream copies its matching log lines to the filtered file, and only with one", "[filters]") {
  TempDir dir;
  const std::string filtered_path = dir.path() + "/filtered_stdout.log";
  auto filtered = std::make_shared<FilteredLog>(filtered_path, List{"loss"});
  Pipe console_out = make_pipe();
  ConsoleWriter console(console_out.write.get(), console_out.write.get());
  Pipe worker = make_pipe();
  Pipe plain = make_pipe();
  fcntl(worker.read.get(), F_SETFL, O_NONBLOCK);
  fcntl(plain.read.get(), F_SETFL, O_NONBLOCK);
  StreamCaptureSettings settings{dir.path() + "/stdout.log", false, true, "[rank 1] ", false, filtered};
  StreamCapture capture(std::move(worker.read), settings);
  settings.log_path = dir.path() + "/plain.log";
  settings.duplicate = nullptr;
  StreamCapture other(std::move(plain.read), settings);
  const std::string text = "step 1 loss 0.5\nstep 1 acc\rstep 1 loss 0.4\nno match\npartial loss";
  REQUIRE(write_fully(worker.write.get(), text).empty());
  REQUIRE(write_fully(plain.write.get(), text).empty());
  worker.write.reset();
  plain.write.reset();
  while (capture.open()) capture.read_available(console);
  while (other.open()) other.read_available(console);
  // The log file's final lines ('\r' collapses a line to its last state); the copies carry the console prefix.
  CHECK(read_all(dir.path() + "/stdout.log") == "step 1 loss 0.5\nstep 1 loss 0.4\nno match\npartial loss");
  CHECK(read_all(filtered_path) == "[rank 1] step 1 loss 0.5\n[rank 1] step 1 loss 0.4\n[rank 1] partial loss\n");
  CHECK(read_all(dir.path() + "/plain.log") == read_all(dir.path() + "/stdout.log"));
}

TEST_CASE("universal newlines: '\\r' and \"\\r\\n\" end a console line, as torchrun's tee reads its file",
          "[filters][console]") {
  TempDir dir;
  Pipe console_out = make_pipe();
  fcntl(console_out.read.get(), F_SETFL, O_NONBLOCK);
  ConsoleWriter console(console_out.write.get(), console_out.write.get());
  StreamCaptureSettings settings{dir.path() + "/stdout.log", false, true, "[default0]:", false, nullptr};
  settings.universal_newlines = true;
  Pipe worker = make_pipe();
  fcntl(worker.read.get(), F_SETFL, O_NONBLOCK);
  StreamCapture capture(std::move(worker.read), settings);
  // "\r" at the end of one read and "\n" at the start of the next are still one line end.
  for (const std::string chunk : {"a\rb\n", "crlf\r", "\nend"}) {
    REQUIRE(write_fully(worker.write.get(), chunk).empty());
    capture.read_available(console);
  }
  worker.write.reset();
  while (capture.open()) capture.read_available(console);
  console.flush();
  char buffer[4096];
  const ssize_t got = read(console_out.read.get(), buffer, sizeof buffer);
  REQUIRE(got > 0);
  CHECK(std::string(buffer, static_cast<std::size_t>(got)) ==
        "[default0]:a\n[default0]:b\n[default0]:crlf\n[default0]:end\n");
  CHECK(read_all(dir.path() + "/stdout.log") == "b\ncrlf\nend");  // the log file keeps the final states
}
