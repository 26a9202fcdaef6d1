// The status API's on-demand stack dump (POST /stacks, `mgtrain status --stacks`;
// docs/diagnosis.md): every rank that runs now, dumped without stopping it into its own folder of the
// current attempt as stacks-K.txt (K = 1, 2, ... per attempt: earlier dumps are kept, and stacks.txt stays the hang
// report's), by a deadline, with each rank's top frames and notes. What to dump and the answer made of the dump, pure
// but for the files they look at; the dump itself runs on the event loop in the node's one dumping room
// (rank_diagnostics.hpp), so it and a hang's collection never dump at once.
#pragma once

#include <string>
#include <vector>

#include "diagnose/rank_diagnosis.hpp"
#include "multinode/stacks_across_nodes.hpp"
#include "observe/status_stacks.hpp"

namespace mgtrain {

// The first number K >= 1 for which no rank folder of `rank_directories` has stacks-K.txt.
int next_stacks_number(const std::vector<std::string>& rank_directories);

// A dump on demand of the ranks a snapshot shows running.
struct StacksRequest {
  // kNotRunning (final: nothing to dump), or kDumped with one entry per running rank; a rank whose pid is no longer
  // this launcher's child (it ended since the snapshot) has a note there instead of a dump.
  StacksDump answer;
  std::vector<diagnose::RankProcess> ranks;  // the ranks to dump
  std::vector<std::size_t> entries;          // each one's index into answer.ranks
  std::string attempt_directory;
  int stacks_number = 0;  // stacks-K.txt
};

// What POST /stacks dumps for `snapshot` (its phase must be "running", else kNotRunning).
StacksRequest plan_stacks_request(const StatusSnapshot& snapshot);
// The answer: the request's entries filled from the dump's results.
StacksDump answer_stacks_request(StacksRequest request, const diagnose::NodeDiagnosis& diagnosis);

// Several nodes (multinode/stacks_across_nodes.hpp): a node's dump as its answer to the job's host; the host's
// answer made of every node's (each rank with its node and host, the nodes that did not dump in the notes); and a
// request the host could not start.
rdzv::NodeStacks node_stacks_of(const StacksDump& dump);
StacksDump job_stacks_dump(const rdzv::JobStacks& job);
StacksDump job_stacks_refusal(const rdzv::StacksRefusal& refusal);

}  // namespace mgtrain
