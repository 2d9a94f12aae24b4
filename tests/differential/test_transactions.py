"""Transactions (PIP-31, issue 45) as Pulsar 4.2.4 serves them, on a broker of its own started with
transactionCoordinatorEnabled=true (module fixture `txn_broker`).

The official Python client (pulsar-client 3.13) has no transaction API (only the error classes),
so the transactional side speaks the protocol's transaction commands on raw frames, in the order
the Java and C++ clients send them: TC_CLIENT_CONNECT_REQUEST to coordinator 0, NEW_TXN,
ADD_PARTITION_TO_TXN before the first SEND with the txnid on a partition,
ADD_SUBSCRIPTION_TO_TXN before the first ACK with the txnid on a subscription, END_TXN. What the
tests look at is what the official client's consumers and readers then get.

With --broker-url the given broker is used as the transactional one (start it with
transactionCoordinatorEnabled=true) and the test of a broker without transactions is skipped.
"""

from __future__ import annotations

import os
import struct
import sys
import time
import uuid
from collections.abc import Iterator

import pulsar
import pytest
import requests

from harness.broker import BrokerEndpoint
from harness.fixtures import own_broker
from harness.util import eventually

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from hostile_wire import (  # noqa: E402
    ACK,
    ERROR,
    LOOKUP_RESPONSE,
    MESSAGE,
    PRODUCER_SUCCESS,
    SEND,
    SEND_ERROR,
    SEND_RECEIPT,
    SERVER_ERRORS,
    SUCCESS,
    WireClient,
    base_command,
    crc32c,
    decode,
    fb,
    flow_frame,
    frame,
    fv,
    lookup_frame,
    port_of,
    producer_frame,
    subscribe_frame,
)

# BaseCommand types (and fields) of the transaction commands (PulsarApi.proto).
NEW_TXN, NEW_TXN_RESPONSE = 50, 51
ADD_PARTITION_TO_TXN, ADD_PARTITION_TO_TXN_RESPONSE = 52, 53
ADD_SUBSCRIPTION_TO_TXN, ADD_SUBSCRIPTION_TO_TXN_RESPONSE = 54, 55
END_TXN, END_TXN_RESPONSE = 56, 57
TC_CLIENT_CONNECT_REQUEST, TC_CLIENT_CONNECT_RESPONSE = 62, 63
ACK_RESPONSE = 38
COMMIT, ABORT = 0, 1  # TxnAction
SHARED = 1
TXN_SETTINGS = ["transactionCoordinatorEnabled=true"]
TC_ASSIGN = "persistent://pulsar/system/transaction_coordinator_assign"


@pytest.fixture(scope="module")
def txn_broker(request: pytest.FixtureRequest) -> Iterator[BrokerEndpoint]:
    url = request.config.getoption("--broker-url", None)
    if url:
        yield BrokerEndpoint("external", url, request.config.getoption("--admin-url", None))
        return
    yield from own_broker(
        request.config, TXN_SETTINGS, lambda e: e,
        lambda e: requests.get(f"{e.admin_url}/admin/v2/namespaces/public", timeout=10),
        "unused")


