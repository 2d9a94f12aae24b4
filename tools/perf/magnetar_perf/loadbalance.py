"""Several brokers and the load manager (issue 48): per-broker samples (CPU from /proc, the load
report's msg rates and bundles, the leader's pulsar_lb_* counters), and the analysis of them:
bundle moves, the balance target, the end-to-end p99 around each move, and the stored-message
check (every acknowledged message stored once)."""

from __future__ import annotations

import json
import statistics
import threading
import time
import urllib.request
from typing import Any

from . import procstat, sampler

Json = dict[str, Any]
LB_METRICS = ("pulsar_lb_unload_bundle_total", "pulsar_lb_unload_broker_total",
              "pulsar_lb_bundles_split_total")


def metric_sum(text: str, name: str) -> float | None:
    """The sum of a Prometheus text family's samples (any labels), None when absent."""
    total = None
    for line in text.splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        rest = line[len(name):]
        if rest[:1] not in ("{", " "):
            continue  # another family with this prefix
        try:
            v = float(rest.rsplit(None, 1)[-1])
        except ValueError:
            continue
        total = (total or 0.0) + v
    return total


def _get(url: str, timeout: float) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


class ClusterSampler:
    """Thread sampling every broker each interval: rows {t (monotonic), broker, cpu_s,
    msg_rate_in, msg_rate_out, bundles, <LB_METRICS>}; a failed request leaves its keys out."""

    def __init__(self, brokers: list[tuple[str, int | None, str]], interval: float) -> None:
        self.brokers = brokers
        self.interval = interval
        self.rows: list[Json] = []
        self.errors = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="cluster-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=30)

    def sample_once(self, now: float) -> None:
        timeout = max(0.5, self.interval)
        for name, pid, web in self.brokers:
            row: Json = {"t": now, "broker": name}
            if pid:
                try:
                    row["cpu_s"] = procstat.process_cpu_seconds(pid)
                except OSError:
                    pass
            try:
                rep = json.loads(_get(web + "/admin/v2/broker-stats/load-report", timeout))
                row["msg_rate_in"] = float(rep.get("msgRateIn") or 0)
                row["msg_rate_out"] = float(rep.get("msgRateOut") or 0)
                row["bundles"] = sorted(rep.get("bundles") or [])
            except Exception:  # noqa: BLE001 - a slow or failed sample is left out
                self.errors += 1
            try:
                text = _get(web + "/metrics", timeout).decode(errors="replace")
                for m in LB_METRICS:
                    v = metric_sum(text, m)
                    if v is not None:
                        row[m] = v
            except Exception:  # noqa: BLE001
                self.errors += 1
            with self._lock:
                self.rows.append(row)

    def _loop(self) -> None:
        next_t = time.monotonic()
        while not self._stop.is_set():
            self.sample_once(time.monotonic())
            next_t += self.interval
            self._stop.wait(max(0.0, next_t - time.monotonic()))


def stored_entries(web_url: str, topics: list[str]) -> tuple[int | None, str | None, Json]:
    """Sum of the topics' numberOfEntries (GET .../internalStats, redirected to the owner):
    unbatched, the messages stored; (None, why, ...) when a topic does not answer. Third: the
    documents by topic (for the run directory)."""
    total = 0
    docs = {}
    for t in topics:
        url = sampler.topic_rest_url(web_url, t, "internalStats")
        try:
            docs[t] = json.loads(_get(url, 30))
            total += int(docs[t].get("numberOfEntries"))
        except Exception as e:  # noqa: BLE001 - reported
            return None, "internalStats of %s: %s" % (t, e), docs
    return total, None, docs


# ---- analysis (pure functions over the rows, t in seconds since the measured phase started)

def by_broker(rows: list[Json]) -> dict[str, list[Json]]:
    out: dict[str, list[Json]] = {}
    for r in sorted(rows, key=lambda r: r["t"]):
        out.setdefault(r["broker"], []).append(r)
    return out


