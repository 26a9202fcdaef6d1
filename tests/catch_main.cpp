// Catch2's main(), compiled once for every test binary.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <vector>

extern char** environ;

int main(int argc, char* argv[]) {
  // The suite may itself run inside a SLURM job (a CI runner): no launcher under test may detect that job,
  // let alone requeue it. Tests about SLURM set the variables they need themselves.
  std::vector<std::string> slurm_variables;
  for (char** entry = environ; *entry; ++entry) {
    const std::string text = *entry;
    if (text.rfind("SLURM_", 0) == 0) slurm_variables.push_back(text.substr(0, text.find('=')));
  }
  for (const auto& name : slurm_variables) unsetenv(name.c_str());
  return Catch::Session().run(argc, argv);
}
