"""PNG charts with matplotlib (Debian's python3-matplotlib). Every function returns the file
name it wrote, or None when there was nothing to draw or matplotlib is missing."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter
    AVAILABLE = True
except ImportError:  # the report then says charts are missing
    AVAILABLE = False

Json = dict[str, Any]  # a decoded JSON document


def parse_hgrm(path: str) -> list[tuple[float, float, int]]:
    """[(value, percentile 0..1, total count)] of an .hgrm percentile distribution file."""
    rows = []
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) < 3 or line.startswith("#"):
                    continue
                try:
                    rows.append((float(parts[0]), float(parts[1]), int(parts[2])))
                except ValueError:
                    continue
    except OSError:
        pass
    return rows


def _save(fig: Any, out_dir: str, name: str) -> str:
    path = os.path.join(out_dir, name)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return name


def _rates(series: list[Json], key_fn: Callable[[Json], float | None]) -> list[tuple[float, float]]:
    """[(t, rate)] from cumulative counts."""
    out = []
    prev = None
    for row in series:
        v = key_fn(row)
        if v is None:
            continue
        if prev is not None and row["t"] > prev[0]:
            out.append((row["t"], (v - prev[1]) / (row["t"] - prev[0])))
        prev = (row["t"], v)
    return out


def percentile_axis(ax: Any) -> None:
    """x axis of 1/(1-p) on a log scale labelled as percentiles (HdrHistogram's plot)."""
    ax.set_xscale("log")
    ticks = [1, 2, 10, 100, 1000, 10000, 100000]
    labels = ["0%", "50%", "90%", "99%", "99.9%", "99.99%", "99.999%"]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(
        lambda x, _: labels[ticks.index(x)] if x in ticks else ""))
    ax.set_xlabel("percentile")


def finish_latency_chart(fig: Any, ax: Any, drew: bool, title: str, out_dir: str, name: str,
                         caption: str, made: list[tuple[str, str]]) -> None:
    """Percentile x axis, log ms y axis, grid and legend; saves the chart as `name` and adds
    (name, caption) to `made` when a curve was drawn, else drops the figure."""
    if not drew:
        plt.close(fig)
        return
    percentile_axis(ax)
    ax.set_yscale("log")
    ax.set_ylabel("ms")
    ax.set_title(title)
    ax.grid(alpha=.3, which="both")
    ax.legend(fontsize="small")
    made.append((_save(fig, out_dir, name), caption))


def finish_time_chart(fig: Any, ax: Any, ylabel: str, title: str, out_dir: str, name: str,
                      caption: str, made: list[tuple[str, str]]) -> None:
    """x axis of seconds in the measured phase, grid and legend; saves the chart as `name` and
    adds (name, caption) to `made`."""
    ax.set_xlabel("seconds since the measured phase started")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=.3)
    ax.legend(fontsize="small")
    made.append((_save(fig, out_dir, name), caption))


def latency_curve(ax: Any, rows: list[tuple[float, float, int]], label: str,
                  **kw: Any) -> bool:
    pts = [(1.0 / (1.0 - p), v) for v, p, _ in rows if p < 1.0]
    if not pts:
        return False
    ax.plot([x for x, _ in pts], [y for _, y in pts], label=label, **kw)
    return True


