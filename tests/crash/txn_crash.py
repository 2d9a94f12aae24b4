#!/usr/bin/env python3
"""Transactions crash test (issue 45): kill -9 of the broker while transactions commit, then check
that every transaction is wholly committed or wholly aborted.

Workload: --workers raw-frame transactional clients (harness/transactions.py), each looping
consume-transform-produce transactions: NEW_TXN (TTL --ttl-ms), ADD_PARTITION_TO_TXN of 2-3 of the
output topics, one input message of `crash-in` (subscription `ctp`, Shared) acked in the txn,
K messages "TAG:i" to each of its topics, then END_TXN COMMIT (70 %) or ABORT. Each round the
broker gets SIGKILL at a random moment or, one round in two, 0-3 ms after some worker sent its
END_TXN (the coordinator then is in its fan-out or logging the final state); it is started again
on the same data (standalone: same directory; cluster: the `magnetar broker` over the same bookies
and ZooKeeper) and the workers reconnect with new transactions.

Checker, after the last restart, a TC_CLIENT_CONNECT (a cluster broker loads the coordinator only
then) and the TTL (so open transactions are timed out and aborted):
a plain consumer drains every output topic on subscription `checker` (made before the workload,
so that the topics keep everything: without a subscription Pulsar trims closed ledgers, and a
restart closes one), another drains `ctp`.
- committed (END_TXN COMMIT answered): all of its K messages per topic visible;
- aborted (ABORT answered or sent), open (never ended): none visible;
- in doubt (COMMIT sent, no answer: the kill): all or none, counted either way;
- no message twice, per (txn, topic) in order, no message of an unknown txn;
- the input acked by a txn resolved committed is never redelivered; one resolved aborted is.

Usage: txn_crash.py [--deployment standalone|cluster] [--kills N] [--seed S] [--workers W] [-k K]
Exit status 1 on any violation; the figures are printed as one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness.broker import BrokerEndpoint, magnetar_bin, restartable_magnetar  # noqa: E402
from harness.transactions import ABORT, COMMIT, TxnError, TxnWire  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NS = "persistent://public/default"
INPUT, SUB, CHECK_SUB = f"{NS}/crash-in", "ctp", "checker"
OUTPUTS = [f"{NS}/crash-out-{i}" for i in range(3)]
TXN_SETTINGS = ["transactionCoordinatorEnabled=true"]


class Standalone:
    """`magnetar standalone` on one data directory, SIGKILLed and started on the same port."""

    def __init__(self, workdir: str) -> None:
        self.broker = restartable_magnetar(workdir, TXN_SETTINGS)
        self.port = 0

    def start(self) -> BrokerEndpoint:
        endpoint = self.broker.start(port=self.port, timeout_s=60)
        self.port = endpoint.port
        return endpoint

    def kill(self) -> None:
        self.broker.kill()

    def close(self) -> None:
        self.broker.close()


class Cluster:
    """ZooKeeper + 3 bookies (scripts/bookies.sh, started here unless `uri` is given) and one
    `magnetar broker` on them (E=Qw=Qa=2), killed and started again on the same ports."""

    def __init__(self, workdir: str, uri: str | None = None, cluster: str = "txn-crash") -> None:
        self.dir, self.own_bookies = workdir, uri is None
        if uri is None:
            p = subprocess.run(["bash", f"{REPO}/scripts/bookies.sh", "start", "-n", "3", "-d",
                                f"{workdir}/bk"], capture_output=True, text=True, timeout=300)
            if p.returncode != 0:
                raise RuntimeError(p.stderr[-3000:])
            uri = p.stdout.strip().splitlines()[-1]
        self.uri = uri
        self.zk = "zk:" + uri.removeprefix("zk://").split("/", 1)[0]
        subprocess.run([magnetar_bin(), "initialize-cluster-metadata", "--cluster", cluster,
                        "--metadata-store", self.zk, "--web-service-url", "http://127.0.0.1:8080",
                        "--broker-service-url", "pulsar://127.0.0.1:6650"],
                       check=True, capture_output=True, timeout=60)
        settings = [*TXN_SETTINGS, f"metadataStoreUrl={self.zk}", f"clusterName={cluster}",
                    "advertisedAddress=127.0.0.1", "bindAddress=127.0.0.1",
                    f"bookkeeperMetadataServiceUri={uri}", "managedLedgerDefaultEnsembleSize=2",
                    "managedLedgerDefaultWriteQuorum=2", "managedLedgerDefaultAckQuorum=2",
                    "metadataStoreSessionTimeoutMillis=4000"]
        self.broker = restartable_magnetar(f"{workdir}/broker", settings)
        os.makedirs(f"{workdir}/broker", exist_ok=True)
        self.broker.mode = "broker"
        self.broker.settings.append(f"journalDirectory={workdir}/broker/journal")
        self.port = 0

    def start(self) -> BrokerEndpoint:
        """Started again on the same ports; returns once it logged its registration (a restarted
        broker first waits for its previous ZooKeeper session to expire)."""
        before = self._registrations()
        endpoint = self.broker.start(port=self.port, timeout_s=90)
        self.port = endpoint.port
        deadline = time.time() + 90
        while self._registrations() == before and time.time() < deadline:
            time.sleep(0.1)
        return endpoint

    def _registrations(self) -> int:
        if not os.path.exists(self.broker.log_path):
            return 0
        with open(self.broker.log_path, errors="replace") as f:
            return f.read().count("Registered in the cluster")

    def kill(self) -> None:
        self.broker.kill()

    def close(self) -> None:
        self.broker.close()
        if self.own_bookies:
            subprocess.run(["bash", f"{REPO}/scripts/bookies.sh", "stop", "-d", f"{self.dir}/bk"],
                           capture_output=True, timeout=60)


class Run:
    """The history of one run: every transaction (tag -> record) and the inputs taken."""

    def __init__(self, rng: random.Random, k: int, ttl_ms: int) -> None:
        self.rng, self.k, self.ttl_ms = rng, k, ttl_ms
        self.lock = threading.Lock()
        self.txns: dict[str, dict[str, Any]] = {}
        self.used_inputs: set[tuple[int, int]] = set()
        self.end_sent = threading.Event()
        self.began = threading.Event()  # a transaction of this round was opened
        self.stop = threading.Event()

    def take_input(self, tx: TxnWire) -> tuple[int, int] | None:
        with self.lock:
            while tx.messages:
                _, ledger, entry, _ = tx.messages.pop(0)
                if (ledger, entry) not in self.used_inputs:
                    self.used_inputs.add((ledger, entry))
                    return ledger, entry
        return None

    def one_txn(self, tx: TxnWire, tag: str) -> None:
        with self.lock:
            topics = self.rng.sample(OUTPUTS, self.rng.choice([2, 3]))
            commit = self.rng.random() < 0.7
        rec: dict[str, Any] = {"topics": topics, "state": "open", "input": None}
        txn = tx.new_txn(self.ttl_ms)
        rec["txn"] = list(txn)
        self.began.set()
        with self.lock:
            self.txns[tag] = rec
        for t in topics:
            tx.add_partition(txn, t)
        got = self.take_input(tx)
        if got is not None:
            tx.add_subscription(txn, INPUT, SUB)
            rec["input"] = list(got)
            try:
                tx.ack(1, got[0], got[1], txn)
            except TxnError:  # a conflict with a txn recovered as still pending
                rec["input"] = None
        for i in range(self.k):
            for t in topics:
                tx.send(t, f"{tag}:{i}".encode(), txn)
        rec["state"] = "commit-sent" if commit else "abort-sent"
        self.end_sent.set()
        try:
            tx.end(txn, COMMIT if commit else ABORT)
        except TxnError as e:
            rec["end_error"] = e.error
            return
        rec["state"] = "committed" if commit else "aborted"

    def worker(self, endpoint: BrokerEndpoint, round_no: int, w: int) -> None:
        deadline = time.time() + 60
        while True:  # lookups are refused until the restarted broker owns its bundles
            try:
                tx = TxnWire(endpoint)
                tx.subscribe(INPUT, SUB, 1)
                break
            except Exception:  # noqa: BLE001 - not ready yet, or killed during the set-up
                if self.stop.is_set() or time.time() > deadline:
                    return
                time.sleep(0.5)
        n = 0
        try:
            while not self.stop.is_set():
                n += 1
                self.one_txn(tx, f"r{round_no}w{w}t{n}")
        except Exception:  # noqa: BLE001 - the kill: connection closed or reset
            pass
        finally:
            tx.close()


def reconnect_coordinator(endpoint: BrokerEndpoint) -> None:
    """As a transactional client resuming: LOOKUP of coordinator 0's assign partition and
    TC_CLIENT_CONNECT. A cluster broker loads a coordinator only when it owns that partition's
    bundle, which a lookup brings (as Pulsar's TransactionMetadataStoreService on bundle load):
    until then the coordinator neither times out nor finishes the transactions it recovers."""
    deadline = time.time() + 90
    while True:
        try:
            TxnWire(endpoint).close()
            return
        except Exception:  # noqa: BLE001 - the restarted broker not serving lookups yet
            if time.time() > deadline:
                raise
            time.sleep(0.5)


def produce_inputs(endpoint: BrokerEndpoint, n: int) -> None:
    import pulsar

    client = pulsar.Client(endpoint.service_url, logger=pulsar.ConsoleLogger(
        pulsar.LoggerLevel.Error))
    client.subscribe(INPUT, SUB, consumer_type=pulsar.ConsumerType.Shared).close()
    for topic in OUTPUTS:  # the checker's subscriptions keep every output (no retention set)
        client.subscribe(topic, CHECK_SUB).close()
    producer = client.create_producer(INPUT, batching_enabled=False)
    for i in range(n):
        producer.send_async(f"in-{i}".encode(), None)
    producer.flush()
    client.close()


def one_round(dep: Any, run: Run, round_no: int, workers: int) -> dict[str, Any]:
    endpoint = dep.start()
    run.stop.clear()
    run.end_sent.clear()
    run.began.clear()
    threads = [threading.Thread(target=run.worker, args=(endpoint, round_no, w), daemon=True)
               for w in range(workers)]
    for t in threads:
        t.start()
    at_end = run.rng.random() < 0.5
    run.began.wait(90)  # the kill lands in the workload, not in the reconnections
    delay = run.rng.uniform(1.0, 4.0)
    if at_end:
        time.sleep(1.0)
        run.end_sent.clear()
        run.end_sent.wait(10)
        time.sleep(run.rng.uniform(0, 0.003))
    else:
        time.sleep(delay)
    dep.kill()
    run.stop.set()
    for t in threads:
        t.join(30)
    return {"round": round_no, "kill": "after END_TXN" if at_end else f"after {delay:.2f} s"}


def read_outputs(endpoint: BrokerEndpoint) -> dict[str, list[str]]:
    import pulsar

    client = pulsar.Client(endpoint.service_url, operation_timeout_seconds=30,
                           logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    out: dict[str, list[str]] = {}
    for topic in OUTPUTS:
        checker = client.subscribe(topic, CHECK_SUB)
        got = out.setdefault(topic, [])
        while True:
            try:
                m = checker.receive(timeout_millis=3000)
            except pulsar.Timeout:
                break
            got.append(m.data().decode())
            checker.acknowledge(m)
        checker.close()
    consumer = client.subscribe(INPUT, SUB, consumer_type=pulsar.ConsumerType.Shared)
    remaining = []
    while True:
        try:
            m = consumer.receive(timeout_millis=3000)
        except pulsar.Timeout:
            break
        remaining.append(f"{m.message_id().ledger_id()}:{m.message_id().entry_id()}")
    out["__inputs__"] = remaining
    client.close()
    return out


def topic_stats(endpoint: BrokerEndpoint) -> dict[str, Any]:
    import requests

    out = {}
    for topic in OUTPUTS:
        path = topic.replace("persistent://", "persistent/")
        for what in ("stats", "internalStats"):
            try:
                out[f"{topic} {what}"] = requests.get(
                    f"{endpoint.admin_url}/admin/v2/{path}/{what}", timeout=10).json()
            except Exception as e:  # noqa: BLE001 - a report, not a check
                out[f"{topic} {what}"] = str(e)
    return out


def check(run: Run, stored: dict[str, list[str]]) -> dict[str, Any]:
    """The checker, on plain data: the figures and the violations (list of strings)."""
    seen: dict[tuple[str, str], list[int]] = {}
    violations: list[str] = []
    messages = 0
    for topic in OUTPUTS:
        for value in stored.get(topic, []):
            messages += 1
            tag, _, i = value.rpartition(":")
            if tag not in run.txns:
                violations.append(f"{topic}: message {value} of no transaction")
                continue
            seen.setdefault((tag, topic), []).append(int(i))
    remaining = {tuple(int(x) for x in s.split(":")) for s in stored.get("__inputs__", [])}
    fig = {"txns": len(run.txns), "committed": 0, "aborted": 0, "in_doubt_committed": 0,
           "in_doubt_aborted": 0, "open_aborted": 0, "messages_checked": messages,
           "inputs_checked": 0}
    for tag, rec in run.txns.items():
        per_topic = {t: seen.get((tag, t), []) for t in rec["topics"]}
        for t, got in per_topic.items():
            if len(set(got)) != len(got):
                violations.append(f"{tag} on {t}: duplicates {got}")
            if got != sorted(got):
                violations.append(f"{tag} on {t}: out of order {got}")
        full = all(sorted(set(g)) == list(range(run.k)) for g in per_topic.values())
        none = not any(per_topic.values())
        state = rec["state"]
        if state == "committed" and not full:
            violations.append(f"{tag} {rec['txn']} commit answered but {per_topic} visible")
        elif state in ("aborted", "abort-sent", "open") and not none:
            violations.append(f"{tag} {rec['txn']} {state} but {per_topic} visible")
        elif state == "commit-sent" and not (full or none):
            violations.append(f"{tag} {rec['txn']} half-visible after recovery: {per_topic}")
        resolved_commit = full and not none
        key = {"committed": "committed", "aborted": "aborted", "abort-sent": "aborted",
               "open": "open_aborted"}.get(state)
        fig[key or ("in_doubt_committed" if resolved_commit else "in_doubt_aborted")] += 1
        if rec["input"] is not None:
            fig["inputs_checked"] += 1
            redelivered = tuple(rec["input"]) in remaining
            if resolved_commit and redelivered:
                violations.append(f"{tag} committed, its input {rec['input']} redelivered")
            if not resolved_commit and not redelivered:
                violations.append(f"{tag} aborted, its input {rec['input']} never redelivered")
    if fig["committed"] == 0:
        violations.append("no transaction committed: the workload did not run")
    fig["violations"] = len(violations)
    return {"figures": fig, "violations": violations[:50]}


def run_test(deployment: str, kills: int, seed: int, workers: int = 6, k: int = 4,
             ttl_ms: int = 8000, inputs: int = 3000, workdir: str | None = None,
             bk_uri: str | None = None, cluster: str = "txn-crash") -> dict[str, Any]:
    """The whole test; returns the report (figures, violations, rounds). On a shared ZooKeeper
    (bk_uri) `cluster` must be the one its public/default already lists."""
    rng = random.Random(seed)
    own_dir = workdir is None
    workdir = workdir or tempfile.mkdtemp(prefix="magnetar-txn-crash-")
    dep: Any = (Standalone(workdir) if deployment == "standalone"
                else Cluster(workdir, bk_uri, cluster))
    run = Run(rng, k, ttl_ms)
    rounds = []
    try:
        produce_inputs(dep.start(), inputs)
        dep.kill()
        for r in range(kills):
            rounds.append(one_round(dep, run, r, workers))
        endpoint = dep.start()
        reconnect_coordinator(endpoint)
        time.sleep(ttl_ms / 1000 * 1.5 + 2)  # recovered open txns time out and abort
        stored = read_outputs(endpoint)
        report = check(run, stored)
        if report["violations"]:  # for a look at what was half-visible
            report["stored"] = stored
            report["history"] = run.txns
            report["topic_stats"] = topic_stats(endpoint)
    finally:
        dep.close()
        if own_dir and not os.environ.get("KEEP_BROKER_DIR"):
            shutil.rmtree(workdir, ignore_errors=True)
    report.update({"deployment": deployment, "seed": seed, "kills": kills, "rounds": rounds})
    return report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--deployment", choices=["standalone", "cluster"], default="standalone")
    ap.add_argument("--kills", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=6)
    ap.add_argument("-k", type=int, default=4, help="messages per topic per transaction")
    ap.add_argument("--ttl-ms", type=int, default=8000)
    ap.add_argument("--inputs", type=int, default=0, help="input messages (default 600/kill)")
    ap.add_argument("--bk-uri", help="existing bookies (zk://HOST:PORT/ledgers)")
    ap.add_argument("--report", help="write the JSON report here")
    a = ap.parse_args()
    report = run_test(a.deployment, a.kills, a.seed, a.workers, a.k, a.ttl_ms,
                      a.inputs or max(3000, 600 * a.kills), bk_uri=a.bk_uri)
    text = json.dumps(report, indent=1)
    if a.report:
        with open(a.report, "w") as f:
            f.write(text)
    print(json.dumps(report["figures"]))
    for v in report["violations"]:
        print("VIOLATION", v)
    return 1 if report["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
