#!/usr/bin/env python3
"""Draws a serve_demo run: KV-cache usage, running and waiting requests over serving time.

    python3 plot.py RUN.json RUN.png        (serve_demo --plot RUN.png calls this)

RUN.json is what `serve_demo --json` writes. Needs matplotlib (Debian: python3-matplotlib).
"""
import json
import sys


def main(argv):
    if len(argv) != 3:
        print("usage: plot.py RUN.json OUT.png", file=sys.stderr)
        return 2
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator
    except ImportError:
        print("plot.py: error: matplotlib is missing (Debian: apt-get install python3-matplotlib)", file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        run = json.load(f)
    steps = run["steps"]
    if not steps:
        print("plot.py: error: the run has no steps", file=sys.stderr)
        return 1
    t = [s["t"] for s in steps]
    blocks = run["config"]["kv_blocks"]
    live = [100.0 * s["kv_live_blocks"] / blocks for s in steps]
    held = [100.0 * (s["kv_live_blocks"] + s["kv_cached_blocks"]) / blocks for s in steps]
    running = [s["running"] for s in steps]
    waiting = [s["waiting"] for s in steps]
    preempted = [s["t"] for s in steps if s["preempted"] > 0]

    fig, (kv, reqs) = plt.subplots(2, 1, sharex=True, figsize=(10, 6))
    kv.fill_between(t, live, held, step="post", color="tab:blue", alpha=0.2, label="cached (evictable)")
    kv.step(t, live, where="post", color="tab:blue", label="live")
    kv.set_ylabel("KV blocks used (%)")
    kv.set_ylim(0, 105)
    kv.set_title("{} backend: {} KV blocks, {} chats, {} requests".format(
        run["config"]["backend"], blocks, run["report"]["conversations"], run["report"]["requests"]))
    kv.legend(loc="lower right")
    reqs.step(t, running, where="post", color="tab:green", label="running")
    reqs.step(t, waiting, where="post", color="tab:red", label="waiting")
    for x in preempted:
        reqs.axvline(x, color="tab:orange", alpha=0.3, linewidth=0.8)
    if preempted:
        reqs.plot([], [], color="tab:orange", alpha=0.6, label="preemption")
    reqs.yaxis.set_major_locator(MaxNLocator(integer=True))
    reqs.set_ylabel("requests")
    reqs.set_xlabel("serving time (s)")
    reqs.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(argv[2], dpi=100)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
