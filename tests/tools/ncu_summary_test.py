#!/usr/bin/env python3
"""tools/ncu_summary.py on a CSV in Nsight Compute's raw layout (tests/data/ncu/): two profiled
forwards of two GEMV launches and a norm each. Checks the grouping by kernel function (template
arguments, parameters and namespaces dropped), the units row (Mbyte, Kbyte, usecond), the
thousands separators, the per-forward figures, the time-weighted percentages and the totals
against the measured bandwidth.

usage: ncu_summary_test.py TOOLS_DIR DATA_DIR
"""
import json
import os
import subprocess
import sys
import tempfile


def main():
    tool = os.path.join(sys.argv[1], "ncu_summary.py")
    csv_path = os.path.join(sys.argv[2], "ncu", "two_forwards.csv")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "summary.json")
        p = subprocess.run([sys.executable, tool, csv_path, "--forwards", "2",
                            "--bandwidth-gb-s", "4000", "--json", out],
                           capture_output=True, text=True, check=True)
        with open(out) as f:
            s = json.load(f)
    kernels = {k["kernel"]: k for k in s["kernels"]}
    assert set(kernels) == {"gemv_kernel", "add_rmsnorm_kernel"}, kernels
    g, n = kernels["gemv_kernel"], kernels["add_rmsnorm_kernel"]
    assert s["kernels"][0]["kernel"] == "gemv_kernel", s["kernels"]  # the most time first
    assert g["launches_per_forward"] == 2 and n["launches_per_forward"] == 1, (g, n)
    near = lambda a, b: abs(a - b) <= 1e-9 * max(1.0, abs(b))
    # Per forward: 2.5 + 300 us; 8.4 MB + 12 KB + 1050 MB of DRAM traffic.
    assert near(g["us_per_forward"], 302.5), g
    assert near(g["mb_per_forward"], 8.4 + 0.012 + 1050.0), g
    assert near(g["gb_s"], (8.412 + 1050.0) * 1e6 / 302.5e-6 / 1e9), g
    assert near(g["dram_pct_of_peak"], (80 * 2.5 + 90 * 300) / 302.5), g
    assert near(n["mb_per_forward"], 0.01 + 0.008), n
    t = s["totals"]
    assert t["launches_per_forward"] == 3 and near(t["us_per_forward"], 304.0), t
    assert near(g["share"] + n["share"], 1.0), (g, n)
    assert near(t["of_bandwidth"], t["gb_s"] / 4000), t
    assert "gemv_kernel" in p.stdout and "= " in p.stdout.splitlines()[-1], p.stdout
    # A CSV without the time metric is refused, naming it.
    with tempfile.NamedTemporaryFile("w", suffix=".csv") as bad:
        bad.write('"ID","Kernel Name","dram__bytes_read.sum","dram__bytes_write.sum"\n"0","k","1","1"\n')
        bad.flush()
        r = subprocess.run([sys.executable, tool, bad.name], capture_output=True, text=True)
        assert r.returncode != 0 and "gpu__time_duration.sum" in r.stderr, r.stderr
    print("ncu_summary: grouping, units and totals hold")


if __name__ == "__main__":
    main()