@pytest.fixture
def txn_client(txn_broker: BrokerEndpoint) -> Iterator[pulsar.Client]:
    c = pulsar.Client(txn_broker.service_url, operation_timeout_seconds=15,
                      logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    yield c
    c.close()


class TxnError(Exception):
    """A transaction command answered with an error: .error (ServerError name), .message."""

    def __init__(self, ctype: int, error: str, message: str) -> None:
        super().__init__(f"command {ctype}: {error}: {message}")
        self.error, self.message = error, message


class TxnWire:
    """One raw connection acting as a transactional client: coordinator 0, producers and Shared
    consumers on it; MESSAGEs received meanwhile are kept in `messages` (consumer id, ledger,
    entry, payload)."""

    def __init__(self, endpoint: BrokerEndpoint, connect_tc: bool = True) -> None:
        self.wire = WireClient.connected(port_of(endpoint), timeout=20.0)
        self.next_id = 1
        self.messages: list[tuple[int, int, int, bytes]] = []
        self.producers: dict[str, int] = {}
        if connect_tc:
            self.connect_tc()

    def connect_tc(self) -> None:
        """As the clients connect to coordinator 0: a LOOKUP of its assign partition (which has
        Pulsar load the pulsar/system bundle), then TC_CLIENT_CONNECT_REQUEST, retried for 60 s
        while it answers ServiceNotReady (the coordinator still loading)."""
        self.wire.send(lookup_frame(f"{TC_ASSIGN}-partition-0", self._rid()))
        self._answer({LOOKUP_RESPONSE})

        def connect() -> None:
            try:
                self.request(TC_CLIENT_CONNECT_REQUEST, fv(2, 0), TC_CLIENT_CONNECT_RESPONSE, 2)
            except TxnError as e:
                if e.error != "ServiceNotReady":
                    pytest.fail(f"TC_CLIENT_CONNECT_REQUEST: {e}")
                raise
        eventually(connect, 60.0)

    def close(self) -> None:
        self.wire.close()

    def _rid(self) -> int:
        self.next_id += 1
        return self.next_id

    def _answer(self, want: set[int]) -> tuple[int, dict]:
        while True:
            ctype, body = self.wire.next_command(f"commands {want}")
            if ctype == MESSAGE:
                md_id = decode(body[2][0])
                self.messages.append((body[1][0], md_id[1][0], md_id[2][0], b""))
                continue
            if ctype in want:
                return ctype, body
            raise AssertionError(f"expected {want}, got {ctype} {body}")

    def request(self, ctype: int, rest: bytes, answer: int, error_field: int = 4) -> dict:
        """Sends BaseCommand ctype {request_id, rest}; the answer's body, or TxnError."""
        self.wire.send(frame(base_command(ctype, fv(1, self._rid()) + rest)))
        got, body = self._answer({answer, ERROR})
        if got == ERROR:
            raise TxnError(ERROR, SERVER_ERRORS[body[2][0]], body[3][0].decode())
        if error_field in body:
            msg_field = error_field + 1
            raise TxnError(ctype, SERVER_ERRORS[body[error_field][0]],
                           body.get(msg_field, [b""])[0].decode(errors="replace"))
        return body

    def new_txn(self, ttl_ms: int = 60000) -> tuple[int, int]:
        """NEW_TXN on coordinator 0; txn_ttl_seconds carries milliseconds, as the Java, C++ and
        Go clients send it and Pulsar's coordinator reads it (a timeout of 60 there is 60 ms)."""
        body = self.request(NEW_TXN, fv(2, ttl_ms) + fv(3, 0), NEW_TXN_RESPONSE)
        return body[3][0], body[2][0]  # (most, least)

    @staticmethod
    def _txn(txn: tuple[int, int]) -> bytes:
        return fv(2, txn[1]) + fv(3, txn[0])

    def add_partition(self, txn: tuple[int, int], topic: str) -> None:
        self.request(ADD_PARTITION_TO_TXN, self._txn(txn) + fb(4, topic),
                     ADD_PARTITION_TO_TXN_RESPONSE)

    def add_subscription(self, txn: tuple[int, int], topic: str, sub: str) -> None:
        self.request(ADD_SUBSCRIPTION_TO_TXN, self._txn(txn) + fb(4, fb(1, topic) + fb(2, sub)),
                     ADD_SUBSCRIPTION_TO_TXN_RESPONSE)

    def end(self, txn: tuple[int, int], action: int) -> None:
        self.request(END_TXN, self._txn(txn) + fv(4, action), END_TXN_RESPONSE)

    def producer(self, topic: str) -> int:
        if topic not in self.producers:
            pid = len(self.producers) + 1
            self.wire.send(lookup_frame(topic, self._rid()))  # has Pulsar load the bundle
            self._answer({LOOKUP_RESPONSE})
            self.wire.send(producer_frame(topic, pid, self._rid(), f"txn-{uuid.uuid4().hex[:8]}"))
            self._answer({PRODUCER_SUCCESS})
            self.producers[topic] = pid
        return self.producers[topic]

    def send(self, topic: str, payload: bytes, txn: tuple[int, int] | None = None) -> None:
        """SEND (with the txnid in the command and the metadata when txn is given); waits for
        the SEND_RECEIPT (SEND_ERROR raises TxnError)."""
        pid = self.producer(topic)
        seq = self._rid()
        md = fb(1, f"p{pid}") + fv(2, seq) + fv(3, int(time.time() * 1000))
        cmd = fv(1, pid) + fv(2, seq)
        if txn is not None:
            md += fv(22, txn[1]) + fv(23, txn[0])
            cmd += fv(4, txn[1]) + fv(5, txn[0])
        checked = struct.pack(">I", len(md)) + md + payload
        self.wire.send(frame(base_command(SEND, cmd),
                             struct.pack(">HI", 0x0E01, crc32c(checked)) + checked))
        ctype, body = self._answer({SEND_RECEIPT, SEND_ERROR})
        if ctype == SEND_ERROR:
            raise TxnError(SEND, SERVER_ERRORS[body[3][0]], body[4][0].decode())

    def subscribe(self, topic: str, sub: str, consumer_id: int) -> None:
        self.wire.send(subscribe_frame(topic, sub, consumer_id, self._rid(), SHARED,
                                       earliest=True))
        self._answer({SUCCESS})
        self.wire.send(flow_frame(consumer_id, 1000))

    def receive(self, n: int, timeout_s: float = 10.0) -> list[tuple[int, int, int, bytes]]:
        """Waits until `n` MESSAGEs were received (in all); returns them."""
        deadline = time.time() + timeout_s
        while len(self.messages) < n and time.time() < deadline:
            for ctype, body in self.wire.commands_within(0.5):
                if ctype == MESSAGE:
                    md_id = decode(body[2][0])
                    self.messages.append((body[1][0], md_id[1][0], md_id[2][0], b""))
        assert len(self.messages) >= n, f"{len(self.messages)} of {n} messages"
        return self.messages[:n]

    def ack(self, consumer_id: int, ledger: int, entry: int, txn: tuple[int, int]) -> None:
        """An individual ACK with the txnid and a request id; TxnError on an error answer."""
        body = (fv(1, consumer_id) + fv(2, 0) + fb(3, fv(1, ledger) + fv(2, entry))
                + fv(6, txn[1]) + fv(7, txn[0]))
        self.wire.send(frame(base_command(ACK, body + fv(8, self._rid()))))
        _, answer = self._answer({ACK_RESPONSE})
        if 4 in answer:
            raise TxnError(ACK, SERVER_ERRORS[answer[4][0]], answer[5][0].decode())


@pytest.fixture
def tx(txn_broker: BrokerEndpoint) -> Iterator[TxnWire]:
    t = TxnWire(txn_broker)
    yield t
    t.close()


def drain(consumer: pulsar.Consumer, quiet_ms: int = 2000) -> list[str]:
    """Values received until nothing comes for quiet_ms, acked, in arrival order."""
    got = []
    while True:
        try:
            m = consumer.receive(timeout_millis=quiet_ms)
        except pulsar.Timeout:
            return got
        got.append(m.data().decode())
        consumer.acknowledge(m)


def read_all(reader: pulsar.Reader, quiet_ms: int = 2000) -> list[str]:
    got = []
    while True:
        try:
            got.append(reader.read_next(timeout_millis=quiet_ms).data().decode())
        except pulsar.Timeout:
            return got


def shared(client: pulsar.Client, topic: str, sub: str = "s") -> pulsar.Consumer:
    return client.subscribe(topic, sub, consumer_type=pulsar.ConsumerType.Shared,
                            initial_position=pulsar.InitialPosition.Earliest)


def produce_in_txn(tx: TxnWire, topic: str, txn: tuple[int, int], values: list[str]) -> None:
    tx.add_partition(txn, topic)
    for v in values:
        tx.send(topic, v.encode(), txn)


def test_commit_makes_messages_visible_once_in_order(tx, txn_client, topic):
    consumer = shared(txn_client, topic)
    txn = tx.new_txn()
    values = [f"m{i}" for i in range(10)]
    produce_in_txn(tx, topic, txn, values)
    assert drain(consumer, 1500) == [], "visible before the commit"
    tx.end(txn, COMMIT)
    assert drain(consumer) == values
    reader = txn_client.create_reader(topic, pulsar.MessageId.earliest)
    assert read_all(reader) == values


def test_abort_makes_none_visible(tx, txn_client, topic):
    consumer = shared(txn_client, topic)
    txn = tx.new_txn()
    produce_in_txn(tx, topic, txn, [f"aborted{i}" for i in range(5)])
    tx.end(txn, ABORT)
    tx.send(topic, b"after")
    assert drain(consumer) == ["after"]
    reader = txn_client.create_reader(topic, pulsar.MessageId.earliest)
    assert read_all(reader) == ["after"], "a reader skips the aborted messages"


def test_acks_follow_their_transaction(tx, txn_client, topic):
    """Acks in a committed txn are not redelivered; in an aborted one they are."""
    shared(txn_client, topic).close()
    for i in range(4):
        tx.send(topic, f"a{i}".encode())
    tx.subscribe(topic, "s", 7)
    got = tx.receive(4)
    commit, abort = tx.new_txn(), tx.new_txn()
    tx.add_subscription(commit, topic, "s")
    tx.add_subscription(abort, topic, "s")
    for i, (cid, ledger, entry, _) in enumerate(got):
        tx.ack(cid, ledger, entry, commit if i < 2 else abort)
    tx.end(commit, COMMIT)
    tx.end(abort, ABORT)
    tx.close()
    assert sorted(drain(shared(txn_client, topic))) == ["a2", "a3"]


def test_consume_transform_produce(tx, txn_client, topic):
    """Input acked and output produced in one txn: both happen at the commit."""
    out = topic + "-out"
    shared(txn_client, topic).close()
    out_consumer = shared(txn_client, out, "o")
    for i in range(5):
        tx.send(topic, f"x{i}".encode())
    tx.subscribe(topic, "s", 7)
    got = tx.receive(5)
    txn = tx.new_txn()
    tx.add_subscription(txn, topic, "s")
    tx.add_partition(txn, out)
    for i, (cid, ledger, entry, _) in enumerate(got):
        tx.ack(cid, ledger, entry, txn)
        tx.send(out, f"X{i}".encode(), txn)
    assert drain(out_consumer, 1500) == [], "output visible before the commit"
    tx.end(txn, COMMIT)
    assert drain(out_consumer) == [f"X{i}" for i in range(5)]
    tx.close()
    assert drain(shared(txn_client, topic)) == [], "input acked by the commit"


def test_timed_out_transaction_is_aborted(tx, txn_client, topic):
    """A txn past its timeout is aborted by the coordinator: its messages never appear, later
    messages are no longer held back, and its commit fails."""
    consumer = shared(txn_client, topic)
    txn = tx.new_txn(ttl_ms=1000)
    produce_in_txn(tx, topic, txn, ["late0", "late1"])
    time.sleep(4)
    with pytest.raises(TxnError) as e:
        tx.end(txn, COMMIT)
    print("commit after timeout:", e.value)
    assert e.value.error == "TransactionNotFound", e.value
    assert e.value.message.startswith(
        f"The transaction with this txdID `({txn[0]},{txn[1]})`not found"), e.value
    tx.send(topic, b"after")
    assert drain(consumer, 3000) == ["after"]


def test_conflicting_acks_fail(tx, txn_client, topic):
    shared(txn_client, topic).close()
    tx.send(topic, b"only")
    tx.subscribe(topic, "s", 7)
    (cid, ledger, entry, _), = tx.receive(1)
    t1, t2 = tx.new_txn(), tx.new_txn()
    tx.add_subscription(t1, topic, "s")
    tx.add_subscription(t2, topic, "s")
    tx.ack(cid, ledger, entry, t1)
    with pytest.raises(TxnError) as e:
        tx.ack(cid, ledger, entry, t2)
    print("conflict:", e.value)
    assert e.value.error == "TransactionConflict", e.value
    assert (f"[{topic}][s] Transaction:({t2[0]},{t2[1]}) try to ack message:{ledger}:{entry}"
            " (ackSet is null) in pending ack status.") in e.value.message, e.value
    tx.end(t1, COMMIT)
    tx.end(t2, ABORT)
    tx.close()
    assert drain(shared(txn_client, topic)) == [], "acked by the committed txn"


def test_partitioned_topic(tx, txn_client, txn_broker, topic):
    r = requests.put(f"{txn_broker.admin_url}/admin/v2/persistent/"
                     f"{topic.removeprefix('persistent://')}/partitions", json=3, timeout=30)
    assert r.status_code == 204, r.text
    consumer = shared(txn_client, topic)
    txn = tx.new_txn()
    for p in range(3):
        produce_in_txn(tx, f"{topic}-partition-{p}", txn, [f"p{p}-{i}" for i in range(3)])
    assert drain(consumer, 1500) == []
    tx.end(txn, COMMIT)
    assert sorted(drain(consumer)) == sorted(f"p{p}-{i}" for p in range(3) for i in range(3))


def test_open_transaction_holds_back_later_messages(tx, txn_client, topic):
    """The first position of an open txn is the topic's max read position: plain messages after
    it wait too, for consumers and readers, until the txn ends."""
    consumer = shared(txn_client, topic)
    reader = txn_client.create_reader(topic, pulsar.MessageId.earliest)
    tx.send(topic, b"before")
    txn = tx.new_txn()
    produce_in_txn(tx, topic, txn, ["in-txn"])
    tx.send(topic, b"after")
    assert drain(consumer) == ["before"]
    assert read_all(reader, 1500) == ["before"]
    tx.end(txn, COMMIT)
    assert drain(consumer) == ["in-txn", "after"]
    assert read_all(reader) == ["in-txn", "after"]


def test_transactions_disabled(request, broker, client, topic):
    """The session broker runs without transactionCoordinatorEnabled: every coordinator command
    is answered ERROR NotAllowedError "Transactions are not enabled." (ServerCnx's check before
    each handler), a SEND with a txnid SEND_ERROR NotAllowedError "Transaction buffer disable!"
    (the topic's disabled transaction buffer), and the coordinator's assign topic is not
    partitioned (the Java client then says "The broker doesn't enable the transaction
    coordinator, ...", tests/java TransactionTest)."""
    if request.config.getoption("--broker-url", None):
        pytest.skip("needs the suite's own broker without transactions")
    assert client.get_topic_partitions(TC_ASSIGN) == [TC_ASSIGN]
    tx = TxnWire(broker, connect_tc=False)
    try:
        not_enabled = f"command {ERROR}: NotAllowedError: Transactions are not enabled."
        for call in [
            lambda: tx.request(TC_CLIENT_CONNECT_REQUEST, fv(2, 0), TC_CLIENT_CONNECT_RESPONSE, 2),
            tx.new_txn,
            lambda: tx.add_partition((0, 1), topic),
            lambda: tx.add_subscription((0, 1), topic, "s"),
            lambda: tx.end((0, 1), COMMIT),
        ]:
            with pytest.raises(TxnError) as e:
                call()
            assert e.value.args[0] == not_enabled
        with pytest.raises(TxnError) as e:
            tx.send(topic, b"x", (0, 1))
        assert (e.value.error, e.value.message) == (
            "NotAllowedError", "Transaction buffer disable!")
    finally:
        tx.close()
