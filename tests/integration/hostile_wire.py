"""Helpers of the hostile-input suite (tests/integration/test_hostile_*.py).

Frames of the few Pulsar commands the suite needs (the protobuf wire format is
tests/harness/protobuf.py, re-exported here), a raw socket client that speaks
them, a bystander producer+consumer on the official client that must stay unaffected, and
/metrics readers.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import pulsar
import requests
from prometheus_client.parser import text_string_to_metric_families

from harness.broker import BrokerEndpoint, MagnetarProcess, tail
from harness.protobuf import Fields, decode, fb, fv, read_varint, varint  # noqa: F401 (re-exported)

T = TypeVar("T")

# BaseCommand.Type values and the BaseCommand field that carries each command.
CONNECT, CONNECTED, SUBSCRIBE, PRODUCER, SEND, SEND_RECEIPT, SEND_ERROR = 2, 3, 4, 5, 6, 7, 8
MESSAGE, ACK, FLOW, UNSUBSCRIBE, SUCCESS, ERROR = 9, 10, 11, 12, 13, 14
CLOSE_PRODUCER, CLOSE_CONSUMER, PRODUCER_SUCCESS, PING, PONG = 15, 16, 17, 18, 19
REDELIVER, LOOKUP, LOOKUP_RESPONSE, SEEK, ACK_RESPONSE = 20, 23, 24, 28, 38
PARTITIONED_METADATA, PARTITIONED_METADATA_RESPONSE = 21, 22

# ServerError names by value (pulsar_api.proto).
SERVER_ERRORS = [
    "UnknownError", "MetadataError", "PersistenceError", "AuthenticationError",
    "AuthorizationError", "ConsumerBusy", "ServiceNotReady", "ProducerBlockedQuotaExceededError",
    "ProducerBlockedQuotaExceededException", "ChecksumError", "UnsupportedVersionError",
    "TopicNotFound", "SubscriptionNotFound", "ConsumerNotFound", "TooManyRequests",
    "TopicTerminatedError", "ProducerBusy", "InvalidTopicName", "IncompatibleSchema",
    "ConsumerAssignError", "TransactionCoordinatorNotFound", "InvalidTxnStatus",
    "NotAllowedError", "TransactionConflict", "TransactionNotFound", "ProducerFenced",
]


# --- frames -------------------------------------------------------------------------------------

def base_command(ctype: int, body: bytes, field: int | None = None) -> bytes:
    """BaseCommand{type, <field>: body}; field defaults to the type number (true for all used)."""
    return fv(1, ctype) + fb(field or ctype, body)


def frame(cmd: bytes, entry: bytes = b"") -> bytes:
    return struct.pack(">II", 4 + len(cmd) + len(entry), len(cmd)) + cmd + entry


def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def entry(producer_name: str, seq: int, payload: bytes, corrupt_crc: bool = False) -> bytes:
    """[0x0e01][crc32c][metadataSize][MessageMetadata][payload] as a producer sends it."""
    md = fb(1, producer_name) + fv(2, seq) + fv(3, int(time.time() * 1000))
    checked = struct.pack(">I", len(md)) + md + payload
    crc = crc32c(checked) ^ (0xDEADBEEF if corrupt_crc else 0)
    return struct.pack(">HI", 0x0E01, crc) + checked


def connect_frame(version: str = "hostile-suite", protocol: int = 21) -> bytes:
    return frame(base_command(CONNECT, fb(1, version) + fv(4, protocol)))


def producer_frame(topic: str, producer_id: int, request_id: int,
                   name: str | None = None) -> bytes:
    body = fb(1, topic) + fv(2, producer_id) + fv(3, request_id)
    if name is not None:
        body += fb(4, name)
    return frame(base_command(PRODUCER, body))


def send_frame(producer_id: int, seq: int, ent: bytes) -> bytes:
    return frame(base_command(SEND, fv(1, producer_id) + fv(2, seq)), ent)


def subscribe_frame(topic: str, sub: str, consumer_id: int, request_id: int, sub_type: int = 0,
                    earliest: bool = False) -> bytes:
    body = fb(1, topic) + fb(2, sub) + fv(3, sub_type) + fv(4, consumer_id) + fv(5, request_id)
    if earliest:
        body += fv(13, 1)
    return frame(base_command(SUBSCRIBE, body))


def message_id(ledger: int, entry_id: int) -> bytes:
    return fv(1, ledger) + fv(2, entry_id)


def flow_frame(consumer_id: int, permits: int) -> bytes:
    return frame(base_command(FLOW, fv(1, consumer_id) + fv(2, permits)))


def ack_frame(consumer_id: int, ledger: int, entry_id: int,
              request_id: int | None = None) -> bytes:
    body = fv(1, consumer_id) + fv(2, 0) + fb(3, message_id(ledger, entry_id))
    if request_id is not None:
        body += fv(8, request_id)
    return frame(base_command(ACK, body))


def close_producer_frame(producer_id: int, request_id: int) -> bytes:
    return frame(base_command(CLOSE_PRODUCER, fv(1, producer_id) + fv(2, request_id)))


def close_consumer_frame(consumer_id: int, request_id: int) -> bytes:
    return frame(base_command(CLOSE_CONSUMER, fv(1, consumer_id) + fv(2, request_id)))


def lookup_frame(topic: str, request_id: int) -> bytes:
    return frame(base_command(LOOKUP, fb(1, topic) + fv(2, request_id)))


def ping_frame() -> bytes:
    return frame(base_command(PING, b""))


# --- a raw client -------------------------------------------------------------------------------

class WireClient:
    """One TCP connection speaking raw frames. recv_command() returns (type, {field: [values]})
    of the command body, or None once the broker closed the connection."""

    def __init__(self, port: int, timeout: float = 5.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""

    @classmethod
    def connected(cls, port: int, timeout: float = 5.0) -> WireClient:
        """A WireClient past its CONNECT/CONNECTED handshake."""
        c = cls(port, timeout)
        c.handshake()
        return c

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self, n: int) -> bool:
        while len(self.buf) < n:
            try:
                chunk = self.sock.recv(1 << 16)
            except (ConnectionResetError, BrokenPipeError):
                chunk = b""
            if not chunk:
                return False
            self.buf += chunk
        return True

    def recv_command(self) -> tuple[int, Fields] | None:
        if not self._fill(4):
            return None
        total = struct.unpack(">I", self.buf[:4])[0]
        if not self._fill(4 + total):
            return None
        fr, self.buf = self.buf[4:4 + total], self.buf[4 + total:]
        cmd_size = struct.unpack(">I", fr[:4])[0]
        cmd = decode(fr[4:4 + cmd_size])
        ctype = cmd[1][0]
        body = decode(cmd[ctype][0]) if ctype in cmd else {}
        return ctype, body

    def next_command(self, waiting_for: str = "a command") -> tuple[int, Fields]:
        """The next command that is not a PING (answered with a PONG); AssertionError (naming
        `waiting_for`) when the broker closed the connection."""
        while True:
            got = self.recv_command()
            assert got is not None, f"connection closed while waiting for {waiting_for}"
            if got[0] != PING:
                return got
            self.send(frame(base_command(PONG, b"")))

    def commands_within(self, seconds: float) -> list[tuple[int | str, Fields]]:
        """Every command but PINGs (answered) until `seconds` pass without one, then
        ("closed", {}) when the broker closed the connection; the socket timeout is restored."""
        got: list[tuple[int | str, Fields]] = []
        timeout = self.sock.gettimeout()
        self.sock.settimeout(seconds)
        try:
            while True:
                r = self.recv_command()
                if r is None:
                    got.append(("closed", {}))
                    break
                if r[0] == PING:
                    self.send(frame(base_command(PONG, b"")))
                    continue
                got.append(r)
        except OSError:
            pass
        self.sock.settimeout(timeout)
        return got

    def expect(self, ctype: int) -> Fields:
        """Next command that is not a PING (answered) nor a MESSAGE (unless ctype is MESSAGE),
        which must be `ctype`."""
        while True:
            got = self.next_command(f"command {ctype}")
            if got[0] == MESSAGE and ctype != MESSAGE:
                continue  # deliveries to a raw consumer are not what the tests look at
            assert got[0] == ctype, f"expected command {ctype}, got {got}"
            return got[1]

    def handshake(self) -> Fields:
        self.send(connect_frame())
        return self.expect(CONNECTED)

    def wait_closed(self, timeout: float = 5.0) -> bool:
        """True when the broker closes the connection within timeout (answers are skipped)."""
        self.sock.settimeout(timeout)
        try:
            while self.recv_command() is not None:
                pass
            return True
        except socket.timeout:
            return False

    def alive(self) -> bool:
        """PING -> PONG round trip on a connected connection."""
        self.send(ping_frame())
        self.expect(PONG)
        return True


def error_name(body: Fields, field: int) -> str:
    return SERVER_ERRORS[body[field][0]]


# --- metrics ------------------------------------------------------------------------------------

def scrape(admin_url: str) -> dict[str, Any]:
    text = requests.get(admin_url + "/metrics", timeout=10).text
    return {f.name: f for f in text_string_to_metric_families(text)}


def metric(admin_url: str, family: str, sample: str | None = None, **labels: str) -> float:
    """Sum of the samples of `family` (sample name defaults to the family's) matching labels."""
    fams = scrape(admin_url)
    fam = fams.get(family)
    if fam is None:
        return 0.0
    total = 0.0
    for s in fam.samples:
        if sample and s.name != sample:
            continue
        if all(s.labels.get(k) == v for k, v in labels.items()):
            total += s.value
    return total


def protocol_errors(admin_url: str, error: str) -> float:
    return metric(admin_url, "magnetar_protocol_errors", "magnetar_protocol_errors_total",
                  error=error)


def http_bad_requests(admin_url: str, error: str) -> float:
    return metric(admin_url, "magnetar_http_bad_requests", "magnetar_http_bad_requests_total",
                  error=error)


def wait_until(fn: Callable[[], T], timeout: float = 5.0, interval: float = 0.05) -> T:
    deadline = time.time() + timeout
    while True:
        v = fn()
        if v or time.time() > deadline:
            return v
        time.sleep(interval)


class CounterDelta:
    """A counter read now and again later: `d = CounterDelta(read); ...; assert d.moved()`."""

    def __init__(self, read: Callable[[], float]) -> None:
        self.read = read
        self.before = read()

    def moved(self, at_least: float = 1, timeout: float = 5.0) -> bool:
        return wait_until(lambda: self.read() - self.before >= at_least, timeout)


# --- the broker and its bystanders ---------------------------------------------------------------

class HostileBroker(MagnetarProcess):
    """`magnetar standalone` on free ports in a temporary directory that survives restart();
    stop() insists on a clean exit. nofile: RLIMIT_NOFILE of the broker (None: inherited)."""

    def __init__(self, settings: Iterable[str] = (), nofile: int | None = None) -> None:
        super().__init__(settings, nofile=nofile, prefix="magnetar-hostile-")

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 20.0) -> int | None:
        """Graceful stop (SIGTERM); asserts the broker was still running and exits cleanly."""
        assert self.running(), f"the broker died:\n{tail(self.log_path)}"
        rc = super().stop(sig, timeout_s)
        assert rc == 0, f"broker exit code {rc}:\n{tail(self.log_path)}"
        return rc

    def close(self) -> None:
        """Stops (if running), fails on a sanitizer report in the log, removes the directory."""
        try:
            if self.running():
                self.stop()
        finally:
            super().close()


