#!/usr/bin/env python3
"""Dependency-free SVG charts for docs/benchmarks.md (Debian 12's python3 has no matplotlib
installed by default, and the docs only need bars and lines).

    svg_chart.py SPEC.json OUT.svg

SPEC is one chart:
  {"type": "bar", "title": "...", "ylabel": "...", "log": false,
   "categories": ["a", "b"], "series": [{"name": "off", "values": [1, 2]}, ...]}
  {"type": "line", "title": "...", "xlabel": "...", "ylabel": "...", "log": false,
   "series": [{"name": "p99", "points": [[x, y], ...]}, ...]}
Values are plotted as given (the benchmark JSON lines hold them); labels show 3 significant
digits.
"""
import json
import math
import sys
from xml.sax.saxutils import escape

W, H = 640, 360
LEFT, RIGHT, TOP, BOTTOM = 70, 150, 40, 50
COLORS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860"]


def fmt(v):
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.3g}"


class Axis:
    """Maps data values to pixels along one axis (linear or log10)."""

    def __init__(self, lo, hi, px0, px1, log=False):
        self.log = log
        if log:
            lo, hi = math.log10(lo), math.log10(hi)
        if hi == lo:
            hi = lo + 1
        self.lo, self.hi, self.px0, self.px1 = lo, hi, px0, px1

    def __call__(self, v):
        if self.log:
            v = math.log10(v)
        return self.px0 + (v - self.lo) / (self.hi - self.lo) * (self.px1 - self.px0)

    def ticks(self):
        if self.log:
            return [10 ** e for e in range(math.floor(self.lo), math.ceil(self.hi) + 1)
                    if self.lo - 1e-9 <= e <= self.hi + 1e-9]
        span = self.hi - self.lo
        step = 10 ** math.floor(math.log10(span / 5))
        for m in (1, 2, 5, 10):
            if span / (step * m) <= 6:
                step *= m
                break
        first = math.ceil(self.lo / step) * step
        out, v = [], first
        while v <= self.hi + 1e-9:
            out.append(round(v, 10))
            v += step
        return out


def frame(spec, y):
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="14">{escape(spec.get("title", ""))}</text>']
    for t in y.ticks():
        py = y(t)
        out.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{py:.1f}" y2="{py:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 6}" y="{py + 4:.1f}" text-anchor="end">{fmt(t)}</text>')
    out.append(f'<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{H - BOTTOM}" stroke="black"/>')
    out.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{H - BOTTOM}" y2="{H - BOTTOM}" stroke="black"/>')
    out.append(f'<text transform="translate(16,{(TOP + H - BOTTOM) / 2}) rotate(-90)" '
               f'text-anchor="middle">{escape(spec.get("ylabel", ""))}</text>')
    return out


def legend(out, names):
    for i, name in enumerate(names):
        y = TOP + 10 + i * 18
        out.append(f'<rect x="{W - RIGHT + 12}" y="{y - 9}" width="12" height="12" fill="{COLORS[i % len(COLORS)]}"/>')
        out.append(f'<text x="{W - RIGHT + 30}" y="{y + 1}">{escape(name)}</text>')


def bar_chart(spec):
    series, cats = spec["series"], spec["categories"]
    vals = [v for s in series for v in s["values"]]
    log = spec.get("log", False)
    y = Axis(min(vals) / 2 if log else 0, max(vals) * 1.15, H - BOTTOM, TOP, log)
    out = frame(spec, y)
    group_w = (W - LEFT - RIGHT) / len(cats)
    bar_w = group_w * 0.8 / len(series)
    for ci, cat in enumerate(cats):
        gx = LEFT + ci * group_w + group_w * 0.1
        for si, s in enumerate(series):
            v = s["values"][ci]
            x0, top = gx + si * bar_w, y(v)
            base = H - BOTTOM
            out.append(f'<rect x="{x0:.1f}" y="{top:.1f}" width="{bar_w - 2:.1f}" height="{base - top:.1f}" '
                       f'fill="{COLORS[si % len(COLORS)]}"/>')
            out.append(f'<text x="{x0 + bar_w / 2:.1f}" y="{top - 4:.1f}" text-anchor="middle" font-size="11">{fmt(v)}</text>')
        out.append(f'<text x="{LEFT + (ci + 0.5) * group_w:.1f}" y="{H - BOTTOM + 18}" text-anchor="middle">{escape(cat)}</text>')
    legend(out, [s["name"] for s in series])
    out.append("</svg>")
    return "\n".join(out)


def line_chart(spec):
    series = spec["series"]
    xs = [p[0] for s in series for p in s["points"]]
    ys = [p[1] for s in series for p in s["points"]]
    log = spec.get("log", False)
    x = Axis(min(xs), max(xs), LEFT, W - RIGHT, spec.get("xlog", False))
    y = Axis(min(ys) / 1.5 if log else 0, max(ys) * 1.15, H - BOTTOM, TOP, log)
    out = frame(spec, y)
    for t in x.ticks():
        out.append(f'<text x="{x(t):.1f}" y="{H - BOTTOM + 18}" text-anchor="middle">{fmt(t)}</text>')
    out.append(f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 10}" text-anchor="middle">{escape(spec.get("xlabel", ""))}</text>')
    for si, s in enumerate(series):
        color = COLORS[si % len(COLORS)]
        pts = " ".join(f"{x(px):.1f},{y(py):.1f}" for px, py in s["points"])
        out.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2"/>')
        for px, py in s["points"]:
            out.append(f'<circle cx="{x(px):.1f}" cy="{y(py):.1f}" r="3" fill="{color}"/>')
    legend(out, [s["name"] for s in series])
    out.append("</svg>")
    return "\n".join(out)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    spec = json.load(open(sys.argv[1]))
    svg = bar_chart(spec) if spec["type"] == "bar" else line_chart(spec)
    with open(sys.argv[2], "w") as f:
        f.write(svg + "\n")


if __name__ == "__main__":
    main()