def run_charts(out_dir: str, worker: Json | None, smp_rows: list[Json], topic_rows: list[Json],
               summary: Json) -> list[tuple[str, str]]:
    """The charts of one run directory; returns [(file, caption)]."""
    if not AVAILABLE:
        return []
    made = []
    series = (worker or {}).get("timeseries", [])
    apps = sorted({a for row in series for a in row.get("applications", {})})
    if series:
        fig, ax = plt.subplots(figsize=(9, 4))
        pub = _rates(series, lambda r: r.get("published"))
        ax.plot([t for t, _ in pub], [v for _, v in pub], label="published", lw=2)
        for a in apps:
            d = _rates(series, lambda r, a=a: r.get("applications", {}).get(a, {}).get(
                "delivered"))
            ax.plot([t for t, _ in d], [v for _, v in d], label="delivered %s" % a)
        finish_time_chart(fig, ax, "messages/s", "Throughput", out_dir,
                          "throughput.png", "throughput over time", made)

        fig, ax = plt.subplots(figsize=(9, 4))
        for a in apps:
            pts = [(r["t"], r["applications"][a]["backlog"]) for r in series
                   if a in r.get("applications", {})]
            ax.plot([t for t, _ in pts], [v for _, v in pts], label="%s (load generator)" % a)
        subs = sorted({(r["topic"], r["subscription"]) for r in topic_rows if r["subscription"]})
        by_sub = {}
        for r in topic_rows:
            if r["subscription"] and r.get("msgBacklog") is not None:
                by_sub.setdefault(r["subscription"], {}).setdefault(r["t"], 0)
                by_sub[r["subscription"]][r["t"]] += r["msgBacklog"]
        for sub, pts in sorted(by_sub.items()):
            ts = sorted(pts)
            ax.plot(ts, [pts[t] for t in ts], ls="--", label="%s (broker stats)" % sub)
        title = "Backlog per application" + ("" if subs else " (broker topic stats n/a)")
        finish_time_chart(fig, ax, "messages", title, out_dir, "backlog.png", "backlog over time",
                          made)

        fig, ax = plt.subplots(figsize=(9, 4))
        ax.plot([r["t"] for r in series], [r.get("publish_p99_ms") for r in series],
                label="publish p99", lw=2)
        for a in apps:
            ax.plot([r["t"] for r in series],
                    [r["applications"].get(a, {}).get("e2e_p99_ms") for r in series],
                    label="end-to-end p99 %s" % a)
        ax.set_yscale("log")
        finish_time_chart(fig, ax, "ms (per-second interval)", "Latency over time", out_dir,
                          "latency-over-time.png", "p99 latency per second", made)

    fig, ax = plt.subplots(figsize=(9, 4.5))
    drew = latency_curve(ax, parse_hgrm(os.path.join(out_dir, "publish.hgrm")), "publish", lw=2)
    for a in apps or [a["name"] for a in summary.get("applications", [])]:
        drew |= latency_curve(ax, parse_hgrm(os.path.join(out_dir, "e2e-%s.hgrm" % a)),
                              "end-to-end %s" % a)
    finish_latency_chart(fig, ax, drew, "Latency by percentile (measured phase)", out_dir,
                         "latency-percentiles.png", "latency by percentile", made)

    cpu = [r for r in smp_rows if r.get("broker_cpu_pct") not in (None, "")]
    if cpu:
        fig, ax = plt.subplots(figsize=(9, 4))
        ax.plot([r["t"] for r in cpu], [r["broker_cpu_pct"] for r in cpu], label="broker CPU %")
        lg = [r for r in smp_rows if r.get("loadgen_cpu_pct") not in (None, "")]
        ax.plot([r["t"] for r in lg], [r["loadgen_cpu_pct"] for r in lg],
                label="load generator CPU %")
        ax.set_ylabel("% of one core")
        ax.set_xlabel("seconds since the measured phase started")
        ax2 = ax.twinx()
        ax2.plot([r["t"] for r in smp_rows], [r["rss_mb"] for r in smp_rows], color="grey",
                 ls=":", label="broker RSS MB")
        ax2.set_ylabel("MB")
        ax.set_title("CPU and memory")
        ax.grid(alpha=.3)
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = ax2.get_legend_handles_labels()
        ax.legend(h1 + h2, l1 + l2, fontsize="small", loc="upper left")
        made.append((_save(fig, out_dir, "cpu.png"), "broker and load generator CPU, broker RSS"))

    threads = list((summary.get("threads") or {}).items())[:24]
    if threads:
        fig, ax = plt.subplots(figsize=(9, max(2.5, 0.3 * len(threads) + 1)))
        names = [n for n, _ in threads][::-1]
        ax.barh(names, [v for _, v in threads][::-1])
        ax.set_xlabel("% of one core (measured phase)")
        ax.set_title("Broker CPU by thread")
        ax.grid(alpha=.3, axis="x")
        made.append((_save(fig, out_dir, "threads.png"), "broker CPU by thread"))
    return made


