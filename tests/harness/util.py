"""Small helpers the Python suites share: polling, receiving for a while, /metrics sums and
throw-away namespaces over the admin REST API."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

import pulsar
import requests

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout_s: float = 10.0, interval_s: float = 0.2) -> T:
    """predicate() every interval_s until it returns a true value; after timeout_s, its last
    value (false)."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval_s)
    return predicate()


def eventually(check: Callable[[], T], timeout_s: float = 20.0, interval_s: float = 0.5) -> T:
    """check() until it returns without raising (e.g. grants reach Pulsar's policy cache
    asynchronously); re-raises the last error after timeout_s."""
    deadline = time.time() + timeout_s
    while True:
        try:
            return check()
        except Exception:
            if time.time() >= deadline:
                raise
            time.sleep(interval_s)


def receive_for(consumer: pulsar.Consumer, seconds: float, ack: bool) -> list[pulsar.Message]:
    """Every message the consumer gets within `seconds` (acked when `ack`)."""
    out = []
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            m = consumer.receive(200)
        except pulsar.Timeout:
            continue
        out.append(m)
        if ack:
            consumer.acknowledge(m)
    return out


def round_trip(client: pulsar.Client, topic: str, payload: bytes = b"hello",
               subscription: str = "s", timeout_ms: int = 10_000
               ) -> tuple[pulsar.Consumer, pulsar.Producer]:
    """Subscribes, creates a producer, sends `payload` and checks that the consumer receives it
    within timeout_ms; returns both (open)."""
    consumer = client.subscribe(topic, subscription)
    producer = client.create_producer(topic)
    producer.send(payload)
    assert consumer.receive(timeout_ms).data() == payload
    return consumer, producer


class Receipts:
    """Callbacks for Producer.send_async that record, thread-safe, the messages the broker
    receipted (`ok`) and the failures (`failed`, "KEY: result"):
    producer.send_async(payload, receipts.callback(key))."""

    def __init__(self, initial: Iterable[object] = ()) -> None:
        self.lock = threading.Lock()
        self.ok: set[object] = set(initial)
        self.failed: list[str] = []

    def callback(self, key: object) -> Callable[[pulsar.Result, pulsar.MessageId], None]:
        def cb(res: pulsar.Result, _msg_id: pulsar.MessageId) -> None:
            with self.lock:
                if res == pulsar.Result.Ok:
                    self.ok.add(key)
                else:
                    self.failed.append(f"{key!r}: {res}")
        return cb

    def snapshot(self) -> set[object]:
        with self.lock:
            return set(self.ok)


def check_pattern_consumer(client: pulsar.Client, namespace: str, topics: list[str],
                           timeout_ms: int = 15_000) -> None:
    """A consumer of persistent://NAMESPACE/t-.* (from the earliest message; the client asks for
    the namespace's topics) gets the message then sent to each of `topics` (sorted names of
    that form), each within timeout_ms."""
    consumer = client.subscribe(re.compile(f"persistent://{namespace}/t-.*"), "pattern",
                                initial_position=pulsar.InitialPosition.Earliest)
    for t in topics:
        client.create_producer(t).send(t.encode())
    got = sorted(consumer.receive(timeout_millis=timeout_ms).data().decode() for _ in topics)
    assert got == topics


def receive_all(consumer: pulsar.Consumer, idle_ms: int = 1500) -> list[pulsar.Message]:
    """Receives until nothing arrives for idle_ms (no acks)."""
    out = []
    while True:
        try:
            out.append(consumer.receive(idle_ms))
        except pulsar.Timeout:
            return out


def metric_sum(text: str, name: str, **labels: str) -> float:
    """Sum of the samples of `name` in Prometheus text whose labels include `labels` (0 when
    there are none)."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def temp_namespace(admin_url: str, prefix: str) -> Iterator[str]:
    """The body of a namespace fixture: creates public/PREFIX-<random>, yields its name, then
    deletes it with force."""
    ns = f"public/{prefix}-{uuid.uuid4().hex[:8]}"
    r = requests.put(f"{admin_url}/admin/v2/namespaces/{ns}", timeout=30)
    assert r.status_code == 204, r.text
    yield ns
    requests.delete(f"{admin_url}/admin/v2/namespaces/{ns}", params={"force": "true"},
                    timeout=60)


def proc_status_kb(pid: int, field: str) -> int:
    """A kB field of /proc/PID/status (VmRSS, VmHWM, ...); 0 when absent."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def sanitized(pid: int | None = None) -> bool:
    """True when the broker under test runs with a sanitizer (its RSS says nothing then).
    scripts/sanitizer_stage.sh sets MAGNETAR_SANITIZED; clang links its sanitizer runtime
    statically, so /proc/<pid>/maps alone does not tell (GCC's shows libasan)."""
    if os.environ.get("MAGNETAR_SANITIZED"):
        return True
    if pid is None:
        return False
    with open(f"/proc/{pid}/maps") as f:
        return any(lib in line for line in f for lib in ("libasan", "libtsan", "libubsan"))


def stop_process(pid: int, timeout_s: float = 5.0) -> None:
    """SIGSTOP pid and return once every thread of it is stopped. kill() returns when the signal
    is queued; a thread running meanwhile goes on until the thread that takes the signal is
    scheduled, milliseconds on a loaded machine (a broker then still reads what a test sends
    right after the kill). AssertionError after timeout_s."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + timeout_s
    while True:
        states = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except (FileNotFoundError, ProcessLookupError):
                continue  # a thread that just ended
        if states and all(s in ("T", "t", "Z", "X") for s in states):
            return
        assert time.monotonic() < deadline, f"pid {pid} not stopped after {timeout_s} s: {states}"
        time.sleep(0.001)
