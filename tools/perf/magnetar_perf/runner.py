"""One run: broker up, worker run, sampling, run directory with summary, charts and report."""

from __future__ import annotations

import csv
import datetime
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from . import brokers, loadbalance, procstat, report, sampler, summary
from .storm import Storm

if TYPE_CHECKING:
    from .scenario import Scenario

REPO = brokers.REPO
Json = dict[str, Any]  # a decoded JSON document


def build_dir() -> str:
    if os.environ.get("MAGNETAR_BUILD_DIR"):
        return os.environ["MAGNETAR_BUILD_DIR"]
    if os.environ.get("MAGNETAR_BIN"):  # BUILD/src/app/magnetar
        return os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(os.environ["MAGNETAR_BIN"]))))
    return os.path.join(REPO, "build")


def find_worker(explicit: str | None = None) -> str:
    return explicit or os.environ.get("MAGNETAR_PERF_WORKER") or \
        os.path.join(build_dir(), "tools", "perf", "magnetar-perf-worker")


def find_magnetar(explicit: str | None = None) -> str:
    return explicit or os.environ.get("MAGNETAR_BIN") or \
        os.path.join(build_dir(), "src", "app", "magnetar")


def git(*args: str) -> str:
    try:
        return subprocess.run(["git", "-C", REPO] + list(args), capture_output=True, text=True,
                              timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def run_info(argv: list[str], broker_binary: str | None, worker_binary: str) -> Json:
    uname = platform.uname()
    info = {
        "command": argv,
        "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "commit": git("rev-parse", "HEAD") or None,
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        "host": socket.gethostname(),
        "cpus": os.cpu_count(),
        "cpus_available": procstat.cpu_count(),
        "cpu_model": None,
        "kernel": uname.release,
        "python": platform.python_version(),
        "loadavg_start": procstat.load_average(),
        "broker_binary": broker_binary,
        "worker_binary": worker_binary,
    }
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    for key, path in (("broker_binary_mtime", broker_binary), ("worker_binary_mtime",
                                                                worker_binary)):
        try:
            info[key] = datetime.datetime.fromtimestamp(os.path.getmtime(path)).isoformat(
                timespec="seconds")
        except (OSError, TypeError):
            pass
    return info


class WorkerProcess:
    """magnetar-perf-worker with its stdout events read on a thread."""

    def __init__(self, cmd: list[str], out_dir: str, cpus: set[int] | None,
                 on_event: Callable[[Json], None]) -> None:
        self.events: list[Json] = []
        self.events_file = open(os.path.join(out_dir, "events.jsonl"), "w")
        self.on_event = on_event
        self.stderr = open(os.path.join(out_dir, "worker.log"), "wb")
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=self.stderr,
            preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
        self.pid = self.proc.pid
        self.reader = threading.Thread(target=self._read, name="worker-events", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").strip()
            if not line.startswith("{"):
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            ev["_received"] = time.monotonic()
            self.events.append(ev)
            self.events_file.write(line + "\n")
            self.events_file.flush()
            self.on_event(ev)

    def wait(self, timeout: float) -> int | None:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None
        finally:
            self.reader.join(timeout=5)


def _alloc_count_snapshot(pids: list[int | None]) -> None:
    """Under tools/alloc-count (ALLOC_COUNT_DIR set, liballoc_count.so preloaded): a SIGUSR2
    makes the broker and the load generator write their per-thread allocation counts, so the
    measured phase's allocations are the difference of the two snapshots."""
    if not os.environ.get("ALLOC_COUNT_DIR"):
        return
    for pid in pids:
        if pid:
            try:
                os.kill(pid, signal.SIGUSR2)
            except OSError:
                pass


def _progress(ev: Json, quiet: bool) -> None:
    if quiet:
        return
    kind = ev.get("event")
    if kind == "progress":
        apps = ev.get("applications", {})
        delivered = min((a.get("delivered", 0) for a in apps.values()), default=0)
        sys.stderr.write("  t=%5.1fs published=%d delivered(min)=%d\n" %
                         (ev.get("t", 0), ev.get("published", 0), delivered))
    elif kind in ("connected", "warmup_done", "measured_start", "measured_end", "joined",
                  "caught_up", "done"):
        rest = {k: v for k, v in ev.items() if k not in ("event", "t_ns", "_received")}
        sys.stderr.write("  %s %s\n" % (kind, json.dumps(rest)))


def make_broker(scenario: Scenario, out_dir: str, broker_url: str | None = None,
                magnetar_bin: str | None = None, web_url: str | None = None,
                broker_pid: int | None = None) -> brokers.Broker:
    cfg = scenario.data["broker"]
    if broker_url:
        return brokers.ExternalBroker(broker_url, web_url, broker_pid)
    if cfg["kind"] == "magnetar-bk":
        wl = scenario.data["workload"]
        topics = ["%s%d" % (wl["topicPrefix"], i) for i in range(wl["topics"])]
        return brokers.MagnetarBkBroker(find_magnetar(cfg.get("binary") or magnetar_bin),
                                        os.path.join(out_dir, "broker"), cfg,
                                        scenario.data["cluster"], topics)
    if cfg["kind"] in ("pulsar", "pulsar-bk"):
        prefix = scenario.data["workload"]["topicPrefix"].split("://", 1)[-1]
        namespace = "/".join(prefix.split("/")[:2])
        cls = brokers.PulsarBroker if cfg["kind"] == "pulsar" else brokers.PulsarBkBroker
        return cls(os.path.join(out_dir, "broker"), cfg, namespace=namespace)
    return brokers.MagnetarBroker(find_magnetar(cfg.get("binary") or magnetar_bin),
                                  os.path.join(out_dir, "broker"), cfg)


def write_csv(path: str, rows: Iterable[Json], fields: list[str]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(r)


def write_data_files(out_dir: str, worker: Json | None, smp: sampler.Sampler,
                     t0: float) -> None:
    """stats.csv (broker process), topic-stats.csv, timeseries.csv (worker), threads-*.csv."""
    rows = []
    prev = None
    for s in smp.samples if smp else []:
        row = {"t": round(s["t"] - t0, 3), "rss_mb": round((s.get("rss_kb") or 0) / 1024, 1),
               "hwm_mb": round((s.get("hwm_kb") or 0) / 1024, 1)}
        if prev and "cpu_s" in s and "cpu_s" in prev and s["t"] > prev["t"]:
            row["broker_cpu_pct"] = round((s["cpu_s"] - prev["cpu_s"]) / (s["t"] - prev["t"]) * 100,
                                          1)
        if prev and "worker_cpu_s" in s and "worker_cpu_s" in prev and s["t"] > prev["t"]:
            row["loadgen_cpu_pct"] = round((s["worker_cpu_s"] - prev["worker_cpu_s"]) /
                                           (s["t"] - prev["t"]) * 100, 1)
        rows.append(row)
        prev = s
    write_csv(os.path.join(out_dir, "stats.csv"), rows,
              ["t", "broker_cpu_pct", "loadgen_cpu_pct", "rss_mb", "hwm_mb"])
    topic_rows = [dict(r, t=round(r["t"] - t0, 3)) for r in (smp.topic_rows if smp else [])]
    write_csv(os.path.join(out_dir, "topic-stats.csv"), topic_rows,
              ["t", "topic", "subscription", "msgRateIn", "msgRateOut", "msgBacklog",
               "storageSize"])
    series = (worker or {}).get("timeseries", [])
    apps = sorted({a for row in series for a in row.get("applications", {})})
    fields = ["t", "published", "publish_p50_ms", "publish_p99_ms"]
    for a in apps:
        fields += ["%s.%s" % (a, k) for k in ("delivered", "backlog", "e2e_p50_ms", "e2e_p99_ms")]
    flat = []
    for row in series:
        r = {k: row.get(k) for k in fields[:4]}
        for a, d in row.get("applications", {}).items():
            for k, v in d.items():
                r["%s.%s" % (a, k)] = v
        flat.append(r)
    write_csv(os.path.join(out_dir, "timeseries.csv"), flat, fields)


def run(scenario: Scenario, out_dir: str, broker_url: str | None = None,
        magnetar_bin: str | None = None, worker_bin: str | None = None,
        argv: list[str] | None = None, quiet: bool = False, web_url: str | None = None,
        broker_pid: int | None = None) -> Json:
    """Runs scenario into out_dir; returns the summary dict (summary["valid"] says if it counts)."""
    os.makedirs(out_dir, exist_ok=True)
    worker_bin = find_worker(worker_bin)
    if broker_url:
        # A running broker keeps topics, subscriptions and dedup state between runs: use topics
        # of this run only.
        wl = scenario.data["workload"]
        stamp = time.strftime("%Y%m%d%H%M%S")
        wl["topicPrefix"] = "%srun%s-" % (wl["topicPrefix"], stamp)
        wl["outputTopicPrefix"] = "%srun%s-" % (wl["outputTopicPrefix"], stamp)
    broker = make_broker(scenario, out_dir, broker_url, magnetar_bin, web_url, broker_pid)
    info = run_info(argv or sys.argv, getattr(broker, "binary", None) or broker.kind, worker_bin)
    with open(os.path.join(out_dir, "scenario.yaml"), "w") as f:
        f.write(scenario.written_text())
    with open(os.path.join(out_dir, "scenario-resolved.yaml"), "w") as f:
        f.write(scenario.resolved_text())

    problems = []
    worker = None
    smp = None
    storm = None
    limits = None
    worker_exit = None
    csmp = None
    stored = None
    t0 = time.monotonic()
    try:
        if not os.access(worker_bin, os.X_OK):
            raise brokers.BrokerError("load generator not found: %s (build target "
                                      "magnetar-perf-worker, or --worker-bin / "
                                      "MAGNETAR_PERF_WORKER)" % worker_bin)
        if not quiet:
            sys.stderr.write("magnetar-perf: starting %s broker\n" % broker.kind)
        broker.start()
        info["broker_command"] = broker.description
        info["service_url"] = broker.service_url
        cfg_path = os.path.join(out_dir, "worker-config.json")
        with open(cfg_path, "w") as f:
            json.dump(scenario.worker_config(broker.service_url, broker.tls_trust_certs,
                                             broker.web_url, broker.mqtt_url), f,
                      indent=2)
        lg = scenario.data["loadgen"]
        cpus = procstat.parse_cpuset(lg["cpuset"]) if lg.get("cpuset") is not None else None
        topics = ["%s%d" % (scenario.data["workload"]["topicPrefix"], i)
                  for i in range(scenario.data["workload"]["topics"])]
        smp_holder = {}
        limits = memory_limits(broker)
        if scenario.data["storm"]["atSeconds"] > 0:
            storm = Storm(scenario.data["storm"], broker.web_url, topics)

        def on_event(ev: Json) -> None:
            kind = ev.get("event")
            s = smp_holder.get("s")
            if s and kind in ("measured_start", "measured_end"):
                s.snapshot(kind)
                if isinstance(broker, brokers.MagnetarBroker):
                    _alloc_count_snapshot([broker.pid, s.worker_pid])
            if storm and kind == "measured_start" and ev.get("measured_start_ns"):
                storm.start(int(ev["measured_start_ns"]))
            _progress(ev, quiet)

        t0 = time.monotonic()
        wp = WorkerProcess([worker_bin, "--config", cfg_path, "--output", out_dir], out_dir,
                           cpus, on_event)
        smp = sampler.Sampler(broker, topics, scenario.data["sampling"]["intervalSeconds"],
                              scenario.data["sampling"]["topicStats"], worker_pid=wp.pid,
                              topic_stats_interval=scenario.data["sampling"][
                                  "topicStatsIntervalSeconds"])
        smp_holder["s"] = smp
        smp.start()
        if hasattr(broker, "cluster_brokers") and broker.others:
            csmp = loadbalance.ClusterSampler(broker.cluster_brokers(),
                                              scenario.data["sampling"]["intervalSeconds"])
            csmp.start()
        timeout = scenario.data["workload"]["timeoutSeconds"] + 120
        worker_exit = wp.wait(timeout)
        if worker_exit is None:
            problems.append("the load generator did not finish within %d s (killed)" % timeout)
        smp.stop()
        if csmp:
            csmp.stop()
            stored, why, docs = loadbalance.stored_entries(broker.web_url, topics)
            with open(os.path.join(out_dir, "internal-stats.json"), "w") as f:
                json.dump(docs, f, indent=1)
            if why:
                problems.append(why)
        if storm:
            storm.join()
            problems.extend(storm.errors)
        if broker.pid and isinstance(broker, brokers.MagnetarBroker) and \
                broker.proc.poll() is not None:
            problems.append("the broker exited during the run (code %s)" % broker.proc.returncode)
        result_path = os.path.join(out_dir, "worker-result.json")
        if os.path.exists(result_path):
            with open(result_path) as f:
                worker = json.load(f)
    except brokers.BrokerError as e:
        problems.append(str(e))
    finally:
        if smp:
            smp.stop()
        if csmp:
            csmp.stop()
        broker.stop()
    if isinstance(broker, brokers.MagnetarBroker) and getattr(broker, "exit_code", 0) not in (
            0, None, -15):
        problems.append("the broker exited with %s at stop" % broker.exit_code)

    info["finished"] = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    info["loadavg_end"] = procstat.load_average()
    with open(os.path.join(out_dir, "run-info.json"), "w") as f:
        json.dump(info, f, indent=2)
    try:
        with open(os.path.join(out_dir, "worker.log"), errors="replace") as f:
            worker_log = f.read()[-4000:]
    except OSError:
        worker_log = ""
    lb_doc = None
    if csmp:
        lb_doc, lb_problems = loadbalance.summarize(
            csmp.rows, worker, scenario.data["cluster"], scenario.data["broker"]["settings"],
            smp_t0(smp, worker, t0), stored)
        problems.extend(lb_problems)
    s = summary.build(scenario, worker, smp, broker, worker_exit, problems, worker_log,
                      storm=storm, limits=limits)
    s["load_balance"] = lb_doc
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(s, f, indent=2)
    write_data_files(out_dir, worker, smp, smp_t0(smp, worker, t0))
    if csmp:
        write_cluster_files(out_dir, csmp.rows, smp_t0(smp, worker, t0))
    report.write_run_report(out_dir, scenario, s, info, worker, smp)
    return s


def write_cluster_files(out_dir: str, rows: list[Json], t0: float) -> None:
    """brokers.csv: per sample and broker, CPU %, msg rates, bundles and the lb counters."""
    rel = loadbalance.relative(rows, t0)
    series = loadbalance.broker_series(rel)
    cpu = {(b, p["t"]): p["cpu_pct"] for b, pts in series.items() for p in pts}
    out = []
    for r in sorted(rel, key=lambda r: (r["t"], r["broker"])):
        c = cpu.get((r["broker"], r["t"]))
        out.append(dict(r, cpu_pct=round(c, 1) if c is not None else None,
                        bundles=len(r["bundles"]) if "bundles" in r else None))
    write_csv(os.path.join(out_dir, "brokers.csv"), out,
              ["t", "broker", "cpu_pct", "msg_rate_in", "msg_rate_out", "bundles"] +
              list(loadbalance.LB_METRICS))


def memory_limits(broker: brokers.Broker) -> Json | None:
    """The broker's configured memory limits (MB) from its runtime configuration
    (GET /admin/v2/brokers/configuration/runtime), or None when it does not say."""
    if not broker.web_url:
        return None
    try:
        with urllib.request.urlopen(broker.web_url + "/admin/v2/brokers/configuration/runtime",
                                    timeout=10) as r:
            conf = json.loads(r.read().decode())
    except Exception:  # noqa: BLE001 - reported as unknown
        return None
    out = {}
    for key in summary.MEMORY_LIMIT_KEYS:
        try:
            out[key] = float(conf[key])
        except (KeyError, TypeError, ValueError):
            return None
    return out


def smp_t0(smp: sampler.Sampler, worker: Json | None, fallback: float) -> float:
    """Time zero of the CSVs and charts: the measured phase's start (CLOCK_MONOTONIC)."""
    if worker and worker.get("measured_start_ns"):
        return worker["measured_start_ns"] / 1e9
    return fallback
