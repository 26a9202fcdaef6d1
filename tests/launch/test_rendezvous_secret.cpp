// Where the rendezvous token comes from: --rdzv-token over MGTRAIN_RDZV_TOKEN over launch.rdzv_token_file; token
// files that others can read, that are not regular files or too large are refused; inside SLURM a token is derived
// from the job id and a per-user key made once (mode 0600) and shared by every task that reads the same key file.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <fstream>
#include <string>

#include "launch/rendezvous_secret.hpp"
#include "support/temp_dir.hpp"
#include "util/error.hpp"

using namespace mgtrain;
using mgtrain::testing::TempDir;

namespace {

const std::string kSecret = "0123456789abcdef0123456789abcdef";

std::string write_file(const std::string& path, const std::string& text, mode_t mode) {
  std::ofstream(path) << text;
  chmod(path.c_str(), mode);
  return path;
}

}  // namespace

TEST_CASE("the token: flag, then MGTRAIN_RDZV_TOKEN, then the token file, else none", "[launch][token]") {
  TempDir dir;
  LaunchConfig launch;
  CHECK_FALSE(rendezvous_token(launch, std::nullopt, {}, "").set());
  launch.rdzv_token_file = write_file(dir / "token", kSecret + "\n", 0600);
  rdzv::RendezvousToken from_file = rendezvous_token(launch, std::nullopt, {}, "");
  CHECK(from_file.secret == kSecret);
  CHECK(from_file.source == "launch.rdzv_token_file " + launch.rdzv_token_file);
  const EnvMap env = {{"MGTRAIN_RDZV_TOKEN", "an environment secret, long enough"}};
  CHECK(rendezvous_token(launch, std::nullopt, env, "").source == "MGTRAIN_RDZV_TOKEN");
  CHECK(rendezvous_token(launch, std::string("a flag secret that is long enough"), env, "").source == "--rdzv-token");
  CHECK_THROWS_WITH(rendezvous_token(launch, std::string("short"), env, ""),
                    Catch::Contains("--rdzv-token has 5 characters; at least 16") && Catch::Contains("openssl rand"));
}

TEST_CASE("token files that others can read, that are not regular files or too large are refused", "[launch][token]") {
  TempDir dir;
  LaunchConfig launch;
  launch.rdzv_token_file = write_file(dir / "open", kSecret, 0644);
  CHECK_THROWS_WITH(
      rendezvous_token(launch, std::nullopt, {}, ""),
      Catch::Contains("can be read or written by other users (mode 0644)") && Catch::Contains("chmod 600"));
  launch.rdzv_token_file = dir.path();
  CHECK_THROWS_WITH(rendezvous_token(launch, std::nullopt, {}, ""), Catch::Contains("is a directory"));
  launch.rdzv_token_file = write_file(dir / "big", std::string(5000, 'x'), 0600);
  CHECK_THROWS_WITH(rendezvous_token(launch, std::nullopt, {}, ""),
                    Catch::Contains("larger than the limit of 4096 bytes"));
  launch.rdzv_token_file = dir / "missing";
  CHECK_THROWS_WITH(rendezvous_token(launch, std::nullopt, {}, ""),
                    Catch::Contains("cannot read the launch.rdzv_token_file"));
  launch.rdzv_token_file = write_file(dir / "short", "abc\n", 0600);
  CHECK_THROWS_AS(rendezvous_token(launch, std::nullopt, {}, ""), UsageError);
}

TEST_CASE("inside SLURM the token is derived from the job id and a per-user key made once", "[launch][token][slurm]") {
  TempDir home;
  const EnvMap env = {{"HOME", home.path()}};
  LaunchConfig launch;
  rdzv::RendezvousToken first = rendezvous_token(launch, std::nullopt, env, "4242");
  const std::string key = home / ".config/mgtrain/rdzv.key";
  REQUIRE(first.set());
  CHECK_THAT(first.source, Catch::Contains("SLURM job 4242") && Catch::Contains(key));
  struct stat info {};
  REQUIRE(stat(key.c_str(), &info) == 0);
  CHECK((info.st_mode & 0777) == 0600);
  // Another task of the job (same key file) derives the same token; another job another one.
  CHECK(rendezvous_token(launch, std::nullopt, env, "4242").secret == first.secret);
  CHECK(rendezvous_token(launch, std::nullopt, env, "4243").secret != first.secret);
  CHECK(first.secret.find(kSecret) == std::string::npos);
  // A token given by the user wins over the derived one.
  CHECK(
      rendezvous_token(launch, std::nullopt, {{"HOME", home.path()}, {"MGTRAIN_RDZV_TOKEN", kSecret}}, "4242").source ==
      "MGTRAIN_RDZV_TOKEN");
  // XDG_CONFIG_HOME moves the key; a key others can read is refused.
  const EnvMap xdg = {{"HOME", home.path()}, {"XDG_CONFIG_HOME", home / "xdg"}};
  CHECK(rendezvous_token(launch, std::nullopt, xdg, "4242").secret != first.secret);
  chmod(key.c_str(), 0644);
  CHECK_THROWS_WITH(rendezvous_token(launch, std::nullopt, env, "4242"), Catch::Contains("chmod 600"));
}
