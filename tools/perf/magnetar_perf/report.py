"""README.md + index.html of a run directory."""

from __future__ import annotations

import csv
import os
from typing import TYPE_CHECKING, Any

from . import charts
from .doc import Doc, fmt

if TYPE_CHECKING:
    from .sampler import Sampler
    from .scenario import Scenario

FILES = [
    ("summary.json", "the measures (read by tools and CI)"),
    ("scenario.yaml", "the scenario files as written, base first, and the overrides"),
    ("scenario-resolved.yaml", "the scenario as resolved"),
    ("run-info.json", "commit, dirty tree, host, CPUs, kernel, binaries, command"),
    ("worker-result.json", "the load generator's results, with its per-second series"),
    ("publish.hgrm", "publish latency percentile distribution (ms)"),
    ("e2e.hgrm", "end-to-end latency percentile distribution, all applications (ms)"),
    ("timeseries.csv", "per second: published, delivered, backlog, p50/p99 latencies"),
    ("stats.csv", "per second: broker CPU %, load generator CPU %, broker RSS"),
    ("brokers.csv", "several brokers: per sample and broker, CPU %, msg rates, bundles, lb "
     "counters"),
    ("topic-stats.csv", "per second: the broker's topic stats (rates, backlog) when available"),
    ("violations.txt", "ordering violation and invalid message samples"),
    ("events.jsonl", "the load generator's events (phases, joins, per-second progress)"),
    ("worker.log", "the load generator's stderr"),
    ("broker/broker.log", "the broker's log"),
    ("broker/logs/pulsar.log", "the Pulsar broker's log"),
]


def latency_rows(s: dict[str, Any]) -> list[list[Any]]:
    rows = [["publish"] + [s["publish_latency_ms"].get(p) for p in ("p50", "p90", "p99", "p999",
                                                                     "max")],
            ["end-to-end, all"] + [s["e2e_latency_ms"].get(p) for p in ("p50", "p90", "p99",
                                                                         "p999", "max")]]
    for name, d in (s.get("e2e_latency_ms_by_application") or {}).items():
        rows.append(["end-to-end, %s" % name] + [d.get(p) for p in ("p50", "p90", "p99", "p999",
                                                                     "max")])
    return rows


def summary_rows(s: dict[str, Any]) -> list[list[Any]]:
    return [
        ["valid", s["valid"]],
        ["measured messages", s["measured_messages"]],
        ["published (msg/s)", s["published_msgs_per_s"]],
        ["delivered (msg/s)", s["delivered_msgs_per_s"]],
        ["drain time (s)", s["drain_s"]],
        ["broker CPU per 1M messages (s)", s["broker_cpu_s_per_million"]],
        ["broker CPU, measured phase (% of a core)", s.get("broker_cpu_pct")],
        ["broker peak RSS (MB)", s["broker_peak_rss_mb"]],
        ["load generator CPU per 1M messages (s)", s["loadgen_cpu_s_per_million"]],
        ["measured phase (s)", s.get("measured_s")],
        ["gateway connect time (s)", s.get("connect_s")],
        ["other processes' CPU, measured phase (% of a core)", s.get("other_processes_cpu_pct")],
    ] + aux_rows(s) + memory_rows(s) + storm_rows(s) + transform_rows(s)


def transform_rows(s: dict[str, Any]) -> list[list[Any]]:
    """Consume-transform-produce (iot-telemetry-txn): mode, batches, aborts, batch latency, and
    what the output's verifiers saw of aborted transactions."""
    t = s.get("transform")
    if not t:
        return []
    lat = t.get("batch_latency_ms") or {}
    seen = sum(a.get("aborted_visible") or 0 for a in s["applications"]
               if a.get("role") == "verify")
    return [["transform: transactions, batch", "%s, %s" % (
                "on" if t.get("transactions") else "off", t.get("batch"))],
            ["transform: batches committed", t.get("batches_committed")],
            ["transform: transactions aborted and redone", t.get("transactions_aborted")],
            ["transform: batch time p50 / p99 (ms)", "%s / %s" % (fmt(lat.get("p50")),
                                                                 fmt(lat.get("p99")))],
            ["transform: outputs of aborted transactions read", seen]]


