// The dashboard page's HTML, CSS and JavaScript as one string (see status_page.hpp).
#include "observe/status_page.hpp"

namespace mgtrain {

const char* status_page_html() {
  return R"MGTRAIN_PAGE(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>mgtrain status</title>
<style>
  body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; background: #fafafa; }
  h1 { font-size: 1.3em; margin: 0 0 .3em 0; }
  h2 { font-size: 1.05em; margin: 1.2em 0 .4em 0; }
  #summary { color: #555; }
  table { border-collapse: collapse; background: #fff; }
  th, td { border: 1px solid #ddd; padding: .25em .7em; text-align: right; font-variant-numeric: tabular-nums; }
  th { background: #f0f0f0; }
  td.state-running { color: #1a7f37; } td.state-exited { color: #999; } td.straggler { color: #b45309; font-weight: bold; }
  .gpus { display: flex; flex-wrap: wrap; gap: 1em; }
  .gpu { background: #fff; border: 1px solid #ddd; padding: .6em .8em; min-width: 16em; }
  .bar { background: #eee; height: .8em; margin: .15em 0 .5em 0; }
  .bar div { background: #3b82f6; height: 100%; }
  #chart { background: #fff; border: 1px solid #ddd; }
  .legend span { margin-right: 1.2em; }
  #error { color: #b91c1c; }
</style>
</head>
<body>
<h1>mgtrain run <span id="run">…</span></h1>
<div id="summary">loading…</div>
<div id="error"></div>
<h2>Ranks</h2>
<table id="ranks">
  <thead><tr><th>rank</th><th>node</th><th>local</th><th>pid</th><th>state</th><th>step</th><th>loss</th><th>heartbeat</th><th>steps/s</th><th>CPU %</th><th>RSS</th></tr></thead>
  <tbody></tbody>
</table>
<h2>GPUs</h2>
<div class="gpus" id="gpus"><em>no GPU statistics (no NVML on this machine)</em></div>
<h2>Loss (rank 0)</h2>
<div class="legend"><span style="color:#2563eb">&#9632; train loss</span><span style="color:#dc2626">&#9632; eval loss</span></div>
<svg id="chart" width="720" height="300" viewBox="0 0 720 300">
  <g id="axes"></g><path id="train-curve" fill="none" stroke="#2563eb" stroke-width="1.5" d=""/>
  <path id="eval-curve" fill="none" stroke="#dc2626" stroke-width="1.5" d=""/>
  <text id="no-data" x="360" y="150" text-anchor="middle" fill="#999">no metrics yet</text>
</svg>
<script>
"use strict";
function esc(s) { return String(s).replace(/[&<>"]/g, c => ({"&":"&amp;","<":"&lt;",">":"&gt;","\"":"&quot;"}[c])); }
function bytes(n) {
  if (n === null || n === undefined) return "–";
  const u = ["B","KiB","MiB","GiB","TiB"]; let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return n.toFixed(i ? 1 : 0) + " " + u[i];
}
function num(x, d) { return x === null || x === undefined ? "–" : Number(x).toFixed(d); }
function age(t, now) { return t === null || t === undefined ? "–" : Math.max(0, now - t).toFixed(1) + " s ago"; }
function renderStatus(s) {
  document.getElementById("run").textContent = s.run_id;
  document.getElementById("summary").textContent = s.phase + " | attempt " + (s.attempt + 1) + " of " + (s.max_restarts + 1) +
      " | restarts " + s.restarts + " | " + s.hostname + " node " + s.node_rank + " | " + s.run_dir +
      (s.scope === "job" ? " | every rank of the job's " + s.nodes + " nodes" :
       s.job_status_host ? " | this node's ranks; the job's view is on " + s.job_status_host : "");
  const rows = s.ranks.map(r => "<tr class=\"rank-row\" data-rank=\"" + r.rank + "\"><td>" + r.rank + "</td><td>" + r.node_rank + " " + esc(r.host) + "</td><td>" + r.local_rank +
      "</td><td>" + r.pid + "</td><td class=\"state-" + esc(r.state) + "\">" + esc(r.state) + "</td><td>" + (r.step === null ? "–" : r.step) +
      "</td><td>" + num(r.loss, 4) + "</td><td>" + age(r.last_heartbeat, s.time) + "</td><td" + (r.straggler ? " class=\"straggler\">" : ">") +
      num(r.step_rate, 2) + (r.straggler ? " straggler" : "") + "</td><td>" + num(r.cpu_percent, 0) +
      "</td><td>" + bytes(r.rss_bytes) + "</td></tr>");
  document.querySelector("#ranks tbody").innerHTML = rows.join("");
  if (s.gpus.length) {
    document.getElementById("gpus").innerHTML = s.gpus.map(g => {
      const util = g.utilization_percent === null ? 0 : g.utilization_percent;
      const mem = g.memory_total_bytes ? 100 * g.memory_used_bytes / g.memory_total_bytes : 0;
      return "<div class=\"gpu\"><b>GPU " + g.index + "</b> " + esc(g.name) +
        "<br>utilization " + num(g.utilization_percent, 0) + " %<div class=\"bar\"><div style=\"width:" + util + "%\"></div></div>" +
        "memory " + bytes(g.memory_used_bytes) + " / " + bytes(g.memory_total_bytes) + "<div class=\"bar\"><div style=\"width:" + mem.toFixed(1) + "%\"></div></div>" +
        num(g.temperature_c, 0) + " °C, " + num(g.power_w, 0) + " W</div>";
    }).join("");
  }
}
function renderCurves(m) {
  const all = m.train.concat(m.eval);
  document.getElementById("no-data").style.display = all.length ? "none" : "";
  if (!all.length) return;
  const W = 720, H = 300, L = 60, R = 10, T = 10, B = 30;
  let x0 = Math.min(...all.map(p => p[0])), x1 = Math.max(...all.map(p => p[0]));
  let y0 = Math.min(...all.map(p => p[1])), y1 = Math.max(...all.map(p => p[1]));
  if (x1 === x0) x1 = x0 + 1;
  if (y1 === y0) { y1 += 0.5; y0 -= 0.5; }
  const sx = x => L + (x - x0) / (x1 - x0) * (W - L - R), sy = y => T + (y1 - y) / (y1 - y0) * (H - T - B);
  const path = pts => pts.map((p, i) => (i ? "L" : "M") + sx(p[0]).toFixed(1) + " " + sy(p[1]).toFixed(1)).join(" ");
  document.getElementById("train-curve").setAttribute("d", path(m.train));
  document.getElementById("eval-curve").setAttribute("d", path(m.eval));
  let axes = "<line x1=\"" + L + "\" y1=\"" + (H - B) + "\" x2=\"" + (W - R) + "\" y2=\"" + (H - B) + "\" stroke=\"#999\"/>" +
             "<line x1=\"" + L + "\" y1=\"" + T + "\" x2=\"" + L + "\" y2=\"" + (H - B) + "\" stroke=\"#999\"/>";
  for (let i = 0; i <= 4; i++) {
    const y = y0 + (y1 - y0) * i / 4, x = x0 + (x1 - x0) * i / 4;
    axes += "<text x=\"" + (L - 5) + "\" y=\"" + (sy(y) + 4).toFixed(1) + "\" text-anchor=\"end\" font-size=\"11\" fill=\"#555\">" + y.toPrecision(3) + "</text>";
    axes += "<text x=\"" + sx(x).toFixed(1) + "\" y=\"" + (H - B + 15) + "\" text-anchor=\"middle\" font-size=\"11\" fill=\"#555\">" + Math.round(x) + "</text>";
  }
  document.getElementById("axes").innerHTML = axes;
}
async function refresh() {
  try {
    const [s, m] = await Promise.all([fetch("status").then(r => r.json()), fetch("api/metrics").then(r => r.json())]);
    renderStatus(s);
    renderCurves(m);
    document.getElementById("error").textContent = "";
  } catch (e) {
    document.getElementById("error").textContent = "the launcher does not answer (" + e + "); the run may have ended";
  }
}
refresh();
setInterval(refresh, 2000);
</script>
</body>
</html>
)MGTRAIN_PAGE";
}

}  // namespace mgtrain
