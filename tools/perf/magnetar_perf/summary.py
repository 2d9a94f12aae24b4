"""summary.json of a run: the measures other tools and CI read, and their check.

The keys in REQUIRED are the contract with CI and compare runs; more keys may be added, none
removed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import procstat
from . import storm as storm_mod

if TYPE_CHECKING:
    from .brokers import Broker
    from .sampler import Sampler
    from .scenario import Scenario
    from .storm import Storm

# The broker settings that bound its memory (docs/memory-limits.md): their sum is the bound that
# broker.rssBoundBaseMb is added to.
MEMORY_LIMIT_KEYS = ("maxMessagePublishBufferSizeInMB", "managedLedgerCacheSizeMB")

PERCENTILES = ("p50", "p90", "p99", "p999", "max")
APP_KEYS = ("name", "unique", "duplicates", "ordering_violations", "invalid", "missing",
            "catch_up_s")
REQUIRED = ("valid", "scenario", "measured_messages", "published_msgs_per_s",
            "delivered_msgs_per_s", "drain_s", "broker_cpu_s_per_million", "broker_peak_rss_mb",
            "loadgen_cpu_s_per_million", "publish_latency_ms", "e2e_latency_ms", "threads",
            "applications")

# Per-application keys of a transforming application (role "transform") and of its output's
# verifier (role "verify"), when the worker wrote them.
TRANSFORM_APP_KEYS = ("transactions", "batches_committed", "transactions_aborted",
                      "batch_latency_ms", "aborted_visible", "not_derived")

# Measures of a comparison: (key path, label, unit, better direction).
MEASURES = [
    ("published_msgs_per_s", "published", "msg/s", "higher"),
    ("delivered_msgs_per_s", "delivered", "msg/s", "higher"),
    ("drain_s", "drain time", "s", "lower"),
    ("broker_cpu_s_per_million", "broker CPU per 1M msgs", "s", "lower"),
    ("broker_cpu_pct", "broker CPU", "% of a core", "lower"),
    ("broker_peak_rss_mb", "broker peak RSS", "MB", "lower"),
    ("bookies_cpu_s_per_million", "bookies' CPU per 1M msgs", "s", "lower"),
    ("zookeeper_cpu_s_per_million", "ZooKeeper CPU per 1M msgs", "s", "lower"),
    ("loadgen_cpu_s_per_million", "load generator CPU per 1M msgs", "s", "lower"),
    ("publish_latency_ms.p50", "publish latency p50", "ms", "lower"),
    ("publish_latency_ms.p99", "publish latency p99", "ms", "lower"),
    ("e2e_latency_ms.p50", "end-to-end latency p50", "ms", "lower"),
    ("e2e_latency_ms.p99", "end-to-end latency p99", "ms", "lower"),
    ("e2e_latency_ms.p999", "end-to-end latency p99.9", "ms", "lower"),
    ("other_processes_cpu_pct", "other processes' CPU (noise)", "% of a core", "lower"),
    ("storm.recovery_s", "publish rate back after the storm", "s", "lower"),
]


def measure(summary: dict[str, Any], path: str) -> float | None:
    node = summary
    for k in path.split("."):
        if not isinstance(node, dict) or k not in node:
            return None
        node = node[k]
    return node if isinstance(node, (int, float)) and not isinstance(node, bool) else None


def latency(doc: dict[str, Any] | None) -> dict[str, Any]:
    return {k: doc.get(k) for k in PERCENTILES} if doc else {k: None for k in PERCENTILES}


def memory_summary(limits: dict[str, float] | None, peak_mb: float | None,
                   base_mb: float | None) -> tuple[dict[str, Any] | None, str | None]:
    """(memory_limits entry, problem or None): peak RSS against the configured limits."""
    if not limits:
        return None, None
    total = sum(max(0.0, v) for v in limits.values())
    out: dict[str, Any] = dict(limits, sum_mb=total)
    if peak_mb is not None:
        out["peak_rss_over_limits_mb"] = round(peak_mb - total, 1)
    problem = None
    if base_mb is not None:
        out["bound_mb"] = total + base_mb
        if limits.get("maxMessagePublishBufferSizeInMB", 0) < 0:
            problem = "broker.rssBoundBaseMb needs a bounded maxMessagePublishBufferSizeInMB"
        elif peak_mb is None:
            problem = "broker peak RSS unknown, so broker.rssBoundBaseMb cannot be checked"
        elif peak_mb > total + base_mb:
            problem = ("broker peak RSS %.1f MB above its bound %.1f MB (limits %.1f + base %.1f)"
                       % (peak_mb, total + base_mb, total, base_mb))
    return out, problem


def aux_measures(aux_cpu: dict[str, float], measured: int,
                 measured_s: float | None) -> dict[str, Any]:
    """{group}_cpu_s, {group}_cpu_s_per_million and {group}_cpu_pct of each helper process group
    (bookies, zookeeper) over the measured phase."""
    out: dict[str, Any] = {}
    for group, cpu in sorted(aux_cpu.items()):
        out["%s_cpu_s" % group] = cpu
        out["%s_cpu_s_per_million" % group] = cpu / measured * 1e6 if measured else None
        out["%s_cpu_pct" % group] = cpu / measured_s * 100 if measured_s else None
    return out


def storm_summary(storm: Storm | None, worker: dict[str, Any]) -> dict[str, Any] | None:
    """The storm's figures: when, how long the unloads took, the publish rate's recovery."""
    if storm is None:
        return None
    out = storm.result(worker.get("measured_start_ns"))
    out["dedup_receipts"] = worker.get("dedup_receipts")
    timeline = worker.get("receipt_timeline")
    if out.get("offset_s") is not None and timeline is not None:
        out.update(storm_mod.recovery(timeline, worker.get("receipt_timeline_bucket_ms", 10),
                                      out["offset_s"]))
    return out


def build(scenario: Scenario, worker: dict[str, Any] | None, sampler: Sampler, broker: Broker,
          worker_exit: int | None, problems: list[str], worker_log: str = "",
          storm: Storm | None = None, limits: dict[str, float] | None = None) -> dict[str, Any]:
    """The summary dict. worker: worker-result.json (None if missing); problems: launcher-side
    reasons the run is invalid (list, extended here); storm: the run's reconnect storm; limits:
    the broker's MEMORY_LIMIT_KEYS (MB) when known."""
    problems = list(problems)
    if worker is None:
        last = [line for line in worker_log.splitlines() if line.strip()][-1:]
        problems.append("the load generator wrote no results (exit code %s)%s" % (
            worker_exit, ": " + last[0] if last else ""))
        worker = {}
    else:
        problems.extend(worker.get("errors", []))
        if worker_exit not in (0, 1):
            problems.append("the load generator exited with %s" % worker_exit)

    start = sampler.snapshots.get("measured_start", {}) if sampler else {}
    end = sampler.snapshots.get("measured_end", {}) if sampler else {}
    measured = worker.get("measured_messages", 0) or 0
    measured_s = (end["t"] - start["t"]) if "t" in start and "t" in end else None
    broker_cpu = None
    if "cpu_s" in start and "cpu_s" in end:
        broker_cpu = end["cpu_s"] - start["cpu_s"]
    elif broker is not None and broker.pid:
        problems.append("broker CPU of the measured phase could not be read")
    threads = {}
    if "threads" in start and "threads" in end and measured_s:
        threads = procstat.thread_cpu_by_name(start["threads"], end["threads"], measured_s)
    # The broker's helper processes (magnetar-bk: bookies, ZooKeeper), apart from its own CPU.
    aux_cpu = {g: end["aux_cpu_s"][g] - v for g, v in start.get("aux_cpu_s", {}).items()
               if g in end.get("aux_cpu_s", {})}
    other_pct = None
    if "machine_busy_s" in start and "machine_busy_s" in end and measured_s:
        other = end["machine_busy_s"] - start["machine_busy_s"]
        other -= broker_cpu or 0.0
        if "worker_cpu_s" in start and "worker_cpu_s" in end:
            other -= end["worker_cpu_s"] - start["worker_cpu_s"]
        other -= sum(aux_cpu.values())
        other_pct = max(0.0, other / measured_s * 100)
    loadgen_threads = {}
    if "worker_threads" in start and "worker_threads" in end and measured_s:
        loadgen_threads = procstat.thread_cpu_by_name(start["worker_threads"],
                                                      end["worker_threads"], measured_s)

    apps = []
    e2e_by_app = {}
    for a in worker.get("applications", []):
        row = {k: a.get(k) for k in APP_KEYS}
        row["role"] = a.get("role", "consume")
        for k in TRANSFORM_APP_KEYS:
            if k in a:
                row[k] = a[k]
        row["join_s"] = a.get("join_s")
        row["subscribe_s"] = a.get("subscribe_s")
        row["e2e_latency_ms"] = latency(a.get("e2e_latency_ms"))
        row["delivered_s"] = a.get("delivered_s")
        row["permit_violations"] = a.get("permit_violations")
        apps.append(row)
        e2e_by_app[a.get("name")] = row["e2e_latency_ms"]

    peak_kb = sampler.peak_hwm_kb if sampler else 0
    peak_mb = round(peak_kb / 1024.0, 1) if peak_kb else None
    mem, mem_problem = memory_summary(limits, peak_mb, scenario.data["broker"]["rssBoundBaseMb"])
    if mem_problem:
        problems.append(mem_problem)
    storm_doc = storm_summary(storm, worker)
    if storm_doc is not None:
        if not storm_doc["happened"]:
            problems.append("the storm did not happen (the measured phase ended first?)")
        elif storm_doc.get("recovery_s") is None:
            problems.append("the publish rate did not recover after the storm")
    s = {
        "valid": not problems,
        "invalid_reasons": problems,
        "scenario": scenario.name,
        "broker": "external" if getattr(broker, "kind", None) == "external"
        else scenario.data["broker"]["kind"],
        "measured_messages": measured,
        "warmup_messages": worker.get("warmup_messages"),
        "measured_s": measured_s,
        "publish_s": worker.get("publish_s"),
        "published_msgs_per_s": worker.get("published_msgs_per_s"),
        "delivered_msgs_per_s": worker.get("delivered_msgs_per_s"),
        "drain_s": worker.get("drain_s"),
        "broker_cpu_s": broker_cpu,
        "broker_cpu_s_per_million": (broker_cpu / measured * 1e6)
        if broker_cpu is not None and measured else None,
        "broker_cpu_pct": (broker_cpu / measured_s * 100) if broker_cpu is not None and measured_s
        else None,
        "broker_peak_rss_mb": peak_mb,
        "memory_limits_mb": mem,
        **aux_measures(aux_cpu, measured, measured_s),
        "storm": storm_doc,
        "dedup_receipts": worker.get("dedup_receipts"),
        "loadgen_cpu_s": worker.get("loadgen_cpu_s"),
        "loadgen_cpu_s_per_million": worker.get("loadgen_cpu_s_per_million"),
        "publish_latency_ms": latency(worker.get("publish_latency_ms")),
        "e2e_latency_ms": latency(worker.get("e2e_latency_ms")),
        "e2e_latency_ms_by_application": e2e_by_app,
        "threads": {k: round(v, 1) for k, v in threads.items()},
        "loadgen_threads": {k: round(v, 1) for k, v in loadgen_threads.items()},
        "applications": apps,
        "transform": worker.get("transform"),
        "connect_s": worker.get("connect_s"),
        "send_errors": worker.get("send_errors"),
        "topic_stats_note": sampler.stats_note if sampler else None,
        # CPU the rest of the machine used during the measured phase (% of one core): other
        # processes competing with broker and load generator make every figure noisier.
        "other_processes_cpu_pct": round(other_pct, 1) if other_pct is not None else None,
        "cpus": procstat.cpu_count(),
    }
    return s


