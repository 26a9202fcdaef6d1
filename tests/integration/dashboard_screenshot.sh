#!/usr/bin/env bash
# The status dashboard in headless Chromium against a live run: a real `mgtrain launch --status-port`
# with two shell-script workers (heartbeats, rank 0's metrics.jsonl); Chromium dumps the DOM after the
# page's scripts ran and takes a screenshot. Checks: both rank rows, an SVG loss path with data, a PNG
# of the window's size that is not blank. Usage: dashboard_screenshot.sh BIN_DIR WORK_DIR
# Exit 77 (ctest SKIP) with the reason when Chromium is not installed (scripts/install-deps.sh --test).
set -euo pipefail
bin_dir=$1
work=$2
chromium_bin=$(command -v chromium || command -v chromium-browser || true)
if [[ -z "$chromium_bin" ]]; then
  echo "SKIP: chromium is not installed (apt-get install chromium, or scripts/install-deps.sh --test)"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$work/worker.sh" <<'WORKER'
#!/bin/sh
step=0
while true; do
  step=$((step + 1))
  printf '{"step":%d,"loss":%d.25,"time":%s}\n' "$step" $((100 - step)) "$(date +%s)" > "$MGTRAIN_HEARTBEAT_FILE.tmp"
  mv -f "$MGTRAIN_HEARTBEAT_FILE.tmp" "$MGTRAIN_HEARTBEAT_FILE"
  if [ "$RANK" = 0 ]; then
    printf '{"kind":"train","step":%d,"time":%s,"loss":%d.5}\n' "$step" "$(date +%s)" $((300 / (step + 2))) >> "$MGTRAIN_RUN_DIR/metrics.jsonl"
  fi
  sleep 0.05
done
WORKER
chmod +x "$work/worker.sh"

"$bin_dir/mgtrain" launch --nproc 2 --status-port "$port" --log-dir "$work/runs" --run-id dash -- "$work/worker.sh" \
  > "$work/launcher.out" 2> "$work/launcher.err" &
launcher=$!
cleanup() { kill -TERM "$launcher" 2>/dev/null || true; wait "$launcher" 2>/dev/null || true; }
trap cleanup EXIT

for _ in $(seq 1 200); do
  lines=$(wc -l 2>/dev/null < "$work/runs/dash/metrics.jsonl" || echo 0)
  if [[ "$lines" -ge 20 ]]; then break; fi
  sleep 0.1
done
if [[ "${lines:-0}" -lt 20 ]]; then
  echo "FAIL: the run did not come up; launcher stderr:"; cat "$work/launcher.err"; exit 1
fi

flags=(--headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update --no-first-run
       --disable-sync --user-data-dir="$work/profile" --virtual-time-budget=6000 --window-size=1200,1000)
url="http://127.0.0.1:$port/"
timeout 90 "$chromium_bin" "${flags[@]}" --dump-dom "$url" > "$work/dom.html" 2> "$work/chromium-dom.err" || true
timeout 90 "$chromium_bin" "${flags[@]}" --screenshot="$work/dashboard.png" "$url" > /dev/null 2> "$work/chromium-shot.err" || true

status=0
for rank in 0 1; do
  if ! grep -q "class=\"rank-row\" data-rank=\"$rank\"" "$work/dom.html"; then echo "FAIL: no row for rank $rank in the DOM"; status=1; fi
done
# The train curve's path: M x y followed by L segments, one per point after the first.
segments=$(grep -o '<path id="train-curve"[^>]*d="M[^"]*"' "$work/dom.html" | grep -o ' L\|"L\|L[0-9]' | wc -l || true)
if [[ "$segments" -lt 5 ]]; then echo "FAIL: the loss curve has $segments segments in the DOM"; status=1; fi
if grep -q 'id="error">the launcher does not answer' "$work/dom.html"; then echo "FAIL: the page could not reach the API"; status=1; fi
if [[ ! -s "$work/dashboard.png" ]]; then
  echo "FAIL: no screenshot; chromium said:"; tail -5 "$work/chromium-shot.err"; exit 1
fi
python3 - "$work/dashboard.png" <<'PY' || status=1
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
width, height = struct.unpack(">II", data[16:24])
assert (width, height) == (1200, 1000), f"size {width}x{height}, expected 1200x1000"
assert len(data) > 15000, f"only {len(data)} bytes: a blank page?"
# Decode the pixels (8-bit RGB/RGBA, no interlace) and count colours: text, table and curve give many.
bit_depth, colour_type = data[24], data[25]
idat, at = b"", 8
while at < len(data):
    length, kind = struct.unpack(">I4s", data[at:at + 8])
    if kind == b"IDAT": idat += data[at + 8:at + 8 + length]
    at += 12 + length
raw = zlib.decompress(idat)
channels = {2: 3, 6: 4}[colour_type]
stride = width * channels
colours, prev, pos = set(), bytearray(stride), 0
for _ in range(height):
    ftype, line = raw[pos], bytearray(raw[pos + 1:pos + 1 + stride]); pos += 1 + stride
    for i in range(stride):
        a = line[i - channels] if i >= channels else 0; b = prev[i]; c = prev[i - channels] if i >= channels else 0
        if ftype == 1: line[i] = (line[i] + a) & 255
        elif ftype == 2: line[i] = (line[i] + b) & 255
        elif ftype == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif ftype == 4:
            p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    colours.update(bytes(line[i:i + 3]) for i in range(0, stride, channels * 7))
    prev = line
blue = sum(1 for c in colours if c[2] > 180 and c[0] < 120)
assert len(colours) > 20, f"only {len(colours)} colours: a blank page?"
assert blue > 0, "no blue of the train curve in the screenshot"
print(f"screenshot {width}x{height}, {len(data)} bytes, {len(colours)} colours sampled")
PY
if [[ $status -eq 0 ]]; then echo "PASS: dashboard rows, curve and screenshot ($work/dashboard.png)"; fi
exit $status