def aux_rows(s: dict[str, Any]) -> list[list[Any]]:
    """The CPU of the broker's helper processes (magnetar-bk: bookies, ZooKeeper), when sampled."""
    rows = []
    for group, name in (("bookies", "bookies' (all)"), ("zookeeper", "ZooKeeper")):
        if s.get("%s_cpu_s_per_million" % group) is not None:
            rows.append(["%s CPU per 1M messages (s)" % name, s["%s_cpu_s_per_million" % group]])
            rows.append(["%s CPU, measured phase (%% of a core)" % name,
                         s.get("%s_cpu_pct" % group)])
    return rows


def memory_rows(s: dict[str, Any]) -> list[list[Any]]:
    m = s.get("memory_limits_mb")
    if not m:
        return []
    rows = [["configured memory limits (MB: publish buffer + entry cache)", m.get("sum_mb")],
            ["broker peak RSS over the limits (MB)", m.get("peak_rss_over_limits_mb")]]
    if m.get("bound_mb") is not None:
        rows.append(["peak RSS bound (MB: limits + broker.rssBoundBaseMb)", m["bound_mb"]])
    return rows


def storm_rows(s: dict[str, Any]) -> list[list[Any]]:
    st = s.get("storm")
    if not st:
        return []
    return [["storm: mode, topics", "%s, %s" % (st.get("mode"), st.get("topics"))],
            ["storm: at (s into the measured phase)", st.get("offset_s")],
            ["storm: admin unload calls took (s)", st.get("unload_s")],
            ["storm: publish rate before (msg/s)", st.get("pre_rate")],
            ["storm: lowest rate after (msg/s, 200 ms windows)", st.get("dip_rate")],
            ["storm: publish rate back after (s)", st.get("recovery_s")],
            ["storm: receipts of sends deduplication dropped", st.get("dedup_receipts")]]


def load_balance_rows(lb: dict[str, Any]) -> list[list[Any]]:
    """The load manager's figures (summary load_balance)."""
    return [["brokers", ", ".join(lb.get("brokers") or [])],
            ["shedding interval (s)", lb.get("shedding_interval_s")],
            ["bundle moves seen / unloads by the leader / splits",
             "%s / %s / %s" % (lb.get("bundle_moves"), lb.get("unloads"), lb.get("splits"))],
            ["busiest broker's msg rate over the mean, at the start", lb.get("ratio_at_start")],
            ["... at %s s (%s intervals), target <= %s" % (
                lb.get("check_at_s"), lb.get("intervals"), 1 + lb.get("target_pct", 0) / 100),
             lb.get("ratio_at_check")],
            ["... at the end", lb.get("ratio_at_end")],
            ["within the target from (s)", lb.get("within_target_from_s")],
            ["target met", lb.get("target_met")],
            ["e2e p99 baseline (median per-second p99 away from moves, ms)",
             lb.get("p99_baseline_ms")],
            ["e2e p99 worst in %s s after a move (ms)" % lb.get("window_s"),
             lb.get("p99_worst_after_move_ms")],
            ["messages stored / acknowledged", "%s / %s" % (lb.get("stored_messages"),
                                                          lb.get("acknowledged_messages"))]]


def move_rows(lb: dict[str, Any]) -> list[list[Any]]:
    return [[m["t"], m["bundle"], m["from"], m["to"], m["placed_t"], m.get("p99_before_ms"),
             m.get("p99_after_ms")] for m in lb.get("moves") or []]


def app_rows(s: dict[str, Any]) -> list[list[Any]]:
    return [[a["name"], a.get("join_s"), a.get("subscribe_s"), a["unique"], a["duplicates"],
             a["ordering_violations"], a["invalid"], a["missing"], a.get("catch_up_s"),
             a.get("delivered_s")] for a in s["applications"]]


def read_csv(path: str) -> list[dict[str, Any]]:
    try:
        with open(path) as f:
            rows = list(csv.DictReader(f))
    except OSError:
        return []
    out = []
    for r in rows:
        d = {}
        for k, v in r.items():
            try:
                d[k] = float(v) if v not in ("", None) else None
            except ValueError:
                d[k] = v
        out.append(d)
    return out


