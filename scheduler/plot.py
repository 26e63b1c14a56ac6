"""Draw a workload replay report (`scheduler.workload.replay`): cluster utilisation and queue shares over time, and
every job's wait (arrival → all pods bound) and run, as a PNG, or as a self-contained HTML page with inline SVG;
and the HyperNode tree with each HyperNode's occupancy (`scheduler.tierreport.occupancy`), as a PNG or SVG.

Optional: needs matplotlib (`pip install 'lahar[plot]'`); without it `PlotUnavailable` says how to get it.
"""

from __future__ import annotations

import html
import io
import json
from pathlib import Path
from typing import Any

__all__ = ["INSTALL_HINT", "PlotUnavailable", "figure", "tree_figure", "tree_layout", "write_html", "write_png",
           "write_tree"]

INSTALL_HINT = "plots need matplotlib: pip install 'lahar[plot]' (or pip install matplotlib)"
_GANTT_LIMIT = 120  # more jobs than this: wait vs arrival scatter instead of one bar per job


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed."""


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt
    except ImportError as e:  # pragma: no cover - exercised by monkeypatching the import in tests
        raise PlotUnavailable(INSTALL_HINT) from e
    return plt


def _steps(t: list[float], end: float) -> list[float]:
    """x for `where="post"` steps, with the last value held to the end of the replay."""
    return [*t, end]


def figure(report: dict[str, Any], *, title: str = "") -> Any:
    """A matplotlib Figure of the report: utilisation, queue shares, and per-job wait / run."""
    plt = _pyplot()
    tl = report["timeline"]
    jobs = report["jobs"]
    t = tl["t"]
    end = max([*t, *(j["finished_at"] or 0 for j in jobs)] or [1.0])
    x = _steps(t, end)
    gantt = len(jobs) <= _GANTT_LIMIT
    fig, axes = plt.subplots(3, 1, figsize=(11, 9 if not gantt else 7 + 0.12 * len(jobs)), sharex=True,
                             gridspec_kw={"height_ratios": [1, 1, 1.4 if not gantt else max(1.4, 0.06 * len(jobs))]})
    ax_u, ax_q, ax_j = axes

    for name, ys in tl["utilisation"].items():
        ax_u.step(x, [*(100 * y for y in ys), 100 * ys[-1]] if ys else [], where="post", label=name, linewidth=1.6)
    ax_u.set_ylabel("utilisation %")
    ax_u.set_ylim(0, 105)
    ax_u.legend(loc="upper right", fontsize=8, ncols=max(1, len(tl["utilisation"])))
    ax_u.set_title("cluster utilisation (requests of running pods / allocatable)", fontsize=10, loc="left")
    ax_u.grid(alpha=0.3)

    queues = list(tl["queue_share"])
    colours = {q: plt.cm.tab10(i % 10) for i, q in enumerate(queues)}
    if queues:
        ys = [[100 * v for v in tl["queue_share"][q]] + [100 * tl["queue_share"][q][-1]] for q in queues]
        ax_q.stackplot(x, *ys, labels=queues, step="post", colors=[colours[q] for q in queues], alpha=0.8)
        ax_q.legend(loc="upper right", fontsize=8, ncols=max(1, len(queues)))
    ax_q.set_ylabel("dominant share %")
    ax_q.set_ylim(0, max(105, ax_q.get_ylim()[1]))
    ax_q.set_title("queue share over time (each queue's largest fraction of any resource, stacked)", fontsize=10,
                   loc="left")
    ax_q.grid(alpha=0.3)

    if gantt:
        for row, j in enumerate(jobs):
            arrival, bound, done = j["arrival"], j["bound_at"], j["finished_at"]
            c = colours.get(j["queue"], "grey")
            if bound is None:
                ax_j.barh(row, end - arrival, left=arrival, color="lightgrey", hatch="//", edgecolor="grey",
                          height=0.7)
                continue
            if bound > arrival:
                ax_j.barh(row, bound - arrival, left=arrival, color="lightgrey", edgecolor="grey", height=0.7)
            ax_j.barh(row, (done if done is not None else end) - bound, left=bound, color=c, height=0.7)
        ax_j.set_yticks(range(len(jobs)), [f"{j['name']} ({j['gang']}×)" for j in jobs], fontsize=7)
        ax_j.invert_yaxis()
        ax_j.set_title("jobs: waiting (grey, arrival → all pods bound) then running (queue colour); hatched: never "
                       "bound", fontsize=10, loc="left")
    else:
        for q in queues:
            pts = [(j["arrival"], j["wait_s"]) for j in jobs if j["queue"] == q and j["wait_s"] is not None]
            if pts:
                ax_j.scatter(*zip(*pts, strict=True), s=8, color=colours[q], label=q)
        ax_j.set_ylabel("wait s")
        ax_j.legend(loc="upper right", fontsize=8)
        ax_j.set_title("per-job wait (arrival → all pods bound) by arrival time", fontsize=10, loc="left")
    ax_j.set_xlabel("simulated time (s)")
    ax_j.grid(alpha=0.3, axis="x")

    s = report["summary"]
    w = s["wait_s"]
    util = ", ".join(f"{k} {100 * v:.0f}%" for k, v in s["mean_utilisation"].items() if v is not None)
    head = title or "lahar simulate --workload"
    fig.suptitle(f"{head}: {s['jobs']} jobs on {s['nodes']} nodes, {s['sessions']} sessions; wait mean "
                 f"{w['mean']} s, p90 {w['p90']} s; mean utilisation {util}", fontsize=10)
    fig.tight_layout()
    return fig


def write_png(report: dict[str, Any], path: str | Path, *, title: str = "", dpi: int = 110) -> Path:
    plt = _pyplot()
    fig = figure(report, title=title)
    try:
        fig.savefig(path, dpi=dpi)
    finally:
        plt.close(fig)
    return Path(path)


def write_html(report: dict[str, Any], path: str | Path, *, title: str = "") -> Path:
    """One self-contained page: the figure as inline SVG, the summary, and the report as JSON."""
    plt = _pyplot()
    fig = figure(report, title=title)
    buf = io.StringIO()
    try:
        fig.savefig(buf, format="svg")
    finally:
        plt.close(fig)
    svg = buf.getvalue()
    svg = svg[svg.find("<svg"):]
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title or 'lahar simulate')}"
            "</title><style>body{font-family:sans-serif;margin:1em} pre{background:#f6f6f6;padding:1em;"
            "overflow:auto}</style></head><body>"
            f"{svg}<h2>summary</h2><pre>{html.escape(json.dumps(report['summary'], indent=2))}</pre>"
            f"<details><summary>full report (JSON)</summary><pre>{html.escape(json.dumps(report, indent=1))}</pre>"
            "</details></body></html>")
    Path(path).write_text(page, encoding="utf-8")
    return Path(path)


def tree_layout(occupancy: dict[str, dict[str, Any]]) -> dict[str, tuple[float, int]]:
    """HyperNode → (x, tier): the lowest HyperNodes one unit apart in tree order, each parent centred over its
    children."""
    children: dict[str, list[str]] = {}
    for name, row in occupancy.items():
        children.setdefault(row["parent"], []).append(name)
    pos: dict[str, tuple[float, int]] = {}
    nxt = [0.0]

    def place(name: str) -> float:
        kids = sorted(children.get(name, []))
        if kids:
            xs = [place(k) for k in kids]
            x = (xs[0] + xs[-1]) / 2
        else:
            x = nxt[0]
            nxt[0] += 1.0
        pos[name] = (x, occupancy[name]["tier"])
        return x

    for root in sorted(children.get("", [])):
        place(root)
    return pos


def tree_figure(occ: dict[str, Any], *, title: str = "") -> Any:
    """A matplotlib Figure of the HyperNode tree: one box per HyperNode (highest tier on top), filled by the share
    of its resource in use, labelled with its name, used / capacity and busy nodes."""
    plt = _pyplot()
    rows = occ["hypernodes"]
    pos = tree_layout(rows)
    width = max(8.0, 1.5 * (max((x for x, _ in pos.values()), default=0) + 1))
    tiers = sorted({t for _, t in pos.values()})
    fig, ax = plt.subplots(figsize=(min(width, 40), 1.4 + 1.3 * len(tiers)))
    cmap = plt.cm.RdYlGn_r
    for name, (x, tier) in pos.items():
        r = rows[name]
        if r["parent"] in pos:
            px, pt = pos[r["parent"]]
            ax.plot([x, px], [tier + 0.25, pt - 0.25], color="grey", linewidth=0.8, zorder=1)
        share = r["used"] / r["capacity"] if r["capacity"] else 0.0
        ax.add_patch(plt.Rectangle((x - 0.45, tier - 0.25), 0.9, 0.5, facecolor=cmap(share), edgecolor="black",
                                   linewidth=0.8, zorder=2))
        ax.text(x, tier + 0.07, name, ha="center", va="center", fontsize=7, zorder=3)
        ax.text(x, tier - 0.12, f"{r['used']:g}/{r['capacity']:g} · {r['busy_nodes']}/{r['nodes']} busy",
                ha="center", va="center", fontsize=6, zorder=3)
    xs = [x for x, _ in pos.values()] or [0.0]
    ax.set_xlim(min(xs) - 0.6, max(xs) + 0.6)
    ax.set_ylim((tiers[0] if tiers else 1) - 0.6, (tiers[-1] if tiers else 1) + 0.6)
    ax.set_yticks(tiers, [f"tier {t}" for t in tiers])
    ax.set_xticks([])
    for side in ("top", "right", "bottom"):
        ax.spines[side].set_visible(False)
    ax.set_title(f"{title or 'HyperNode occupancy'}\n{occ['resource']} in use / capacity at the busiest moment, "
                 f"t={occ['t']:g} s (green: free, red: full)", fontsize=9, loc="left")
    fig.tight_layout()
    return fig


def write_tree(occ: dict[str, Any], path: str | Path, *, title: str = "", dpi: int = 110) -> Path:
    """The tree figure to `path`: SVG (text kept as text, so names can be searched) when it ends in .svg, else PNG."""
    plt = _pyplot()
    fig = tree_figure(occ, title=title)
    try:
        if str(path).lower().endswith(".svg"):
            with plt.rc_context({"svg.fonttype": "none"}):
                fig.savefig(path, format="svg")
        else:
            fig.savefig(path, dpi=dpi)
    finally:
        plt.close(fig)
    return Path(path)
