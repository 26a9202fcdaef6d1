#!/usr/bin/env python3
"""Helpers of scripts/device/check.sh that read JSON, safetensors and JSON lines (standard library only: no torch).

  flat JSON_FILE            a JSON document flattened: one KEY=VALUE a line (nested keys joined with '.')
  summary LOG              the last {"summary": ...} line of LOG, flattened: one KEY=VALUE a line (eval.accuracy=0.91)
  losses METRICS_JSONL     "FIRST LAST ROWS": the first and last train loss of a run's metrics.jsonl
  same-checkpoint A B      compares two mgtrain checkpoints (safetensors layout) tensor by tensor, bytes and all:
                           model/, optim/ and rank*/ entries; exit 1 naming what differs
  gpu-util RESOURCES       "MEAN MAX SAMPLES": GPU 0's utilization_percent over a run's resources.jsonl
  assemble STEPS_DIR OUT NAME...
                           gpu-check.json from the steps' records (STEPS_DIR/NAME.status, .seconds, .fig), in order
Exit 2 with a message on a file that is missing or malformed.
"""
import json
import os
import struct
import sys


class Malformed(Exception):
    pass


def read_json_lines(path):
    rows = []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    rows.append(json.loads(line))
                except ValueError as e:
                    raise Malformed("%s:%d: not JSON (%s)" % (path, number, e))
    except OSError as e:
        raise Malformed("%s: %s" % (path, e.strerror))
    return rows


def flatten(prefix, value, out):
    if isinstance(value, dict):
        for key, inner in value.items():
            flatten(prefix + key + ".", inner, out)
    else:
        out.append("%s=%s" % (prefix[:-1], value if isinstance(value, str) else json.dumps(value)))


def summary(path):
    found = None
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                at = line.find('{"summary"')
                if at >= 0:
                    found = line[at:].strip()
    except OSError as e:
        raise Malformed("%s: %s" % (path, e.strerror))
    if found is None:
        raise Malformed("%s: no {\"summary\": ...} line (the run did not finish)" % path)
    try:
        row = json.loads(found)["summary"]
    except (ValueError, KeyError, TypeError) as e:
        raise Malformed("%s: the summary line is not JSON (%s)" % (path, e))
    out = []
    flatten("", row, out)
    print("\n".join(out))


def flat(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            document = json.load(f)
    except OSError as e:
        raise Malformed("%s: %s" % (path, e.strerror))
    except ValueError as e:
        raise Malformed("%s: not JSON (%s)" % (path, e))
    out = []
    flatten("", document, out)
    print("\n".join(out))


def losses(path):
    train = [r["loss"] for r in read_json_lines(path) if r.get("kind") == "train" and r.get("loss") is not None]
    if not train:
        raise Malformed("%s: no train row with a loss" % path)
    print("%s %s %d" % (train[0], train[-1], len(train)))


def read_safetensors(path):
    """{name: (dtype, shape, bytes)} of a safetensors file (8-byte little-endian header length, JSON header, data)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise Malformed("%s: %s" % (path, e.strerror))
    if len(raw) < 8:
        raise Malformed("%s: %d bytes, too short for a safetensors file" % (path, len(raw)))
    (length,) = struct.unpack("<Q", raw[:8])
    if length > len(raw) - 8:
        raise Malformed("%s: the header says %d bytes, the file has %d after the length" % (path, length, len(raw) - 8))
    try:
        header = json.loads(raw[8:8 + length])
    except ValueError as e:
        raise Malformed("%s: the header is not JSON (%s)" % (path, e))
    data = raw[8 + length:]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            begin, end = entry["data_offsets"]
            tensors[name] = (entry["dtype"], tuple(entry["shape"]), data[begin:end])
        except (KeyError, TypeError, ValueError) as e:
            raise Malformed("%s: tensor %s has a malformed entry (%s)" % (path, name, e))
    return tensors


def same_checkpoint(a_path, b_path):
    a, b = read_safetensors(a_path), read_safetensors(b_path)
    wanted = lambda name: name.startswith(("model/", "optim/", "rank"))
    names = sorted(n for n in set(a) | set(b) if wanted(n))
    different = [n for n in names if a.get(n) != b.get(n)]
    model = sum(1 for n in names if n.startswith("model/"))
    if not model:
        raise Malformed("%s: no model/ tensors: not an mgtrain checkpoint" % a_path)
    if different:
        shown = ", ".join(different[:8]) + (" ..." if len(different) > 8 else "")
        print("%d of %d tensors differ: %s" % (len(different), len(names), shown))
        return 1
    print("%d tensors bit-identical (%d model, %d optimizer)" % (len(names), model,
                                                                  sum(1 for n in names if n.startswith("optim/"))))
    return 0


def gpu_util(path):
    values = []
    for row in read_json_lines(path):
        gpus = row.get("gpus") or []
        if gpus and gpus[0].get("utilization_percent") is not None:
            values.append(float(gpus[0]["utilization_percent"]))
    if not values:
        raise Malformed("%s: no GPU utilisation sample (NVML absent, or the run was shorter than one interval)" % path)
    print("%.1f %.0f %d" % (sum(values) / len(values), max(values), len(values)))


def typed(text):
    """A figure's value: a JSON number or boolean when it reads as one, else the string."""
    if text in ("true", "false"):
        return text == "true"
    try:
        number = float(text)
    except ValueError:
        return text
    if number != number or number in (float("inf"), float("-inf")):
        return text
    return int(text) if text.lstrip("-").isdigit() else number


def read_text(path, default=""):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return default


def assemble(steps_dir, out_path, names):
    meta = {}
    for line in read_text(os.path.join(steps_dir, "meta")).splitlines():
        key, _, value = line.partition("\t")
        meta[key] = typed(value)
    steps, counts = [], {"pass": 0, "fail": 0, "skip": 0}
    for name in names:
        status = read_text(os.path.join(steps_dir, name + ".status"), "fail")
        if status not in counts:
            status = "fail"
        counts[status] += 1
        figures = {}
        for line in read_text(os.path.join(steps_dir, name + ".fig")).splitlines():
            key, _, value = line.partition("\t")
            if key:
                figures[key] = typed(value)
        seconds = typed(read_text(os.path.join(steps_dir, name + ".seconds"), "0"))
        steps.append({"name": name, "status": status, "seconds": seconds, "figures": figures})
    document = {"check": meta, "steps": steps, "totals": counts}
    tmp = out_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(document, f, indent=1)
        f.write("\n")
    os.replace(tmp, out_path)
    print("%d steps passed, %d failed, %d skipped" % (counts["pass"], counts["fail"], counts["skip"]))


def main(argv):
    usage = "usage: check_helpers.py flat JSON_FILE | summary LOG | losses METRICS | same-checkpoint A B | gpu-util RESOURCES | " \
            "assemble STEPS_DIR OUT NAME..."
    try:
        if len(argv) == 2 and argv[0] == "flat":
            flat(argv[1])
        elif len(argv) == 2 and argv[0] == "summary":
            summary(argv[1])
        elif len(argv) == 2 and argv[0] == "losses":
            losses(argv[1])
        elif len(argv) == 3 and argv[0] == "same-checkpoint":
            return same_checkpoint(argv[1], argv[2])
        elif len(argv) == 2 and argv[0] == "gpu-util":
            gpu_util(argv[1])
        elif len(argv) >= 3 and argv[0] == "assemble":
            assemble(argv[1], argv[2], argv[3:])
        else:
            print(usage, file=sys.stderr)
            return 2
    except Malformed as e:
        print("check_helpers.py: %s" % e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
