#!/usr/bin/env python3
"""Where a profiled forward's GPU time goes, per kernel, from Nsight Compute's raw CSV.

scripts/gpu-check.sh (step 9) runs `ncu --profile-from-start off --csv --page raw --metrics
gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,...` on `pith bench model
--profile --profile-cases CASE`: the CUDA backend brackets its profiled forwards with
cudaProfilerStart/Stop, so the CSV holds exactly their kernels, one row per launch. This groups
the rows by kernel name and prints, per kernel: launches and time per forward, its share of the
forward's kernel time, the DRAM bytes it moved and the rate it moved them at (bytes over its own
time), and ncu's DRAM and SM throughput as a percentage of peak (time-weighted means); then the
totals, and with --bandwidth-gb-s (the device-to-device copy rate `pith bench model` measured)
how close the forward's kernels came to it.

usage: ncu_summary.py NCU.csv [--forwards N] [--bandwidth-gb-s B] [--json OUT.json] [--top K]
"""
import argparse
import csv
import json
import re
import sys

TIME = "gpu__time_duration.sum"
READ = "dram__bytes_read.sum"
WRITE = "dram__bytes_write.sum"
DRAM_PCT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
SM_PCT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"

TIME_UNITS = {"nsecond": 1e-9, "ns": 1e-9, "usecond": 1e-6, "us": 1e-6, "msecond": 1e-3,
              "ms": 1e-3, "second": 1.0, "s": 1.0}
BYTE_UNITS = {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12,
              "KB": 1e3, "MB": 1e6, "GB": 1e9, "KiB": 1024.0, "MiB": 1024.0 ** 2,
              "GiB": 1024.0 ** 3}


def number(text):
    text = text.strip().replace(",", "")
    return float(text) if text and text.lower() not in ("n/a", "nan") else 0.0


def short_name(name):
    """The kernel's function: no parameters, no template arguments, no namespaces."""
    name = name.replace("(anonymous namespace)", "").split("(", 1)[0]
    depth, out = 0, []
    for ch in name:  # drop <...>, nested
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)
        elif depth == 0:
            out.append(ch)
    name = "".join(out).strip()
    name = re.sub(r"^(void|[\w:]+\s+)\s*", "", name) if " " in name else name
    return name.split("::")[-1] or name


def read_rows(path):
    """(rows, units): ncu's raw CSV after its ==PROF== lines; the row after the header holds
    each column's unit."""
    with open(path, newline="") as f:
        lines = [l for l in f if not l.startswith("==")]
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        sys.exit(f"{path}: no ncu CSV header (a line starting with \"ID\")")
    reader = csv.DictReader(lines[start:])
    units, rows = {}, []
    for row in reader:
        if not row.get("ID", "").strip():
            units = {k: (v or "").strip() for k, v in row.items()}
            continue
        rows.append(row)
    missing = [m for m in (TIME, READ, WRITE) if m not in reader.fieldnames]
    if missing:
        sys.exit(f"{path}: metrics missing from the CSV: {', '.join(missing)}")
    return rows, units


def scaled(row, units, metric, table):
    unit = units.get(metric, "")
    if unit and unit not in table:
        sys.exit(f"unknown unit '{unit}' of {metric}")
    return number(row.get(metric, "")) * table.get(unit, 1.0)


def summarise(rows, units, forwards):
    kernels = {}
    for row in rows:
        name = short_name(row.get("Kernel Name", "?"))
        k = kernels.setdefault(name, {"launches": 0, "seconds": 0.0, "bytes": 0.0,
                                      "dram_pct_s": 0.0, "sm_pct_s": 0.0})
        t = scaled(row, units, TIME, TIME_UNITS)
        k["launches"] += 1
        k["seconds"] += t
        k["bytes"] += scaled(row, units, READ, BYTE_UNITS) + scaled(row, units, WRITE, BYTE_UNITS)
        k["dram_pct_s"] += number(row.get(DRAM_PCT, "")) * t
        k["sm_pct_s"] += number(row.get(SM_PCT, "")) * t
    total_s = sum(k["seconds"] for k in kernels.values())
    total_b = sum(k["bytes"] for k in kernels.values())
    out = []
    for name, k in sorted(kernels.items(), key=lambda kv: -kv[1]["seconds"]):
        s = k["seconds"]
        out.append({
            "kernel": name,
            "launches_per_forward": k["launches"] / forwards,
            "us_per_forward": s / forwards * 1e6,
            "share": s / total_s if total_s else 0.0,
            "mb_per_forward": k["bytes"] / forwards / 1e6,
            "gb_s": k["bytes"] / s / 1e9 if s else 0.0,
            "dram_pct_of_peak": k["dram_pct_s"] / s if s else 0.0,
            "sm_pct_of_peak": k["sm_pct_s"] / s if s else 0.0,
        })
    totals = {"launches_per_forward": len(rows) / forwards,
              "us_per_forward": total_s / forwards * 1e6,
              "mb_per_forward": total_b / forwards / 1e6,
              "gb_s": total_b / total_s / 1e9 if total_s else 0.0}
    return out, totals


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--forwards", type=int, default=1, help="profiled forwards in the CSV")
    ap.add_argument("--bandwidth-gb-s", type=float, default=0.0,
                    help="the device's copy bandwidth, measured in the same run")
    ap.add_argument("--json", help="also write the summary here")
    ap.add_argument("--top", type=int, default=20, help="kernels printed")
    a = ap.parse_args()
    if a.forwards < 1:
        sys.exit("--forwards must be at least 1")
    rows, units = read_rows(a.csv)
    if not rows:
        sys.exit(f"{a.csv}: no kernel rows (was the profiled range empty?)")
    kernels, totals = summarise(rows, units, a.forwards)
    if a.bandwidth_gb_s > 0:
        totals["of_bandwidth"] = totals["gb_s"] / a.bandwidth_gb_s
    print(f"{'kernel':<40} {'launches':>8} {'us/fwd':>9} {'share':>6} {'MB/fwd':>8} "
          f"{'GB/s':>7} {'dram%':>6} {'sm%':>5}")
    for k in kernels[:a.top]:
        print(f"{k['kernel'][:40]:<40} {k['launches_per_forward']:>8.1f} "
              f"{k['us_per_forward']:>9.1f} {100 * k['share']:>5.1f}% {k['mb_per_forward']:>8.2f} "
              f"{k['gb_s']:>7.0f} {k['dram_pct_of_peak']:>5.1f}% {k['sm_pct_of_peak']:>4.1f}%")
    line = (f"total: {totals['launches_per_forward']:.0f} launches, {totals['us_per_forward']:.1f} "
            f"us of kernel time and {totals['mb_per_forward']:.1f} MB of DRAM traffic per forward, "
            f"{totals['gb_s']:.0f} GB/s")
    if "of_bandwidth" in totals:
        line += f" = {totals['of_bandwidth']:.2f} of the measured {a.bandwidth_gb_s:.0f} GB/s"
    print(line)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"forwards": a.forwards, "totals": totals, "kernels": kernels}, f, indent=1)


if __name__ == "__main__":
    main()
