#!/usr/bin/env python3
"""Geo-replication throughput and lag under a magnetar-perf scenario (docs/perf.md,
"Geo-replication"): two `magnetar standalone` brokers, clusters c1 and c2 (deduplication on,
journalSyncData as the scenario's fsync), public/default replicated from c1 to c2; the scenario
runs against c1 (`magnetar-perf run SCENARIO --broker-url ...`) while this samples c1's topic
stats every second: the replicators' msgRateOut, replicationBacklog and
replicationDelayInSeconds. After the run: the seconds until every backlog is 0, and each topic's
msgInCounter on c2 against c1's (equal: every message replicated once; the generator's sequence
ids and c2's deduplication drop resends).

  python3 tools/perf/geo_replication.py iot-telemetry-high-rate-small --output /tmp/geo

Writes OUTPUT/perf (magnetar-perf's run), OUTPUT/replication.csv (the samples) and
OUTPUT/geo-summary.json; prints the figures. Exits 1 when the run is invalid or a count differs.
Standard library only; needs build/src/app/magnetar and magnetar-perf-worker ($MAGNETAR_BIN)."""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NS = "public/default"


def http(method: str, url: str, body: object = None) -> tuple[int, object]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            text = r.read().decode()
            return r.status, json.loads(text) if text else None
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