def ab_charts(out_dir: str, variants: list[tuple[str, list[Json], list[str]]]
              ) -> list[tuple[str, str]]:
    """Comparison charts. variants: [(label, [run summaries], [run dirs])] of valid runs."""
    if not AVAILABLE or not variants:
        return []
    from . import summary as summ
    made = []
    shown = [m for m in summ.MEASURES
             if any(summ.measure(s, m[0]) is not None for _, runs, _ in variants for s in runs)]
    if not shown:  # no valid run measured anything
        return []
    cols = 3
    rows = (len(shown) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(12, 3 * rows))
    for ax, (path, label, unit, better) in zip(axes.flat, shown):
        for i, (_vlabel, runs, _) in enumerate(variants):
            vals = [summ.measure(s, path) for s in runs]
            vals = [v for v in vals if v is not None]
            if not vals:
                continue
            mean = sum(vals) / len(vals)
            ax.bar(i, mean, color="C%d" % i, alpha=.7)
            ax.errorbar(i, mean, yerr=[[mean - min(vals)], [max(vals) - mean]], color="k",
                        capsize=4)
            ax.scatter([i] * len(vals), vals, color="k", s=8, zorder=3)
        ax.set_xticks(range(len(variants)))
        ax.set_xticklabels([v[0] for v in variants], fontsize="small")
        ax.set_title("%s (%s, %s is better)" % (label, unit, better), fontsize="small")
        ax.grid(alpha=.3, axis="y")
    for ax in list(axes.flat)[len(shown):]:
        ax.axis("off")
    made.append((_save(fig, out_dir, "ab-measures.png"), "each measure: mean, min-max, runs"))

    fig, ax = plt.subplots(figsize=(9, 4.5))
    drew = False
    for i, (vlabel, _, dirs) in enumerate(variants):
        for j, d in enumerate(dirs):
            drew |= latency_curve(ax, parse_hgrm(os.path.join(d, "e2e.hgrm")),
                                  vlabel if j == 0 else None, color="C%d" % i, alpha=.8)
            latency_curve(ax, parse_hgrm(os.path.join(d, "publish.hgrm")),
                          vlabel + " publish" if j == 0 else None, color="C%d" % i, ls=":",
                          alpha=.8)
    finish_latency_chart(fig, ax, drew,
                         "Latency by percentile: end-to-end (solid), publish (dotted)", out_dir,
                         "ab-latency.png", "latency by percentile, A/B", made)

    import json
    fig, ax = plt.subplots(figsize=(9, 4))
    for i, (vlabel, _, dirs) in enumerate(variants):
        for j, d in enumerate(dirs):
            try:
                with open(os.path.join(d, "worker-result.json")) as f:
                    series = json.load(f).get("timeseries", [])
            except (OSError, ValueError):
                continue
            pub = _rates(series, lambda r: r.get("published"))
            ax.plot([t for t, _ in pub], [v for _, v in pub], color="C%d" % i,
                    label=vlabel if j == 0 else None, alpha=.8)
    finish_time_chart(fig, ax, "published messages/s", "Throughput over time, A/B", out_dir,
                      "ab-throughput.png", "throughput over time, A/B", made)
    return made


def sweep_charts(out_dir: str, points: list[tuple[str, list[Json]]], key: str
                 ) -> list[tuple[str, str]]:
    """Measures as curves over the swept value. points: [(value label, [summaries])]."""
    if not AVAILABLE or not points:
        return []
    from . import summary as summ
    shown = [m for m in summ.MEASURES
             if any(summ.measure(s, m[0]) is not None for _, runs in points for s in runs)]
    if not shown:  # no valid run measured anything
        return []
    cols = 3
    rows = (len(shown) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(12, 3 * rows))
    xs = list(range(len(points)))
    for ax, (path, label, unit, better) in zip(axes.flat, shown):
        means, lo, hi = [], [], []
        for _, runs in points:
            vals = [v for v in (summ.measure(s, path) for s in runs) if v is not None]
            means.append(sum(vals) / len(vals) if vals else float("nan"))
            lo.append(min(vals) if vals else float("nan"))
            hi.append(max(vals) if vals else float("nan"))
        ax.plot(xs, means, marker="o")
        ax.fill_between(xs, lo, hi, alpha=.2)
        ax.set_xticks(xs)
        ax.set_xticklabels([p[0] for p in points], fontsize="small")
        ax.set_xlabel(key, fontsize="small")
        ax.set_title("%s (%s, %s is better)" % (label, unit, better), fontsize="small")
        ax.grid(alpha=.3)
    for ax in list(axes.flat)[len(shown):]:
        ax.axis("off")
    return [(_save(fig, out_dir, "sweep.png"), "measures over %s" % key)]


