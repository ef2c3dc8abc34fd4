"""The report's plots (matplotlib, Agg backend, PNG). Each function draws one figure from
the run's figures and returns the file name it wrote. Fault windows recorded in
``samples.jsonl`` are shaded on every time axis."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from .stats import Stats, hottest_paths, lease_intervals  # noqa: E402

DPI = 110
plt.rcParams.update({
    "figure.figsize": (10, 4.2), "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True,
    "grid.alpha": 0.3, "font.size": 9, "axes.titlesize": 11, "axes.titleweight": "bold", "legend.fontsize": 8,
    "legend.frameon": False,
})


def _colors(names: list[str]) -> dict[str, Any]:
    cmap = plt.get_cmap("tab20")
    return {n: cmap(i % 20) for i, n in enumerate(sorted(names))}


def shade_faults(ax: Any, faults: list[dict[str, Any]], start_ns: int, end_s: float) -> None:
    """Shade each fault window (seconds from the run's start); a fault without an end is a
    line at its moment."""
    seen: set[str] = set()
    for fault in faults:
        t0 = (fault["time"] - start_ns) / 1e9
        label = fault["fault"] if fault["fault"] not in seen else None
        seen.add(fault["fault"])
        if fault.get("end"):
            ax.axvspan(t0, min((fault["end"] - start_ns) / 1e9, end_s), color="tab:red", alpha=0.12, lw=0, label=label)
        else:
            ax.axvline(t0, color="tab:red", alpha=0.5, lw=0.8, label=label)


def save(fig: Any, out: Path, name: str) -> str:
    fig.tight_layout()
    fig.savefig(out / name, dpi=DPI, pil_kwargs={"compress_level": 1})  # fast to write, a little larger
    plt.close(fig)
    return name


def latency_over_time(s: Stats, out: Path, faults: list[dict[str, Any]], start_ns: int) -> str:
    b = s.bins
    x = np.asarray(b.starts) + b.width_s / 2
    fig, ax = plt.subplots()
    for values, color, lw, label in ((b.max_ms, "tab:red", 0.9, "max"), (b.p99_ms, "tab:orange", 1.6, "p99"),
                                     (b.p50_ms, "tab:blue", 1.6, "p50")):
        ax.plot(x, [np.nan if v is None else v for v in values], color=color, lw=lw, label=label,
                alpha=0.7 if label == "max" else 1.0)
    ax.set_yscale("log")
    ax.set_xlim(0, s.duration_s)
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("latency (ms, log)")
    ax.set_title(f"Latency over time, all operations ({b.width_s:g} s bins)")
    shade_faults(ax, faults, start_ns, s.duration_s)
    ax.legend(loc="upper right", ncols=4)
    return save(fig, out, "latency.png")


def throughput_over_time(s: Stats, out: Path, faults: list[dict[str, Any]], start_ns: int) -> str:
    b = s.bins
    x = np.asarray(b.starts) + b.width_s / 2
    names = sorted(b.counts, key=lambda n: -sum(b.counts[n]))
    colors = _colors(names)
    fig, (ax, busy) = plt.subplots(2, 1, figsize=(10, 5.2), sharex=True, gridspec_kw={"height_ratios": [4, 1]})
    if names:
        rates = [np.asarray(b.counts[n]) / b.width_s for n in names]
        ax.stackplot(x, rates, labels=names, colors=[colors[n] for n in names], alpha=0.9, lw=0)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    else:
        ax.text(0.5, 0.5, "no operations completed", transform=ax.transAxes, ha="center", color="grey")
    ax.set_ylabel("operations / s")
    ax.set_title("Throughput over time by operation (stacked)")
    busy.bar(x, np.asarray(b.busy) / b.width_s, width=b.width_s * 0.9, color="tab:red", alpha=0.7)
    busy.set_ylim(bottom=0, top=max(1.0, max(b.busy, default=0) / b.width_s * 1.15))
    if not any(b.busy):
        busy.text(0.5, 0.5, "no store_busy answers", transform=busy.transAxes, ha="center", va="center", color="grey")
    busy.set_ylabel("store_busy / s")
    busy.set_xlabel("seconds since start")
    busy.set_xlim(0, s.duration_s)
    for a in (ax, busy):
        shade_faults(a, faults, start_ns, s.duration_s)
    return save(fig, out, "throughput.png")


def percentiles(s: Stats, out: Path) -> str:
    """Latency against 1/(1-p) on a log axis: the tail gets as much room as the median."""
    fig, ax = plt.subplots(figsize=(10, 4.8))
    names = sorted(s.latencies_ms, key=lambda n: -len(s.latencies_ms[n]))
    colors = _colors(names)
    reach = 1.0
    for name in names:
        v = np.sort(np.asarray(s.latencies_ms[name]))
        if v.size < 2:
            continue
        p = np.arange(v.size) / v.size
        ax.plot(1 / (1 - p), v, color=colors[name], lw=1.3, label=f"{name} ({v.size:,})")
        reach = max(reach, float(v.size))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ticks = [t for t in (1, 2, 10, 100, 1000, 10_000, 100_000, 1_000_000) if t <= reach * 1.01]
    ax.set_xticks(ticks)
    ax.set_xlim(1, max(reach, 10) * 1.2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda t, _: f"{100 * (1 - 1 / t):g}%"))
    ax.set_xlabel("percentile")
    ax.set_ylabel("latency (ms, log)")
    ax.set_title("Latency percentile distribution")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", ncols=2)
    return save(fig, out, "percentiles.png")


def ops_per_agent(s: Stats, out: Path, repo_of: dict[str, str]) -> str:
    f = s.fairness
    agents = list(f.ops_per_agent)
    counts = np.asarray([f.ops_per_agent[a] for a in agents])
    repos = list(dict.fromkeys(repo_of.values()))  # in the scenario's order
    colors = {r: plt.get_cmap("tab10")(i % 10) for i, r in enumerate(repos)}
    fig, ax = plt.subplots(figsize=(10, 3.8))
    ax.bar(agents, counts, color=[colors.get(repo_of.get(a, ""), "grey") for a in agents])
    handles = [Patch(color=c, label=f"repo {r}") for r, c in colors.items()]
    if counts.size:
        handles.append(ax.axhline(counts.mean(), color="black", lw=1, ls="--", label=f"mean {counts.mean():,.0f}"))
    ax.set_ylabel("operations")
    ax.set_title(f"Operations per agent  (Jain's index {f.jain:.3f}; fewest {f.fewest[0]} {f.fewest[1]:,}, "
                 f"most {f.most[0]} {f.most[1]:,})")
    ax.tick_params(axis="x", rotation=90 if len(agents) > 24 else 0, labelsize=7)
    if counts.size:
        ax.set_ylim(0, counts.max() * 1.2)  # headroom for the legend above the bars
    ax.legend(handles=handles, loc="upper center", ncols=len(handles))
    ax.grid(axis="x", visible=False)
    return save(fig, out, "agents.png")


def lease_timeline(events: list[Any], out: Path, wall_start: float, duration_s: float, n: int = 4,
                   window_s: float = 10.0, faults: list[dict[str, Any]] | None = None, start_ns: int = 0) -> str | None:
    """Who held the hottest paths, when: one row per path, one bar per holding (exclusive
    full height, shared half), over the first ``window_s`` seconds so bars stay readable."""
    hot = hottest_paths(events, n)
    if not hot:
        return None
    paths = [p for p, _ in hot]
    intervals = lease_intervals(events, paths)
    window = min(window_s, duration_s)
    # Only the sessions with a bar in the window need a colour; up to 60 distinct ones.
    sessions = sorted({iv[2] for ivs in intervals.values() for iv in ivs
                       if iv[1] - wall_start >= 0 and iv[0] - wall_start <= window})
    palette = [plt.get_cmap(name)(i) for name in ("tab20", "tab20b", "tab20c") for i in range(20)]
    color = {sid: palette[i % len(palette)] for i, sid in enumerate(sessions)}
    lane = {sid: i % 2 for i, sid in enumerate(sessions)}  # shared holders alternate halves of the row
    fig, ax = plt.subplots(figsize=(10, 0.8 + 0.75 * len(paths)))
    for row, path in enumerate(paths):
        for start, end, sid, mode, _grants in intervals[path]:
            s0, s1 = start - wall_start, end - wall_start
            if s1 < 0 or s0 > window:
                continue
            h = 0.8 if mode == "exclusive" else 0.38
            y = row - 0.4 if mode == "exclusive" else row - 0.4 + 0.42 * lane[sid]
            ax.broken_barh([(s0, s1 - s0)], (y, h), facecolors=color[sid], edgecolor="white", lw=0.4)
    ax.set_yticks(range(len(paths)))
    ax.set_yticklabels([f"{Path(p).parent.parent.name}/{Path(p).parent.name}/{Path(p).name}\n{g:,} grants"
                        for p, g in hot], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, window)
    shade_faults(ax, faults or [], start_ns, window)
    colours = (f"one colour per session, {len(sessions)} sessions" if len(sessions) <= len(palette) else
               f"{len(sessions)} sessions in {len(palette)} colours: a colour stands for several sessions")
    ax.set_xlabel(f"seconds since start ({colours}; full bars exclusive, half bars shared)")
    ax.set_title(f"Lease timeline, {len(paths)} hottest paths, first {window:g} s")
    ax.grid(axis="y", visible=False)
    return save(fig, out, "leases.png")


def wal_over_time(samples: list[dict[str, Any]], out: Path, faults: list[dict[str, Any]], start_ns: int,
                  duration_s: float) -> str | None:
    rows = [r for r in samples if r.get("kind") == "sample"]
    if not rows:
        return None
    t = [r["t"] for r in rows]
    fig, ax = plt.subplots(figsize=(10, 3.2))
    ax.plot(t, [r["wal_bytes"] / 2**20 for r in rows], color="tab:purple", lw=1.5, label="WAL size")
    ax.set_ylabel("WAL (MiB)")
    ax.set_xlabel("seconds since start")
    ax.set_ylim(bottom=0)
    ax2 = ax.twinx()
    ax2.step(t, [r["agents_alive"] for r in rows], where="post", color="tab:gray", lw=1, label="agent processes")
    ax2.set_ylabel("agent processes")
    ax2.set_ylim(0, max(r["agents_alive"] for r in rows) * 1.25 + 1)
    ax2.grid(False)
    ax.set_xlim(min(t[0], 0), max(t[-1], duration_s))
    shade_faults(ax, faults, start_ns, duration_s)
    ax.set_title("WAL size and live agent processes")
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    # Outside the axes, to the right of the second one's label: inside, it hid the line it names.
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], loc="upper left", bbox_to_anchor=(1.08, 1.0))
    return save(fig, out, "wal.png")


def postgres_over_time(samples: list[dict[str, Any]], out: Path, faults: list[dict[str, Any]], start_ns: int,
                       duration_s: float) -> str | None:
    """On PostgreSQL, in place of the WAL file's size: commits/s and WAL MiB/s above, the
    connections and the sessions waiting for the write lock below (sim/report/postgres.py)."""
    from .postgres import answered, rates

    rows = answered(samples)
    if len(rows) < 2:
        return None
    fig, (top, low) = plt.subplots(2, 1, figsize=(10, 5), sharex=True)
    commits, wal = rates(rows, "pg_commits"), rates(rows, "pg_wal_bytes")
    top.plot([t for t, _ in commits], [v for _, v in commits], color="tab:blue", lw=1.2, label="commits/s")
    top.set_ylabel("commits/s")
    top2 = top.twinx()
    top2.plot([t for t, _ in wal], [v / 2**20 for _, v in wal], color="tab:purple", lw=1, label="WAL MiB/s")
    top2.set_ylabel("WAL MiB/s")
    top2.grid(False)
    top.set_title("PostgreSQL: commits and WAL written; connections and write-lock waiters")
    t = [r["t"] for r in rows]
    low.step(t, [r["pg_connections"] for r in rows], where="post", color="tab:gray", lw=1.2, label="connections")
    low.step(t, [r["pg_lock_waits"] for r in rows], where="post", color="tab:red", lw=1.2,
             label="waiting for the write lock")
    low.set_xlabel("seconds since start")
    low.set_ylim(bottom=0)
    for ax in (top, low):
        ax.set_xlim(min(t[0], 0), max(t[-1], duration_s))
        shade_faults(ax, faults, start_ns, duration_s)
    handles = [h for ax in (top, top2) for h in ax.get_legend_handles_labels()[0]]
    top.legend(handles, [h.get_label() for h in handles], loc="upper left", bbox_to_anchor=(1.08, 1.0))
    low.legend(loc="upper left", bbox_to_anchor=(1.08, 1.0))
    return save(fig, out, "postgres.png")
