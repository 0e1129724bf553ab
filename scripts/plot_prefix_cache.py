#!/usr/bin/env python3
"""Draws rungs-plan prefix-cache's curve: hit rate against cache capacity.

    rungs-plan prefix-cache --trace T --capacity-tokens 1e6,3e6,... --json > curve.json
    plot_prefix_cache.py curve.json OUT.svg|OUT.png [--title TEXT]

OUT.svg is written by this script alone (no library needed); OUT.png needs matplotlib: when it
is missing the script says what to install and exits with status 3. It never installs
anything.
"""
import json
import math
import sys
from xml.sax.saxutils import escape


def points(path):
    with open(path) as f:
        rows = json.load(f)
    return [(r["capacity_tokens"], r["hit_rate"]) for r in rows]


def label(tokens):
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if tokens >= scale:
            v = tokens / scale
            return ("%g" % v) + unit
    return "%g" % tokens


def svg(pts, out, title):
    # A log-scaled capacity axis, hit rate 0-100%.
    w, h, left, right, top, bottom = 640, 400, 70, 20, 40, 60
    xs = [math.log10(c) for c, _ in pts]
    x0, x1 = math.floor(min(xs)), math.ceil(max(xs))
    if x1 == x0:
        x1 = x0 + 1
    ymax = max(0.1, math.ceil(max(r for _, r in pts) * 10) / 10)

    def px(c):
        return left + (math.log10(c) - x0) / (x1 - x0) * (w - left - right)

    def py(r):
        return h - bottom - r / ymax * (h - top - bottom)

    s = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">' % (w, h),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="22" font-size="14">%s</text>' % (left, escape(title))]
    for k in range(0, int(round(ymax * 10)) + 1):
        r = k / 10
        s.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>' % (left, py(r), w - right, py(r)))
        s.append('<text x="%d" y="%.1f" text-anchor="end">%d%%</text>' % (left - 6, py(r) + 4, round(r * 100)))
    for e in range(x0, x1 + 1):
        x = left + (e - x0) / (x1 - x0) * (w - left - right)
        s.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>' % (x, top, x, h - bottom))
        s.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>' % (x, h - bottom + 18, label(10 ** e)))
    s.append('<text x="%d" y="%d" text-anchor="middle">cache capacity (tokens, log scale)</text>'
             % ((left + w - right) // 2, h - 18))
    s.append('<text x="18" y="%d" transform="rotate(-90 18 %d)" text-anchor="middle">prefix hit rate (blocks)</text>'
             % ((top + h - bottom) // 2, (top + h - bottom) // 2))
    path = " ".join("%s%.1f,%.1f" % ("M" if i == 0 else "L", px(c), py(r)) for i, (c, r) in enumerate(pts))
    s.append('<path d="%s" fill="none" stroke="#1f77b4" stroke-width="2"/>' % path)
    for c, r in pts:
        s.append('<circle cx="%.1f" cy="%.1f" r="3.5" fill="#1f77b4"/>' % (px(c), py(r)))
        s.append('<text x="%.1f" y="%.1f" text-anchor="middle">%.1f%%</text>' % (px(c), py(r) - 9, r * 100))
    s.append("</svg>")
    with open(out, "w") as f:
        f.write("\n".join(s) + "\n")


def png(pts, out, title):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.stderr.write("plot_prefix_cache.py: PNG output needs matplotlib: install python3-matplotlib "
                         "(Debian/Ubuntu) or `pip install matplotlib`, or write OUT.svg instead\n")
        sys.exit(3)
    fig, ax = plt.subplots(figsize=(6.4, 4))
    ax.semilogx([c for c, _ in pts], [100 * r for _, r in pts], marker="o")
    ax.set_xlabel("cache capacity (tokens, log scale)")
    ax.set_ylabel("prefix hit rate (blocks, %)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def main(argv):
    if len(argv) not in (3, 5) or (len(argv) == 5 and argv[3] != "--title") or not argv[2].endswith((".svg", ".png")):
        sys.stderr.write(__doc__)
        return 2
    pts = sorted(points(argv[1]))
    title = argv[4] if len(argv) == 5 else "prefix-cache hit rate against capacity"
    (svg if argv[2].endswith(".svg") else png)(pts, argv[2], title)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