def check_output(app: dict[str, Any]) -> list[str]:
    """Problems of a verifier's application row (role "verify", iot-telemetry-txn): its output
    must hold every input exactly once, in order, and nothing of an aborted transaction, whatever
    the run's valid flag says."""
    if app.get("role") != "verify":
        return []
    out = []
    for k, what in (("duplicates", "duplicate outputs"),
                    ("aborted_visible", "outputs of aborted transactions read"),
                    ("not_derived", "outputs not derived"),
                    ("ordering_violations", "output ordering violations"),
                    ("missing", "inputs without output")):
        v = app.get(k)
        if not isinstance(v, int) or v != 0:
            out.append("verifier %s: %s: %r" % (app.get("name"), what, v))
    return out


def check_balance_target(lb: dict[str, Any] | None) -> list[str]:
    """Problems when a run with several brokers did not meet its balance target (the busiest
    broker's msg rate over the mean at the check, load_balance.ratio_at_check, at most
    1 + target_pct / 100), or has no load_balance section at all."""
    if not isinstance(lb, dict):
        return ["no load_balance section (a run with cluster.brokers > 1 has one)"]
    if lb.get("target_met") is not True:
        return ["load_balance: target not met: busiest/mean %r at the check (limit %r %%)"
                % (lb.get("ratio_at_check"), lb.get("target_pct"))]
    return []