def broker_series(rows: list[Json]) -> dict[str, list[Json]]:
    """Per broker [{t, msg_rate (in + out), cpu_pct, bundles}] (cpu_pct from consecutive
    cpu_s; a row without a load report has msg_rate None)."""
    out = {}
    for b, rs in by_broker(rows).items():
        series = []
        prev = None
        for r in rs:
            p = {"t": r["t"], "msg_rate": None, "cpu_pct": None,
                 "bundles": len(r["bundles"]) if "bundles" in r else None}
            if "msg_rate_in" in r:
                p["msg_rate"] = r["msg_rate_in"] + r["msg_rate_out"]
            if prev is not None and "cpu_s" in r and "cpu_s" in prev and r["t"] > prev["t"]:
                p["cpu_pct"] = (r["cpu_s"] - prev["cpu_s"]) / (r["t"] - prev["t"]) * 100
            series.append(p)
            prev = r
        out[b] = series
    return out


def bundle_moves(rows: list[Json]) -> list[Json]:
    """Bundles that changed owner: [{t (the first sample its old owner no longer listed it),
    placed_t (the first its new owner listed it), bundle, from, to}], by time. A bundle first
    seen is not a move (a split's child or a first placement)."""
    owner: dict[str, str] = {}
    gone_at: dict[str, float] = {}
    moves = []
    times = sorted({r["t"] for r in rows})
    at: dict[float, list[Json]] = {}
    for r in rows:
        at.setdefault(r["t"], []).append(r)
    for t in times:
        listed: dict[str, str] = {}
        reported = set()
        for r in at[t]:
            if "bundles" not in r:
                continue
            reported.add(r["broker"])
            for bundle in r["bundles"]:
                listed.setdefault(bundle, r["broker"])
        for bundle, b in owner.items():
            if b in reported and bundle not in listed and bundle not in gone_at:
                gone_at[bundle] = t
        for bundle, b in sorted(listed.items()):
            old = owner.get(bundle)
            if old is not None and old != b:
                moves.append({"t": gone_at.get(bundle, t), "placed_t": t, "bundle": bundle,
                              "from": old, "to": b})
            owner[bundle] = b
            gone_at.pop(bundle, None)
    return sorted(moves, key=lambda m: m["t"])


def counter_events(rows: list[Json], metric: str) -> list[tuple[float, float]]:
    """[(t, increase)] whenever the sum over brokers of a counter (each broker's last value)
    grew: when the leader's unload or split counters moved."""
    last: dict[str, float] = {}
    out = []
    prev_total = None
    for t in sorted({r["t"] for r in rows}):
        for r in rows:
            if r["t"] == t and metric in r:
                last[r["broker"]] = r[metric]
        total = sum(last.values())
        if prev_total is not None and total > prev_total:
            out.append((t, total - prev_total))
        prev_total = total
    return out


def imbalance(series: dict[str, list[Json]], t_end: float, span: float) -> float | None:
    """The busiest broker's mean msg rate over (t_end - span, t_end] over the brokers' mean of
    the same (1.0: even); None without load or a broker without samples there."""
    means = []
    for pts in series.values():
        vals = [p["msg_rate"] for p in pts
                if t_end - span < p["t"] <= t_end and p["msg_rate"] is not None]
        if not vals:
            return None
        means.append(sum(vals) / len(vals))
    mean = sum(means) / len(means) if means else 0
    return max(means) / mean if mean > 0 else None


def load_start(series: dict[str, list[Json]]) -> float | None:
    """The first sample time at which a broker reported a msg rate above 0."""
    ts = [p["t"] for pts in series.values() for p in pts if (p["msg_rate"] or 0) > 0]
    return min(ts) if ts else None


def balance(series: dict[str, list[Json]], interval_s: float, intervals: int,
            target_pct: float, span: float, t_last: float) -> Json:
    """The target: intervals x interval_s after the load started (load_start), the busiest
    broker within target_pct of the brokers' mean (each broker's rate averaged over span). Also
    the ratio at the first sample with load, at the end (last span) and the time from which it
    stayed within target."""
    t_load = load_start(series)
    limit = 1 + target_pct / 100.0
    out: Json = {"interval_s": interval_s, "intervals": intervals, "target_pct": target_pct,
                 "span_s": span, "load_start_s": t_load, "check_at_s": None,
                 "ratio_at_start": None, "ratio_at_check": None,
                 "ratio_at_end": imbalance(series, t_last, span),
                 "within_target_from_s": None, "target_met": False}
    if t_load is None:
        return out
    check_t = t_load + intervals * interval_s
    out["check_at_s"] = check_t
    out["ratio_at_start"] = imbalance(series, t_load, 1e-6)
    out["ratio_at_check"] = imbalance(series, check_t, span) if check_t <= t_last else None
    within_since = None
    for t in sorted({p["t"] for pts in series.values() for p in pts if p["t"] > t_load}):
        if t > t_last:
            break
        r = imbalance(series, t, span)
        if r is not None and r <= limit:
            within_since = t if within_since is None else within_since
        else:
            within_since = None
    out["within_target_from_s"] = within_since
    out["target_met"] = out["ratio_at_check"] is not None and out["ratio_at_check"] <= limit
    return out