def write_run_report(out_dir: str, scenario: Scenario, s: dict[str, Any], info: dict[str, Any],
                     worker: dict[str, Any] | None, smp: Sampler) -> list[str]:
    smp_rows = read_csv(os.path.join(out_dir, "stats.csv"))
    topic_rows = read_csv(os.path.join(out_dir, "topic-stats.csv"))
    made = charts.run_charts(out_dir, worker, smp_rows, topic_rows, s)
    if s.get("load_balance"):
        lb_chart = charts.load_balance_chart(
            out_dir, read_csv(os.path.join(out_dir, "brokers.csv")), s["load_balance"])
        if lb_chart:
            made.append(lb_chart)
    verdict = "VALID" if s["valid"] else "INVALID"
    doc = Doc("magnetar-perf run: %s (%s) - %s" % (s["scenario"], s.get("broker"), verdict))
    if not s["valid"]:
        doc.para("INVALID RUN: its numbers do not count. Reasons: " +
                 "; ".join(s.get("invalid_reasons") or ["unknown"]), strong=True)
    doc.para("Scenario %s: %s" % (s["scenario"], scenario.data.get("description") or ""))
    doc.para("Commit %s%s, host %s, %s CPUs (%s available), kernel %s, %s." % (
        (info.get("commit") or "?")[:12], " (dirty tree)" if info.get("dirty") else "",
        info.get("host"), info.get("cpus"), info.get("cpus_available"), info.get("kernel"),
        info.get("started")))
    doc.para("Broker: %s" % info.get("broker_command", "-"))
    noise = s.get("other_processes_cpu_pct")
    if noise is not None and noise > 25:
        doc.para("Note: other processes used %.0f %% of a core during the measured phase "
                 "(load average %s at the start): this run competed for CPU, its figures are "
                 "noisier than on a quiet machine." % (
                     noise, " ".join("%.2f" % v for v in info.get("loadavg_start") or [])))
    doc.heading("Measures")
    doc.table(["measure", "value"], summary_rows(s))
    doc.heading("Correctness per application")
    doc.table(["application", "join s", "subscribing took s", "unique", "duplicates",
               "ordering violations", "invalid", "missing", "catch-up s", "all delivered at s"],
              app_rows(s))
    if s.get("load_balance"):
        doc.heading("Load balance (several brokers)")
        doc.table(["measure", "value"], load_balance_rows(s["load_balance"]))
        doc.table(["move at s", "bundle", "from", "to", "placed at s", "e2e p99 before ms",
                   "e2e p99 after ms"], move_rows(s["load_balance"]))
    doc.heading("Latency (ms, measured phase)")
    doc.table(["", "p50", "p90", "p99", "p99.9", "max"], latency_rows(s))
    doc.heading("Broker CPU by thread (% of one core, measured phase)")
    if s["threads"]:
        doc.table(["thread", "CPU %"], [[k, v] for k, v in s["threads"].items()])
    else:
        doc.para("not sampled (external broker or no measured phase)")
    if s.get("loadgen_threads"):
        doc.heading("Load generator CPU by thread (% of one core, measured phase)", 3)
        doc.table(["thread", "CPU %"], [[k, v] for k, v in s["loadgen_threads"].items()])
    if s.get("topic_stats_note"):
        doc.para("Broker topic stats: %s (topic-stats.csv is empty or partial)." %
                 s["topic_stats_note"])
    doc.heading("Charts")
    if not made:
        doc.para("no charts: matplotlib is not importable (Debian: python3-matplotlib)")
    for path, caption in made:
        doc.para(caption)
        doc.image(path, caption)
    doc.heading("Files")
    doc.links([(p, d) for p, d in FILES if os.path.exists(os.path.join(out_dir, p))])
    doc.write(out_dir)
    return made


def console_table(s: dict[str, Any]) -> str:
    """A short plain-text report for the terminal; an invalid run says so first."""
    lines = []
    if not s["valid"]:
        lines.append("INVALID RUN: " + "; ".join(s.get("invalid_reasons") or ["unknown"]))
    for k, v in summary_rows(s):
        lines.append("  %-52s %s" % (k, fmt(v)))
    lines.append("  %-52s %s" % ("latency ms", "p50 / p90 / p99 / p99.9 / max"))
    for row in latency_rows(s):
        lines.append("  %-52s %s" % (row[0], " / ".join(fmt(v) for v in row[1:])))
    for a in s["applications"]:
        lines.append("  %-52s unique=%s dup=%s violations=%s invalid=%s missing=%s catch-up=%s" % (
            a["name"], a["unique"], a["duplicates"], a["ordering_violations"], a["invalid"],
            a["missing"], fmt(a.get("catch_up_s"))))
    top = list(s["threads"].items())[:8]
    if top:
        lines.append("  busiest broker threads: " + ", ".join("%s %.0f%%" % kv for kv in top))
    return "\n".join(lines)
