#!/usr/bin/env python3
"""Draws rungs-plan simulate's output (the JSON that `rungs-plan simulate --plot F.png` writes
as F.json, with the step series).

    plot_simulation.py RUN.json [RUN.json ...] OUT.png

One file with one run: the scheduler's state over time (running requests, requests waiting
for KV blocks) and the KV cache usage, as the paged-KV blog plots them. Several files: one
such row per file (the blog's N = 10, 12, 14). One file with several runs (--timing all):
step time over the first seconds for each capture timing, and their first-request TTFT.

matplotlib comes from Debian's python3-matplotlib. Without it the script says what to install
and exits with status 3 (nothing else depends on plotting); it never installs anything itself.
"""
import json
import os
import subprocess
import sys


def system_python():
    """Debian's python3 (where python3-matplotlib lands), when this is another interpreter."""
    p = "/usr/bin/python3"
    if os.path.exists(p) and os.path.realpath(sys.executable) != os.path.realpath(p) \
            and not os.environ.get("RUNGS_PLOT_REEXEC"):
        return p
    return None


def need_matplotlib():
    try:
        import matplotlib  # noqa: F401
        return True
    except ImportError:
        pass
    p = system_python()
    if p and subprocess.run([p, "-c", "import matplotlib"], capture_output=True).returncode == 0:
        os.environ["RUNGS_PLOT_REEXEC"] = "1"
        os.execv(p, [p] + sys.argv)
    print("plot_simulation.py: matplotlib is not available; no plot drawn. Install it: "
          "apt-get install python3-matplotlib (Debian, Ubuntu) or pip install matplotlib", file=sys.stderr)
    return False


def scheduler_row(axes, data, run):
    s = run["steps"]
    t = s["start"]
    left, right = axes
    left.step(t, s["running"], where="post", label="running")
    left.step(t, s["waiting_for_blocks"], where="post", label="waiting for KV blocks")
    left.set_ylabel("requests")
    left.legend(loc="upper right", fontsize=8)
    right.plot(t, [100 * u for u in s["kv_usage"]], color="tab:red")
    right.set_ylim(0, 105)
    right.set_ylabel("KV cache usage (%)")
    title = data["workload"].split(";")[0]
    left.set_title(title, fontsize=9)
    right.set_title("peak %.1f%%, %d preemptions" % (run["peak_kv_percent"], run["preemptions"]), fontsize=9)


def timing_figure(plt, data, out):
    runs = data["runs"]
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    horizon = 30.0
    for run in runs:
        s = run["steps"]
        pts = [(t, 1e3 * d) for t, d in zip(s["start"], s["seconds"]) if t <= horizon]
        if pts:
            a.plot([p[0] for p in pts], [p[1] for p in pts], label=run["timing"], linewidth=0.8)
    a.set_yscale("log")
    a.set_xlabel("time since the server started (s)")
    a.set_ylabel("step time (ms)")
    a.set_title("first %d s: startup captures, in-step captures, eager steps" % horizon, fontsize=9)
    a.legend(fontsize=8)
    names = [r["timing"] for r in runs]
    x = range(len(runs))
    width = 0.4
    b.bar([i - width / 2 for i in x], [r["ttft_first_mean_seconds"] for r in runs], width, label="TTFT, first requests (s)")
    b.bar([i + width / 2 for i in x], [r["itl_p99_ms"] / 1e3 for r in runs], width, label="ITL p99 (s)")
    b.set_xticks(list(x))
    b.set_xticklabels(names)
    b.legend(fontsize=8)
    b.set_title("latency by capture timing", fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=90)


def main(argv):
    if len(argv) < 3:
        print("usage: plot_simulation.py RUN.json [RUN.json ...] OUT.png", file=sys.stderr)
        return 2
    inputs, out = argv[1:-1], argv[-1]
    data = []
    for path in inputs:
        with open(path) as f:
            data.append(json.load(f))
    if not need_matplotlib():
        return 3
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    if len(data) == 1 and len(data[0]["runs"]) > 1:
        timing_figure(plt, data[0], out)
        return 0
    fig, axes = plt.subplots(len(data), 2, figsize=(11, 3 * len(data)), squeeze=False)
    for row, d in zip(axes, data):
        scheduler_row(row, d, d["runs"][0])
    for ax in axes[-1]:
        ax.set_xlabel("time (s)")
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