def _p99s(series: list[Json], lo: float, hi: float) -> list[float]:
    """Per-second end-to-end p99s (the worst application's) of the rows with lo < t <= hi."""
    out = []
    for r in series:
        if lo < r["t"] <= hi:
            vals = [a.get("e2e_p99_ms") for a in r.get("applications", {}).values()
                    if a.get("e2e_p99_ms")]
            if vals:
                out.append(max(vals))
    return out


def latency_windows(series: list[Json], moves: list[Json], window_s: float) -> Json:
    """For each move: the worst per-second end-to-end p99 in the window_s before it and after it
    (the worker's per-second p99s, the worst application); the baseline: the median per-second
    p99 of the seconds outside every move's windows."""
    rows = []
    for m in moves:
        before = _p99s(series, m["t"] - window_s, m["t"])
        after = _p99s(series, m["t"], m["t"] + window_s)
        rows.append(dict(m, p99_before_ms=max(before) if before else None,
                         p99_after_ms=max(after) if after else None))
    quiet = []
    for r in series:
        if all(abs(r["t"] - m["t"]) > window_s for m in moves):
            quiet.extend(_p99s([r], r["t"] - 1e-9, r["t"]))
    worst = [r["p99_after_ms"] for r in rows if r["p99_after_ms"] is not None]
    return {"window_s": window_s, "moves": rows,
            "p99_baseline_ms": statistics.median(quiet) if quiet else None,
            "p99_worst_after_move_ms": max(worst) if worst else None}


def relative(rows: list[Json], t0: float) -> list[Json]:
    return [dict(r, t=round(r["t"] - t0, 3)) for r in rows]


def shedding_interval_s(settings: dict[str, Any]) -> float:
    """loadBalancerSheddingIntervalMillisForTesting when above 0, else
    loadBalancerSheddingIntervalMinutes (Pulsar's default 1)."""
    ms = float(settings.get("loadBalancerSheddingIntervalMillisForTesting") or 0)
    if ms > 0:
        return ms / 1000.0
    return float(settings.get("loadBalancerSheddingIntervalMinutes") or 1) * 60


def summarize(rows: list[Json], worker: Json | None, cluster: Json, settings: Json,
              t0: float, stored: int | None) -> tuple[Json, list[str]]:
    """The summary's load_balance document and the problems that make the run invalid (a
    stored count other than the messages acknowledged: lost or duplicated)."""
    rel = relative(rows, t0)
    series = broker_series(rel)
    moves = bundle_moves(rel)
    interval = shedding_interval_s(settings)
    t_last = (worker or {}).get("timeseries", [{}])[-1].get("t", 0) if worker and \
        worker.get("timeseries") else max((r["t"] for r in rel), default=0)
    span = min(interval, 5.0)
    bal = balance(series, interval, int(cluster["targetIntervals"]),
                  float(cluster["targetPercent"]), span, t_last)
    lat = latency_windows((worker or {}).get("timeseries", []), moves,
                          float(cluster["windowSeconds"]))
    unloads = counter_events(rel, "pulsar_lb_unload_bundle_total")
    splits = counter_events(rel, "pulsar_lb_bundles_split_total")
    acked = (worker or {}).get("total_published")
    problems = []
    if stored is None:
        problems.append("the stored message count could not be read")
    elif acked is not None and stored != acked:
        problems.append("%d messages stored, %d acknowledged (%s)" % (
            stored, acked, "duplicates stored" if stored > acked else "messages lost"))
    doc = {"brokers": sorted(series), "shedding_interval_s": interval,
           "bundle_moves": len(moves), "unloads": sum(n for _, n in unloads),
           "unload_times_s": [t for t, _ in unloads],
           "splits": sum(n for _, n in splits), "split_times_s": [t for t, _ in splits],
           "stored_messages": stored, "acknowledged_messages": acked,
           **bal, **lat}
    return doc, problems
