// The status API's web dashboard (GET /): one self-contained HTML page — inline CSS, JavaScript and an
// SVG chart, nothing fetched from elsewhere (the machines may have no internet) — that polls /status and
// /api/metrics every two seconds and shows the ranks, the GPU gauges and rank 0's loss curves.
#pragma once

namespace mgtrain {

const char* status_page_html();

}  // namespace mgtrain