def check_load_balance(lb: dict[str, Any] | None) -> list[str]:
    """Problems of a run with several brokers (load_balance): the figures present, every
    acknowledged message stored once. The balance target is reported, not required here."""
    if lb is None:
        return []
    out = []
    for k in ("bundle_moves", "unloads", "splits", "ratio_at_start", "shedding_interval_s"):
        v = lb.get(k)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
            out.append("load_balance.%s is not a non-negative number: %r" % (k, v))
    if not isinstance(lb.get("target_met"), bool):
        out.append("load_balance.target_met is not a bool")
    stored, acked = lb.get("stored_messages"), lb.get("acknowledged_messages")
    if not isinstance(stored, int) or stored != acked:
        out.append("load_balance: %r messages stored, %r acknowledged" % (stored, acked))
    return out


def check(summary: dict[str, Any], require_valid: bool = True) -> list[str]:
    """Problems with a summary (empty list: it holds every measure, and is valid if required)."""
    out = []
    for k in REQUIRED:
        if k not in summary:
            out.append("missing key %s" % k)
    if out:
        return out
    if not isinstance(summary["valid"], bool):
        out.append("valid is not a bool")
    if require_valid and summary["valid"] is not True:
        out.append("run is invalid: %s" % "; ".join(summary.get("invalid_reasons") or []))
    num = (int, float)
    for k in ("measured_messages", "published_msgs_per_s", "delivered_msgs_per_s", "drain_s",
              "broker_cpu_s_per_million", "broker_peak_rss_mb", "loadgen_cpu_s_per_million"):
        v = summary[k]
        if isinstance(v, bool) or not isinstance(v, num) or v < 0:
            out.append("%s is not a non-negative number: %r" % (k, v))
    if isinstance(summary["measured_messages"], num) and summary["measured_messages"] <= 0:
        out.append("measured_messages is 0")
    for k in ("published_msgs_per_s", "delivered_msgs_per_s", "broker_cpu_s_per_million",
              "broker_peak_rss_mb", "loadgen_cpu_s_per_million"):
        if isinstance(summary[k], num) and summary[k] <= 0:
            out.append("%s is 0" % k)
    for k in ("publish_latency_ms", "e2e_latency_ms"):
        doc = summary[k]
        if not isinstance(doc, dict):
            out.append("%s is not an object" % k)
            continue
        for p in PERCENTILES:
            if not isinstance(doc.get(p), num):
                out.append("%s.%s missing" % (k, p))
        vals = [doc.get(p) for p in PERCENTILES]
        if all(isinstance(v, num) for v in vals) and vals != sorted(vals):
            out.append("%s percentiles are not increasing: %r" % (k, vals))
    if not isinstance(summary["threads"], dict) or not summary["threads"]:
        out.append("threads is empty")
    elif not all(isinstance(v, num) for v in summary["threads"].values()):
        out.append("threads holds non-numbers")
    st = summary.get("storm")
    if st is not None:
        for k in ("offset_s", "unload_s", "pre_rate", "recovery_s"):
            if not isinstance(st.get(k), num) or st.get(k) < 0:
                out.append("storm.%s is not a non-negative number: %r" % (k, st.get(k)))
        if not isinstance(st.get("dedup_receipts"), int):
            out.append("storm.dedup_receipts is not an integer")
    out.extend(check_load_balance(summary.get("load_balance")))
    apps = summary["applications"]
    if not isinstance(apps, list) or not apps:
        out.append("applications is empty")
    else:
        for a in apps:
            for k in APP_KEYS:
                if k not in a:
                    out.append("application %s lacks %s" % (a.get("name"), k))
            for k in ("unique", "duplicates", "ordering_violations", "invalid", "missing"):
                if not isinstance(a.get(k), int):
                    out.append("application %s: %s is not an integer" % (a.get("name"), k))
            out.extend(check_output(a))
            if (a.get("join_s") or 0) > 0 and not isinstance(a.get("catch_up_s"), num):
                out.append("late application %s has no catch_up_s" % a.get("name"))
            if not isinstance((a.get("e2e_latency_ms") or {}).get("p99"), num):
                out.append("application %s has no e2e latency" % a.get("name"))
    return out
