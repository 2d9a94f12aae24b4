#!/usr/bin/env python3
"""Fault injection with a checker, in the spirit of Jepsen: the official Python client produces
(with and without deduplication) and consumes with every subscription type while a nemesis,
at random under a seed, injects faults; then everything is read back and checked (checker.py).

Deployment `standalone`: one `magnetar standalone` on the embedded storage, its data on a tmpfs
that a holder process keeps mounted across restarts (an unprivileged user and mount namespace:
`unshare`, entered with `nsenter`), clients reaching it only through a loopback proxy (proxy.py;
the broker advertises the proxy). Faults:

  kill9      SIGKILL of the broker, started again at once on the same data (journalSyncData)
  pause      SIGSTOP for 1-5 s, then SIGCONT
  restart    SIGTERM (graceful shutdown), started again
  unload     admin unload of one of the topics
  fulldisk   a ballast file fills the tmpfs for 1-4 s, then is removed
  partition  the proxy drops every byte both ways for 1-4 s, then resets the connections
  stall      the proxy forwards nothing for 1-4 s (a long delay), streams intact
  slowdisk   every sync (fsync, fdatasync, ...) of the broker waits 20-200 ms first, for 2-6 s
  clockjump  the broker's wall clock steps +/-30 s..10 min for 2-6 s and back, or (1 in 3)
             +/-0.05-2 s for good (an NTP step); its monotonic clock does not move

slowdisk and clockjump go through faultshim.c, an LD_PRELOAD library built at start (cc) whose
control file the nemesis writes while the process runs; a second nemesis injects them, one at a
time, concurrently with the other faults.

Deployment `cluster`: ZooKeeper + 3 bookies (scripts/bookies.sh) + 3 `magnetar broker`, each
behind a proxy of its own; faults kill9, pause (within the session), zksession (paused past it:
ownership moves), restart, unload, bookie (kill -9 and restart of a bookie), partition, stall
(one broker's proxy), slowdisk (a bookie's, 1 in 4 a broker's), clockjump (a broker's). See
README.md.

Checked (checker.py): no receipted message lost, every send answered, no duplicate stored where
deduplication is on (counted where it is off), per-producer order of what is stored, every
stored message delivered on every subscription, per-key order of first deliveries on Key_Shared
and Exclusive, and per fault kind how long publishing was unavailable (fault start to the next
receipt).

Usage:
  chaos.py [--deployment standalone|cluster] [--seed N] [--duration S] [--faults kill9,...]
           [--rate MSG_PER_S]
           [--report FILE] [--keep]
Short form (CI): tests/chaos/test_chaos.py. Long form:
`.venv/bin/python tests/chaos/chaos.py --duration 3600 --seed 1` (and the same with
`--deployment cluster --rate 200`).
Exit status 0 when no violation, 1 otherwise; the report (JSON) is printed and written to --report.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests"))

import faultshim  # noqa: E402
import pulsar  # noqa: E402
import requests  # noqa: E402
from checker import Fault, Send, check  # noqa: E402
from proxy import Proxy  # noqa: E402

from harness.broker import MagnetarProcess, free_port, magnetar_bin  # noqa: E402

BOOKIES_SH = os.path.join(REPO, "scripts", "bookies.sh")
KEYS = 8
SUB_TYPES = {
    "exclusive": (pulsar.ConsumerType.Exclusive, 1),
    "shared": (pulsar.ConsumerType.Shared, 2),
    "failover": (pulsar.ConsumerType.Failover, 2),
    "keyshared": (pulsar.ConsumerType.KeyShared, 2),
}
KEY_ORDERED = {"exclusive", "keyshared"}
# Faults that are a state of a process (its disk, its clock) rather than an event: a nemesis of
# their own injects them concurrently with the others (a slow disk during a failover, a clock
# step during a restart), each through the process's faultshim control file.
CONDITIONS = ("slowdisk", "clockjump")


def log(msg: str) -> None:
    print(f"[chaos {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --- the deployment ------------------------------------------------------------------------------

def with_shim(cmd: list[str], so: str, ctl: faultshim.Control) -> list[str]:
    """cmd run with the fault shim preloaded, controlled by ctl (`env` execs: same pid)."""
    return ["env", *(f"{k}={v}" for k, v in faultshim.env(so, ctl.path).items()), *cmd]


def hold(stop: threading.Event, seconds: float) -> float:
    """Waits `seconds` or until the run stops; returns how long it waited."""
    t = time.monotonic()
    stop.wait(seconds)
    return time.monotonic() - t


def slow_disk(rng: random.Random, stop: threading.Event, name: str,
              ctl: faultshim.Control) -> str:
    """20-200 ms before every sync of one process for 2-6 s, then none."""
    delay = rng.uniform(0.02, 0.2)
    before = ctl.counters()["delayed"]
    ctl.set_sync_delay(delay)
    held = hold(stop, rng.uniform(2, 6))
    ctl.set_sync_delay(0)
    delayed = ctl.counters()["delayed"] - before
    return f"{name} {delay * 1000:.0f} ms per sync for {held:.1f} s ({delayed} syncs delayed)"


# A clock stepped in production: an NTP step after drift (under a few seconds, kept: ntpd and
# chrony step once the offset is over 128 ms / their makestep limit), or a wrong time source (a
# host resumed from suspend, a bad NTP server, an operator's `date -s`) seen for seconds, then
# stepped back when corrected.
MAX_DRIFT_S = 5.0


def clock_jump(rng: random.Random, stop: threading.Event, name: str,
               ctl: faultshim.Control, base: dict) -> str:
    """Steps one process's wall clock: 2 in 3 a wrong clock (+/-30 s to 10 min) held 2-6 s
    and stepped back; else a small step (+/-0.05-2 s) that stays. base[name]: the kept offset."""
    kept = base.get(name, 0.0)
    sign = rng.choice((-1, 1))
    if rng.random() < 2 / 3:
        jump = sign * rng.uniform(30, 600)
        ctl.set_clock_offset(kept + jump)
        held = hold(stop, rng.uniform(2, 6))
        ctl.set_clock_offset(kept)
        return f"{name} {jump:+.1f} s for {held:.1f} s, then back"
    step = sign * rng.uniform(0.05, 2)
    if abs(kept + step) > MAX_DRIFT_S:
        step = -step
    base[name] = kept + step
    ctl.set_clock_offset(base[name])
    return f"{name} {step:+.2f} s, kept (offset now {base[name]:+.2f} s)"


class Standalone:
    """magnetar standalone on a tmpfs kept by a holder namespace, behind a proxy."""

    def __init__(self, workdir: str, tmpfs_mb: int, settings: list[str]) -> None:
        self.workdir = workdir
        self.data = os.path.join(workdir, "data")
        so = faultshim.build(workdir)
        # Outside the tmpfs: the same file seen from the broker's mount namespace.
        self.ctl = faultshim.Control(os.path.join(workdir, "faultshim.ctl"))
        self.clock_base: dict = {}
        ctl = self.ctl
        os.makedirs(self.data, exist_ok=True)
        self.holder = subprocess.Popen(
            ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
             f'mount -t tmpfs -o size={tmpfs_mb}m tmpfs "$0" && echo mounted && exec sleep 1000000',
             self.data], stdout=subprocess.PIPE, text=True)
        if self.holder.stdout.readline().strip() != "mounted":
            raise RuntimeError("could not mount a tmpfs in a user namespace (unshare)")
        self.port = free_port()
        self.web_port = free_port()
        self.proxy = Proxy(self.port).start()
        holder = self.holder.pid
        data = self.data

        class Proc(MagnetarProcess):
            def command(self, port: int = 0, extra: Iterable[str] = ()) -> list[str]:
                cmd = super().command(port, extra)
                return ["nsenter", "-t", str(holder), "-U", "-m", "--preserve-credentials",
                        "--", *with_shim(cmd, so, ctl)]

        self.broker = Proc([
            f"webServicePort={self.web_port}",
            f"journalDirectory={data}/journal",
            f"metadataStoreUrl=rocksdb:{data}/metadata",
            "journalSyncData=true",
            f"advertisedListeners=internal:pulsar://127.0.0.1:{self.proxy.port}",
            "journalMaxSizeMB=8",
            "diskUsageThreshold=1",
            "brokerShutdownTimeoutMs=10000",
            *settings], workdir=workdir, data_in_workdir=False)
        self.paused = False
        self.ballast = os.path.join(f"/proc/{holder}/root{data}", "ballast")

    @property
    def service_url(self) -> str:
        return f"pulsar://127.0.0.1:{self.proxy.port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    def start(self) -> None:
        self.broker.start(port=self.port, timeout_s=60)

    faults = ["kill9", "pause", "restart", "unload", "fulldisk", "partition", "stall",
              "slowdisk", "clockjump"]

    def kill9(self, rng: random.Random) -> str:
        self.broker.kill()
        self.start()
        return ""

    def slowdisk(self, rng: random.Random, stop: threading.Event) -> str:
        """The broker's journal and RocksDB syncs (its only disk)."""
        return slow_disk(rng, stop, "broker", self.ctl)

    def clockjump(self, rng: random.Random, stop: threading.Event) -> str:
        return clock_jump(rng, stop, "broker", self.ctl, self.clock_base)

    def shim_counters(self) -> dict:
        return {"broker": self.ctl.counters()}

    def pause(self, rng: random.Random, seconds: float) -> str:
        os.kill(self.broker.pid, signal.SIGSTOP)
        self.paused = True
        time.sleep(seconds)
        os.kill(self.broker.pid, signal.SIGCONT)
        self.paused = False
        return f"{seconds:.1f} s"

    def restart(self, rng: random.Random) -> str:
        code = self.broker.stop(timeout_s=60)
        if code != 0:
            raise RuntimeError(f"graceful stop exited with {code}")
        self.start()
        return ""

    def proxy_for(self, rng: random.Random) -> Proxy:
        return self.proxy

    def fill_disk(self, seconds: float) -> float:
        """Fills the tmpfs, keeps it full for `seconds`, frees it; returns when it was full."""
        st = os.statvfs(os.path.dirname(self.ballast))
        free = st.f_bavail * st.f_frsize
        # Unbuffered: a buffered file's flush at close would raise ENOSPC outside the try.
        with open(self.ballast, "wb", buffering=0) as f:
            try:
                f.truncate(0)
                chunk = b"\0" * (1 << 20)
                for _ in range(free // len(chunk) + 1):
                    f.write(chunk)
            except OSError:
                pass  # full
        full_at = time.monotonic()
        time.sleep(seconds)
        os.remove(self.ballast)
        return full_at

    def heal(self) -> None:
        self.ctl.set_sync_delay(0)
        self.ctl.set_clock_offset(0)
        if self.paused:
            os.kill(self.broker.pid, signal.SIGCONT)
            self.paused = False
        if os.path.exists(self.ballast):
            os.remove(self.ballast)
        if not self.broker.running():
            self.start()

    def close(self) -> int | None:
        code = self.broker.stop(timeout_s=60)
        self.proxy.stop()
        self.holder.kill()
        self.holder.wait()
        return code


class Cluster:
    """ZooKeeper + 3 bookies (scripts/bookies.sh) + 3 `magnetar broker` processes on them
    (E=Qw=Qa=2, a 4 s metadata session), each behind a proxy of its own that it advertises."""

    faults = ["kill9", "pause", "zksession", "restart", "unload", "bookie", "partition", "stall",
              "slowdisk", "clockjump"]
    SESSION_TIMEOUT_MS = 4000
    CLUSTER = "chaos"
    BOOKIES = 3

    def __init__(self, workdir: str, settings: list[str], brokers: int = 3) -> None:
        self.workdir = workdir
        self.settings = settings
        self.bk_dir = os.path.join(workdir, "bk")
        so = faultshim.build(workdir)
        # Each bookie's JVM preloads the shim with BK_DIR/bookie-I/faultshim.ctl (bookies.sh):
        # its journal's fdatasync is what a bookie acknowledges an add after.
        self.bk_env = dict(os.environ, BK_FAULTSHIM=so)
        self.bookie_ctls = []
        for i in range(self.BOOKIES):
            os.makedirs(os.path.join(self.bk_dir, f"bookie-{i}"), exist_ok=True)
            self.bookie_ctls.append(faultshim.Control(
                os.path.join(self.bk_dir, f"bookie-{i}", "faultshim.ctl")))
        self.clock_base: dict = {}
        p = subprocess.run(["bash", BOOKIES_SH, "start", "-n", str(self.BOOKIES),
                            "-d", self.bk_dir], capture_output=True, text=True, timeout=300,
                           env=self.bk_env)
        if p.returncode != 0:
            raise RuntimeError(f"bookies.sh start failed: {p.stderr[-2000:]}")
        self.uri = p.stdout.strip().splitlines()[-1]
        self.zk = "zk:" + self.uri[len("zk://"):].split("/", 1)[0]
        init = subprocess.run(
            [magnetar_bin(), "initialize-cluster-metadata", "--cluster", self.CLUSTER,
             "--metadata-store", self.zk, "--web-service-url", "http://127.0.0.1:8080",
             "--broker-service-url", "pulsar://127.0.0.1:6650"],
            capture_output=True, text=True, timeout=60)
        if init.returncode != 0:
            raise RuntimeError(init.stdout + init.stderr)
        self.brokers = []

        class Proc(MagnetarProcess):
            ctl: faultshim.Control

            def command(self, port: int = 0, extra: Iterable[str] = ()) -> list[str]:
                return with_shim(super().command(port, extra), so, self.ctl)

        for i in range(brokers):
            port, web = free_port(), free_port()
            proxy = Proxy(port).start()
            proc = Proc([
                f"metadataStoreUrl={self.zk}", f"clusterName={self.CLUSTER}",
                "advertisedAddress=127.0.0.1", "bindAddress=127.0.0.1",
                f"webServicePort={web}",
                f"advertisedListeners=internal:pulsar://127.0.0.1:{proxy.port}",
                f"journalDirectory={workdir}/broker-{i}/journal",
                f"metadataStoreSessionTimeoutMillis={self.SESSION_TIMEOUT_MS}",
                f"bookkeeperMetadataServiceUri={self.uri}",
                "managedLedgerDefaultEnsembleSize=2", "managedLedgerDefaultWriteQuorum=2",
                "managedLedgerDefaultAckQuorum=2", "managedLedgerMaxEntriesPerLedger=1000",
                "managedLedgerMinLedgerRolloverTimeMinutes=0",
                "brokerShutdownTimeoutMs=10000", *settings],
                workdir=os.path.join(workdir, f"broker-{i}"), data_in_workdir=False,
                mode="broker", log_name="broker.log")
            os.makedirs(proc.workdir, exist_ok=True)
            proc.ctl = faultshim.Control(os.path.join(proc.workdir, "faultshim.ctl"))
            self.brokers.append({"port": port, "web": web, "proxy": proxy, "proc": proc,
                                 "paused": False})

    @property
    def service_url(self) -> str:
        return "pulsar://" + ",".join(f"127.0.0.1:{b['proxy'].port}" for b in self.brokers)

    @property
    def admin_url(self) -> str:
        live = [b for b in self.brokers if b["proc"].running() and not b["paused"]]
        return f"http://127.0.0.1:{(live or self.brokers)[0]['web']}"

    def _start(self, b: dict) -> None:
        log_path = b["proc"].log_path
        offset = os.path.getsize(log_path) if os.path.exists(log_path) else 0
        b["proc"].start(port=b["port"], timeout_s=120)
        deadline = time.monotonic() + 120

        def joined() -> bool:
            with open(log_path, errors="replace") as f:
                f.seek(offset)
                return "Registered in the cluster" in f.read()
        while not joined():
            if time.monotonic() > deadline:
                raise RuntimeError(f"broker on {b['port']} did not join the cluster")
            time.sleep(0.1)

    def start(self) -> None:
        for b in self.brokers:
            self._start(b)

    def kill9(self, rng: random.Random) -> str:
        i = rng.randrange(len(self.brokers))
        self.brokers[i]["proc"].kill()
        self._start(self.brokers[i])
        return f"broker {i}"

    def _pause(self, i: int, seconds: float) -> None:
        b = self.brokers[i]
        os.kill(b["proc"].pid, signal.SIGSTOP)
        b["paused"] = True
        time.sleep(seconds)
        os.kill(b["proc"].pid, signal.SIGCONT)
        b["paused"] = False

    def pause(self, rng: random.Random, seconds: float) -> str:
        """Shorter than the metadata session: the broker keeps its topics."""
        i = rng.randrange(len(self.brokers))
        seconds = min(seconds, self.SESSION_TIMEOUT_MS / 1000 * 0.6)
        self._pause(i, seconds)
        return f"broker {i} {seconds:.1f} s"

    def zksession(self, rng: random.Random) -> str:
        """Paused past its metadata session: another broker takes its topics over."""
        i = rng.randrange(len(self.brokers))
        seconds = self.SESSION_TIMEOUT_MS / 1000 + rng.uniform(1.5, 4)
        self._pause(i, seconds)
        return f"broker {i} {seconds:.1f} s"

    def restart(self, rng: random.Random) -> str:
        i = rng.randrange(len(self.brokers))
        code = self.brokers[i]["proc"].stop(timeout_s=60)
        if code != 0:
            raise RuntimeError(f"graceful stop of broker {i} exited with {code}")
        self._start(self.brokers[i])
        return f"broker {i}"

    def bookie(self, rng: random.Random) -> str:
        i = rng.randrange(self.BOOKIES)
        subprocess.run(["bash", BOOKIES_SH, "kill9", "-d", self.bk_dir, str(i)],
                       capture_output=True, timeout=60, check=True)
        time.sleep(rng.uniform(0.5, 3))
        subprocess.run(["bash", BOOKIES_SH, "start", "-n", str(self.BOOKIES), "-d", self.bk_dir],
                       capture_output=True, timeout=300, check=True, env=self.bk_env)
        return f"bookie {i}"

    def slowdisk(self, rng: random.Random, stop: threading.Event) -> str:
        """A bookie's disk (its journal's fdatasync holds every add it acknowledges) or, 1 in
        4, a broker's (its local journal)."""
        if rng.random() < 0.75:
            i = rng.randrange(self.BOOKIES)
            return slow_disk(rng, stop, f"bookie {i}", self.bookie_ctls[i])
        i = rng.randrange(len(self.brokers))
        return slow_disk(rng, stop, f"broker {i}", self.brokers[i]["proc"].ctl)

    def clockjump(self, rng: random.Random, stop: threading.Event) -> str:
        """One broker's wall clock (the bookies' and ZooKeeper's are left alone)."""
        i = rng.randrange(len(self.brokers))
        return clock_jump(rng, stop, f"broker {i}", self.brokers[i]["proc"].ctl,
                          self.clock_base)

    def shim_counters(self) -> dict:
        out = {f"bookie {i}": c.counters() for i, c in enumerate(self.bookie_ctls)}
        out.update({f"broker {i}": b["proc"].ctl.counters() for i, b in enumerate(self.brokers)})
        return out

    def proxy_for(self, rng: random.Random) -> Proxy:
        return self.brokers[rng.randrange(len(self.brokers))]["proxy"]

    def heal(self) -> None:
        for ctl in self.bookie_ctls + [b["proc"].ctl for b in self.brokers]:
            ctl.set_sync_delay(0)
            ctl.set_clock_offset(0)
        for b in self.brokers:
            if b["paused"]:
                os.kill(b["proc"].pid, signal.SIGCONT)
                b["paused"] = False
            if not b["proc"].running():
                self._start(b)

    def close(self) -> int | None:
        codes = [b["proc"].stop(timeout_s=60) for b in self.brokers]
        for b in self.brokers:
            b["proxy"].stop()
        subprocess.run(["bash", BOOKIES_SH, "stop", "-d", self.bk_dir], capture_output=True,
                       timeout=120)
        bad = [c for c in codes if c != 0]
        return bad[0] if bad else 0


# --- the workload --------------------------------------------------------------------------------

class Workload:
    def __init__(self, service_url: str, topics: list[str], rate: float, seed: int,
                 log_file: str) -> None:
        self.topics = topics
        self.rate = rate
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.sends: dict[tuple[str, str, int], Send] = {}
        self.deliveries: list = []
        self.delivery_info: list = []  # per delivery: redelivery count, ledger, entry, batch
        self.stop = threading.Event()
        logger = pulsar.FileLogger(pulsar.LoggerLevel.Warn, log_file)
        kw = dict(operation_timeout_seconds=30, logger=logger)
        self.pclient = pulsar.Client(service_url, **kw)
        self.cclient = pulsar.Client(service_url, message_listener_threads=4, **kw)
        self.consumers = []
        self.producers = []
        self.threads: list[threading.Thread] = []

    def subscribe(self) -> None:
        for topic in self.topics:
            for sub, (ctype, n) in SUB_TYPES.items():
                for i in range(n):
                    name = f"{sub}-{i}"
                    self.consumers.append(self.cclient.subscribe(
                        topic, sub, consumer_type=ctype, consumer_name=name,
                        initial_position=pulsar.InitialPosition.Earliest,
                        message_listener=self._listener(topic, sub, name)))

    def _listener(self, topic: str, sub: str, name: str) -> Callable[[Any, Any], None]:
        def on_message(consumer: pulsar.Consumer, msg: pulsar.Message) -> None:
            producer, seq, key = msg.data().decode().split("|")
            mid = msg.message_id()
            with self.lock:
                self.deliveries.append((topic, sub, name, (producer, int(seq), key),
                                        time.monotonic()))
                self.delivery_info.append((msg.redelivery_count(), mid.ledger_id(),
                                           mid.entry_id(), mid.batch_index()))
            try:
                consumer.acknowledge(msg)
            except pulsar.PulsarException:
                pass  # redelivered later
        return on_message

    def start_producers(self) -> None:
        for topic in self.topics:
            for j, batched in enumerate((False, True)):
                name = f"{topic.rsplit('/', 1)[1]}-p{j}"
                p = self.pclient.create_producer(
                    topic, producer_name=name, send_timeout_millis=0,
                    batching_enabled=batched, batching_max_publish_delay_ms=5,
                    # One key per batch: Key_Shared dispatches a batch by its key, so a mixed
                    # batch would carry other keys' messages to that key's consumer (Pulsar's
                    # advice for Key_Shared: key-based batching).
                    batching_type=pulsar.BatchingType.KeyBased,
                    block_if_queue_full=False, max_pending_messages=2000)
                self.producers.append(p)
                t = threading.Thread(target=self._produce, args=(topic, name, p), daemon=True)
                self.threads.append(t)
                t.start()

    def _produce(self, topic: str, name: str, producer: pulsar.Producer) -> None:
        rng = random.Random(self.rng.random())
        per_producer = self.rate / max(1, 2 * len(self.topics))
        seq = 0
        next_at = time.monotonic()
        while not self.stop.is_set():
            key = f"k{rng.randrange(KEYS)}"
            ident = (topic, name, seq)
            s = Send(key=key, sent_at=time.monotonic())
            with self.lock:
                self.sends[ident] = s
            try:
                producer.send_async(f"{name}|{seq}|{key}".encode(), self._answer(s),
                                    partition_key=key)
            except pulsar.PulsarException as e:  # refused by the client itself (queue full)
                with self.lock:
                    s.result, s.answered_at = f"local:{type(e).__name__}", time.monotonic()
            seq += 1
            next_at += 1.0 / per_producer
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                next_at = time.monotonic()

    def _answer(self, s: Send) -> Callable[[Any, Any], None]:
        def cb(res: Any, msg_id: Any) -> None:
            with self.lock:
                s.result = "Ok" if res == pulsar.Result.Ok else str(res)
                s.answered_at = time.monotonic()
                if res == pulsar.Result.Ok:
                    s.msg_id = (msg_id.ledger_id(), msg_id.entry_id())
        return cb

    def first_receipts(self, timeout_s: float) -> bool:
        """Every producer has a receipt (the C++ client restarts its sequence ids on a
        reconnection before its first receipt; with deduplication that drops messages)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                got = {(t, p) for (t, p, _q), s in self.sends.items() if s.result == "Ok"}
            if len(got) == 2 * len(self.topics):
                return True
            time.sleep(0.1)
        return False

    def stop_producing(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(30)

    def unanswered(self) -> int:
        with self.lock:
            return sum(1 for s in self.sends.values() if s.result is None)


def read_stored(service_url: str, topic: str, log_file: str) -> list:
    client = pulsar.Client(service_url, operation_timeout_seconds=30,
                           logger=pulsar.FileLogger(pulsar.LoggerLevel.Warn, log_file))
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        out = []
        while True:
            try:
                m = reader.read_next(timeout_millis=5000)
            except pulsar.Timeout:
                break
            producer, seq, key = m.data().decode().split("|")
            out.append((producer, int(seq), key))
        return out
    finally:
        client.close()


# --- the run -------------------------------------------------------------------------------------

def run(args: argparse.Namespace) -> dict:
    rng = random.Random(args.seed)
    kinds = Standalone.faults if args.deployment == "standalone" else Cluster.faults
    faults_enabled = args.faults.split(",") if args.faults else kinds
    for f in faults_enabled:
        if f not in kinds:
            raise SystemExit(f"unknown fault {f!r} for {args.deployment}; known: "
                             f"{','.join(kinds)}")
    workdir = tempfile.mkdtemp(prefix="magnetar-chaos-")
    if args.deployment == "standalone":
        dep = Standalone(workdir, args.tmpfs_mb, args.set or [])
    else:
        dep = Cluster(workdir, args.set or [])
    run_id = f"{args.seed}-{int(time.time())}"
    topics = {f"persistent://public/chaos-dedup/t-{run_id}": True,
              f"persistent://public/chaos-plain/t-{run_id}": False}
    faults: list[Fault] = []
    wl = None
    exit_code = None
    failed = True  # until the run gets to its report
    try:
        dep.start()
        log(f"{args.deployment} up ({dep.service_url}); workdir {workdir}")
        for ns, dedup in (("public/chaos-dedup", True), ("public/chaos-plain", False)):
            r = requests.put(f"{dep.admin_url}/admin/v2/namespaces/{ns}", timeout=30)
            assert r.status_code in (204, 409), r.text
            r = requests.post(f"{dep.admin_url}/admin/v2/namespaces/{ns}/deduplication",
                              json=dedup, timeout=30)
            assert r.status_code == 204, r.text
            # Everything stays readable for the checker's reader.
            r = requests.post(f"{dep.admin_url}/admin/v2/namespaces/{ns}/retention",
                              json={"retentionTimeInMinutes": -1, "retentionSizeInMB": -1},
                              timeout=30)
            assert r.status_code == 204, r.text
        wl = Workload(dep.service_url, list(topics), args.rate, args.seed,
                      os.path.join(workdir, "client.log"))
        wl.subscribe()
        wl.start_producers()
        if not wl.first_receipts(60):
            raise RuntimeError("a producer got no first receipt within 60 s")
        log(f"load running at {args.rate} msg/s on {len(topics)} topics; faults "
            f"{','.join(faults_enabled)} for {args.duration} s (seed {args.seed})")
        end = time.monotonic() + args.duration
        events = [f for f in faults_enabled if f not in CONDITIONS]
        conditions = [f for f in faults_enabled if f in CONDITIONS]
        stop_conditions = threading.Event()
        cond_errors: list[BaseException] = []

        def condition_nemesis() -> None:
            """Slow disks and clock steps, one at a time, concurrent with the events: each
            round injects every enabled kind once, in a seeded order."""
            crng = random.Random(f"{args.seed}-conditions")
            try:
                while True:
                    for kind in crng.sample(conditions, len(conditions)):
                        if stop_conditions.wait(crng.uniform(args.min_gap, args.max_gap)):
                            return
                        start = time.monotonic()
                        detail = getattr(dep, kind)(crng, stop_conditions)
                        faults.append(Fault(kind, start, time.monotonic(), detail))
                        log(f"fault {kind} {detail} ({time.monotonic() - start:.1f} s)")
            except BaseException as e:  # noqa: BLE001 (re-raised by the run)
                cond_errors.append(e)

        cond_thread = threading.Thread(target=condition_nemesis, daemon=True)
        if conditions:
            cond_thread.start()
        while time.monotonic() < end:
            if not events:
                time.sleep(max(0.0, min(1.0, end - time.monotonic())))
                continue
            time.sleep(rng.uniform(args.min_gap, args.max_gap))
            if time.monotonic() >= end:
                break
            kind = rng.choice(events)
            length = rng.uniform(1.0, 4.0)
            start = time.monotonic()
            detail = ""
            if kind == "kill9":
                detail = dep.kill9(rng)
            elif kind == "pause":
                detail = dep.pause(rng, length + 1)
            elif kind == "zksession":
                detail = dep.zksession(rng)
            elif kind == "restart":
                detail = dep.restart(rng)
            elif kind == "bookie":
                detail = dep.bookie(rng)
            elif kind == "unload":
                topic = rng.choice(list(topics))
                requests.put(f"{dep.admin_url}/admin/v2/persistent/"
                             f"{topic.split('://', 1)[1]}/unload", timeout=30)
                detail = topic
            elif kind == "fulldisk":
                start = dep.fill_disk(length)
                detail = f"{length:.1f} s"
            elif kind == "partition":
                dep.proxy_for(rng).partition(length)
                time.sleep(length)
                detail = f"{length:.1f} s"
            elif kind == "stall":
                dep.proxy_for(rng).stall(length)
                time.sleep(length)
                detail = f"{length:.1f} s"
            faults.append(Fault(kind, start, time.monotonic(), detail))
            log(f"fault {kind} {detail} ({time.monotonic() - start:.1f} s)")
        stop_conditions.set()
        if conditions:
            cond_thread.join(120)
        if cond_errors:
            raise cond_errors[0]
        dep.heal()
        wl.stop_producing()
        deadline = time.monotonic() + args.grace
        while wl.unanswered() and time.monotonic() < deadline:
            time.sleep(0.2)
        log(f"producers stopped; {wl.unanswered()} sends unanswered after "
            f"{args.grace - max(0, deadline - time.monotonic()):.0f} s")
        stored = {t: read_stored(dep.service_url, t, os.path.join(workdir, "client.log"))
                  for t in topics}
        subscriptions = [(t, s) for t in topics for s in SUB_TYPES]
        want = {t: {(p, q) for p, q, _ in stored[t]} for t in topics}
        deadline = time.monotonic() + args.grace
        while time.monotonic() < deadline:
            with wl.lock:
                seen = {}
                for t, s, _c, (p, q, _k), _ts in wl.deliveries:
                    seen.setdefault((t, s), set()).add((p, q))
            if all(want[t] <= seen.get((t, s), set()) for t, s in subscriptions):
                break
            time.sleep(0.5)
        with wl.lock:
            sends = dict(wl.sends)
            deliveries = list(wl.deliveries)
            info = list(wl.delivery_info)
        if args.history:
            with open(args.history, "w") as f:
                t0 = min(s.sent_at for s in sends.values())
                for fl in sorted(faults, key=lambda x: x.start):
                    f.write(json.dumps({"fault": fl.kind, "start": fl.start - t0,
                                        "end": fl.end - t0, "detail": fl.detail}) + "\n")
                for (t, p, q), s in sends.items():
                    f.write(json.dumps({"send": [t, p, q, s.key], "at": s.sent_at - t0,
                                        "result": s.result, "id": s.msg_id,
                                        "answered": (s.answered_at or t0) - t0}) + "\n")
                for t, msgs in stored.items():
                    f.write(json.dumps({"stored": t, "messages": msgs}) + "\n")
                for d, i in zip(deliveries, info):
                    f.write(json.dumps({"delivery": d[:4], "at": d[4] - t0, "redelivery": i[0],
                                        "id": i[1:]}) + "\n")
        report = check(sends, stored, deliveries, faults,
                       dedup_topics={t for t, d in topics.items() if d},
                       key_ordered_subs={(t, s) for t in topics for s in KEY_ORDERED},
                       subscriptions=subscriptions,
                       key_batched={p for (_t, p, _q) in sends if p.endswith("-p1")})
        for c in wl.consumers:
            try:
                c.close()
            except pulsar.PulsarException:
                pass
        wl.pclient.close()
        wl.cclient.close()
        syncs = dep.shim_counters()
        exit_code = dep.close()
        violations = report.violations({t for t, d in topics.items() if d})
        if exit_code != 0:
            violations.append(f"the broker exited with {exit_code} on SIGTERM")
        result = {
            "deployment": args.deployment, "seed": args.seed, "duration_s": args.duration,
            "rate": args.rate, "faults_injected": len(faults), "sends": report.sends,
            "receipted": report.receipted, "failed": report.failed,
            "unanswered": len(report.unanswered), "lost": len(report.lost),
            "stored": report.stored, "duplicates": report.duplicates,
            "deliveries": report.deliveries, "undelivered": report.undelivered,
            "producer_order_violations": len(report.producer_order),
            "key_order_violations": len(report.key_order),
            "unavailability": report.faults,
            "syncs": syncs,  # per process, from the fault shim: calls seen, calls delayed
            "violations": violations,
        }
        failed = bool(violations)
        return result
    finally:
        if exit_code is None:
            try:
                dep.close()
            except Exception:  # noqa: BLE001 (already failing)
                pass
        if args.keep or failed:  # a failed run keeps its logs
            log(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--deployment", choices=["standalone", "cluster"], default="standalone")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--duration", type=float, default=60, help="seconds of faults")
    ap.add_argument("--faults", default="",
                    help=f"comma list; standalone: {','.join(Standalone.faults)}; cluster: "
                    f"{','.join(Cluster.faults)} (default: all; {' and '.join(CONDITIONS)} are "
                    "injected by a nemesis of their own, concurrently, through an LD_PRELOAD "
                    "shim)")
    ap.add_argument("--rate", type=float, default=400, help="messages per second, all producers")
    ap.add_argument("--min-gap", type=float, default=1.0, help="seconds between faults, at least")
    ap.add_argument("--max-gap", type=float, default=4.0)
    ap.add_argument("--grace", type=float, default=60,
                    help="seconds to wait for answers and deliveries")
    ap.add_argument("--tmpfs-mb", type=int, default=256)
    ap.add_argument("--set", action="append", help="broker setting KEY=VALUE (repeatable)")
    ap.add_argument("--report", help="write the JSON report here")
    ap.add_argument("--keep", action="store_true", help="keep the working directory")
    ap.add_argument("--history", help="write every send, fault, stored message and delivery "
                    "here (JSON lines)")
    args = ap.parse_args(argv)
    result = run(args)
    text = json.dumps(result, indent=2, default=str)
    print(text)
    if args.report:
        with open(args.report, "w") as f:
            f.write(text + "\n")
    return 1 if result["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
