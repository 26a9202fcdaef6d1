// The on-demand stack dump's JSON answer (see status_stacks.hpp).
#include "observe/status_stacks.hpp"

#include <nlohmann/json.hpp>

#include "util/json_text.hpp"

namespace mgtrain {

std::string stacks_to_json(const StacksDump& dump, const std::string& run_id) {
  using Json = nlohmann::ordered_json;
  Json out = Json::object();
  if (dump.outcome != StacksOutcome::kDumped) {
    out["error"] = dump.outcome == StacksOutcome::kBusy ? "busy" : "not_running";
    out["message"] = dump.message;
    return json_text(out);
  }
  out["run_id"] = run_id;
  out["attempt"] = dump.attempt;
  out["time"] = json_seconds(dump.time);
  out["seconds"] = json_seconds(dump.seconds);
  Json ranks = Json::array();
  for (const RankStacks& rank : dump.ranks) {
    Json r = Json::object();
    r["rank"] = rank.rank;
    r["local_rank"] = rank.local_rank;
    r["pid"] = rank.pid;
    r["stacks_file"] = rank.stacks_file.empty() ? Json(nullptr) : Json(rank.stacks_file);
    r["outcome"] = rank.outcome;
    r["python_frames"] = rank.python_frames;
    r["native_frames"] = rank.native_frames;
    r["top_frames"] = rank.top_frames;
    r["notes"] = rank.notes;
    r["seconds"] = json_seconds(rank.seconds);
    if (rank.node_rank >= 0) {
      r["node_rank"] = rank.node_rank;
      r["host"] = rank.host;
    }
    ranks.push_back(std::move(r));
  }
  out["ranks"] = std::move(ranks);
  out["notes"] = dump.notes;
  return json_text(out);
}

int stacks_http_status(const StacksDump& dump) { return dump.outcome == StacksOutcome::kDumped ? 200 : 409; }

}  // namespace mgtrain