class Standalone:
    def __init__(self, binary: str, name: str, directory: str, fsync: bool) -> None:
        self.name = name
        os.makedirs(directory, exist_ok=True)
        ports = os.path.join(directory, "ports")
        settings = [f"clusterName={name}", "brokerServicePort=0", "webServicePort=0",
                    "brokerDeduplicationEnabled=true", f"journalSyncData={str(fsync).lower()}",
                    f"journalDirectory={directory}/journal",
                    f"metadataStoreUrl=rocksdb:{directory}/metadata"]
        cmd = [binary, "standalone", "--ports-file", ports]
        for kv in settings:
            cmd += ["--set", kv]
        self.log = open(os.path.join(directory, "magnetar.log"), "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while True:
            if self.proc.poll() is not None:
                sys.exit(f"{name} exited; see {self.log.name}")
            if os.path.exists(ports):
                kv = dict(line.strip().split("=", 1) for line in open(ports) if "=" in line)
                if "brokerServicePort" in kv and "webServicePort" in kv:
                    break
            if time.time() > deadline:
                sys.exit(f"{name} did not start; see {self.log.name}")
            time.sleep(0.1)
        self.url = f"pulsar://127.0.0.1:{kv['brokerServicePort']}"
        self.web = f"http://127.0.0.1:{kv['webServicePort']}"
        while http("GET", self.web + "/admin/v2/clusters")[0] != 200:
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


def topics_stats(web: str) -> dict[str, dict]:
    code, names = http("GET", f"{web}/admin/v2/persistent/{NS}")
    if code != 200:
        return {}
    out = {}
    for t in names:
        code, st = http("GET", f"{web}/admin/v2/{t.replace('://', '/')}/stats")
        if code == 200:
            out[t] = st
    return out


def sample(web: str) -> dict:
    stats = topics_stats(web)
    reps = [st.get("replication", {}).get("c2") for st in stats.values()]
    reps = [r for r in reps if r]
    return {"t": time.time(), "topics": len(stats),
            "msg_in_rate": round(sum(st.get("msgRateIn", 0) for st in stats.values()), 1),
            "repl_rate_out": round(sum(r["msgRateOut"] for r in reps), 1),
            "repl_backlog": sum(r["replicationBacklog"] for r in reps),
            "repl_delay_s": max((r["replicationDelayInSeconds"] for r in reps), default=0),
            "connected": sum(1 for r in reps if r["connected"])}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario", nargs="?", default="iot-telemetry-high-rate-small")
    ap.add_argument("--output", default=None)
    ap.add_argument("--fsync", action="store_true", help="journalSyncData=true on both")
    ap.add_argument("--set", action="append", default=[], help="passed to magnetar-perf run")
    ap.add_argument("--baseline", action="store_true",
                    help="the same brokers without replication (c1's cost without it)")
    args = ap.parse_args()
    binary = os.environ.get("MAGNETAR_BIN", os.path.join(REPO, "build", "src", "app", "magnetar"))
    out = args.output or tempfile.mkdtemp(prefix="magnetar-geo-perf-")
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="magnetar-geo-brokers-")
    c1 = Standalone(binary, "c1", os.path.join(work, "c1"), args.fsync)
    c2 = Standalone(binary, "c2", os.path.join(work, "c2"), args.fsync)
    samples: list[dict] = []
    try:
        for side, other in ((c1, c2), (c2, c1)):
            code, body = http("PUT", f"{side.web}/admin/v2/clusters/{other.name}",
                              {"serviceUrl": other.web, "brokerServiceUrl": other.url})
            assert code in (200, 204), body
            code, body = http("POST", f"{side.web}/admin/v2/tenants/public",
                              {"allowedClusters": ["c1", "c2"], "adminRoles": []})
            assert code == 204, body
        if not args.baseline:
            code, body = http("POST", f"{c1.web}/admin/v2/namespaces/{NS}/replication",
                              ["c1", "c2"])
            assert code == 204, body
        stop = threading.Event()

        def sampler() -> None:
            while not stop.wait(1.0):
                samples.append(sample(c1.web))
        th = threading.Thread(target=sampler, daemon=True)
        th.start()
        perf_out = os.path.join(out, "perf")
        cmd = [sys.executable, os.path.join(REPO, "tools", "perf", "magnetar-perf"), "run",
               args.scenario, "--broker-url", c1.url, "--web-url", c1.web,
               "--broker-pid", str(c1.proc.pid), "--output", perf_out]
        for s in args.set:
            cmd += ["--set", s]
        rc = subprocess.call(cmd)
        perf_end = time.time()
        # Until every replicator drained (at most 5 min).
        drained_at = perf_end if args.baseline else None
        while not args.baseline and time.time() < perf_end + 300:
            s = samples[-1] if samples else None
            if s and s["t"] > perf_end and s["repl_backlog"] == 0 and \
                    s["connected"] == s["topics"]:
                drained_at = s["t"]
                break
            time.sleep(0.5)
        stop.set()
        th.join()
        s1, s2 = topics_stats(c1.web), topics_stats(c2.web)
        diffs = {} if args.baseline else {
            t: (st["msgInCounter"], s2.get(t, {}).get("msgInCounter"))
            for t, st in s1.items() if st["msgInCounter"] != s2.get(t, {}).get("msgInCounter")}
        with open(os.path.join(out, "replication.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(samples[0]) if samples else ["t"])
            w.writeheader()
            for s in samples:
                w.writerow({**s, "t": round(s["t"] - samples[0]["t"], 1)})
        busy = [s for s in samples if s["t"] <= perf_end and s["msg_in_rate"] > 0]
        summary = {
            "scenario": args.scenario, "perf_exit": rc,
            "messages_c1": sum(st["msgInCounter"] for st in s1.values()),
            "messages_c2": sum(st.get("msgInCounter", 0) for st in s2.values()),
            "topics_differing": diffs,
            "publish_rate_peak": max((s["msg_in_rate"] for s in busy), default=0),
            "replication_rate_peak": max((s["repl_rate_out"] for s in samples), default=0),
            "replication_rate_mean_while_publishing": round(
                sum(s["repl_rate_out"] for s in busy) / len(busy), 1) if busy else 0,
            "backlog_max": max((s["repl_backlog"] for s in samples), default=0),
            "delay_max_s": max((s["repl_delay_s"] for s in samples), default=0),
            "drained_s_after_run": round(drained_at - perf_end, 1) if drained_at else None,
        }
        with open(os.path.join(out, "geo-summary.json"), "w") as f:
            json.dump(summary, f, indent=1)
        print(json.dumps(summary, indent=1))
        ok = rc == 0 and (args.baseline or (not diffs and drained_at is not None))
        return 0 if ok else 1
    finally:
        c1.stop()
        c2.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