def seed_chart(out_dir: str, groups: list[tuple[str, list[tuple[str, Json | None]]]],
               ylabel: str, name: str, title: str) -> str | None:
    """Grouped bars on one axis: groups [(scenario, [(variant label, stats or None)])], each
    bar the mean with its min-max as an error bar (the seed table's A/B throughput chart)."""
    if not AVAILABLE or not groups:
        return None
    labels = [lbl for lbl, _ in groups[0][1]]
    fig, ax = plt.subplots(figsize=(max(6, 2.2 * len(groups)), 4.5))
    width = 0.8 / max(1, len(labels))
    drew = False
    for k, label in enumerate(labels):
        xs, means, lo, hi = [], [], [], []
        for g, (_, cells) in enumerate(groups):
            st = dict(cells).get(label)
            if not st:
                continue
            xs.append(g + (k - (len(labels) - 1) / 2) * width)
            means.append(st["mean"])
            lo.append(st["mean"] - st["min"])
            hi.append(st["max"] - st["mean"])
        if xs:
            ax.bar(xs, means, width, yerr=[lo, hi], capsize=3, label=label)
            drew = True
    if not drew:
        plt.close(fig)
        return None
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([g for g, _ in groups], rotation=15, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.set_ylim(bottom=0)
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, out_dir, name)


def load_balance_chart(out_dir: str, broker_rows: list[Json], lb: Json
                       ) -> tuple[str, str] | None:
    """Per-broker msg rate (in + out, the load report's) and CPU over time, the bundle moves
    (grey dashes at the old owner's release), the splits (red dots) and the target's check time
    (green). broker_rows: brokers.csv rows; lb: the summary's load_balance document."""
    if not AVAILABLE or not broker_rows:
        return None
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9, 6.5), sharex=True)
    for b in sorted({r["broker"] for r in broker_rows}):
        rs = [r for r in broker_rows if r["broker"] == b]
        rate = [(r["t"], (r["msg_rate_in"] or 0) + (r["msg_rate_out"] or 0)) for r in rs
                if r.get("msg_rate_in") is not None]
        ax1.plot([t for t, _ in rate], [v for _, v in rate], label=b)
        cpu = [(r["t"], r["cpu_pct"]) for r in rs if r.get("cpu_pct") is not None]
        ax2.plot([t for t, _ in cpu], [v for _, v in cpu], label=b)
    for ax in (ax1, ax2):
        for i, m in enumerate(lb.get("moves") or []):
            ax.axvline(m["t"], color="grey", ls="--", lw=0.8,
                       label="bundle moved" if i == 0 and ax is ax1 else None)
        for i, t in enumerate(lb.get("split_times_s") or []):
            ax.axvline(t, color="red", ls=":", lw=1,
                       label="bundle split" if i == 0 and ax is ax1 else None)
        if lb.get("check_at_s") is not None:
            ax.axvline(lb["check_at_s"], color="green", lw=1,
                       label="target checked" if ax is ax1 else None)
        ax.grid(alpha=.3)
    ax1.set_ylabel("msg/s in + out")
    ax1.set_title("Per-broker message rate (load report) and CPU")
    ax1.legend(fontsize="small", loc="upper right")
    ax2.set_ylabel("CPU, % of one core")
    ax2.set_xlabel("seconds since the measured phase started")
    return (_save(fig, out_dir, "load-balance.png"),
            "per-broker msg rate and CPU, bundle moves (dashed), splits (dotted), target check")