def active_connections(admin_url: str) -> float:
    return metric(admin_url, "pulsar_active_connections")


def publishers(admin_url: str, topic: str) -> int:
    """Producers on a persistent://public/default/<local> topic per its admin stats."""
    local = topic.rsplit("/", 1)[1]
    r = requests.get(f"{admin_url}/admin/v2/persistent/public/default/{local}/stats", timeout=30)
    r.raise_for_status()
    return len(r.json()["publishers"])

def port_of(endpoint: BrokerEndpoint) -> int:
    return int(endpoint.service_url.rsplit(":", 1)[1])


def quiet_client(broker_or_endpoint: BrokerEndpoint | MagnetarProcess) -> pulsar.Client:
    """An official client that logs errors only."""
    ep = getattr(broker_or_endpoint, "endpoint", broker_or_endpoint)
    return pulsar.Client(ep.service_url, operation_timeout_seconds=10,
                         logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))


class Bystander:
    """A producer sending 0, 1, 2, ... every few ms and a consumer on another topic, both on the
    official client; plus messages stored before the test that must still be readable after."""

    def __init__(self, endpoint: BrokerEndpoint, name: str) -> None:
        self.endpoint = endpoint
        self.client = quiet_client(endpoint)
        self.topic = f"persistent://public/default/bystander-{name}-{time.time_ns()}"
        self.stored_topic = self.topic + "-stored"
        self.stored = [b"stored-%d" % i for i in range(20)]
        p = self.client.create_producer(self.stored_topic, batching_enabled=False)
        for m in self.stored:
            p.send(m)
        p.close()
        self.consumer = self.client.subscribe(self.topic, "bystander")
        self.producer = self.client.create_producer(self.topic, batching_enabled=False)
        self.sent = []
        self.errors = []
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._produce, daemon=True)

    def _produce(self) -> None:
        i = 0
        while not self.stop_event.is_set():
            try:
                self.producer.send(b"%d" % i)
                self.sent.append(i)
                i += 1
            except Exception as e:  # noqa: BLE001 - recorded and asserted on
                self.errors.append(e)
                return
            time.sleep(0.003)

    def start(self) -> Bystander:
        self.thread.start()
        return self

    def check(self) -> None:
        """Stops producing once 20 messages are through; every message arrived, in order; the
        stored ones are intact."""
        wait_until(lambda: len(self.sent) >= 20 or self.errors, timeout=20)
        self.stop_event.set()
        self.thread.join(30)
        assert not self.errors, f"bystander producer failed: {self.errors}"
        assert len(self.sent) >= 20, "the bystander made too little progress"
        got = []
        while len(got) < len(self.sent):
            m = self.consumer.receive(10000)
            got.append(int(m.data()))
            self.consumer.acknowledge(m)
        assert got == self.sent
        reader = self.client.create_reader(self.stored_topic, pulsar.MessageId.earliest)
        again = [reader.read_next(10000).data() for _ in self.stored]
        assert again == self.stored
        reader.close()
        self.client.close()


@contextlib.contextmanager
def bystander(endpoint: BrokerEndpoint, name: str) -> Iterator[Bystander]:
    b = Bystander(endpoint, name).start()
    ok = False
    try:
        yield b
        ok = True
    finally:
        if ok:
            b.check()
        else:
            b.stop_event.set()
            b.client.close()
