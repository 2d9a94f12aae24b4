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

import time
from collections.abc import Iterator

import pulsar
import pytest
import requests

from harness.broker import BrokerEndpoint
from harness.fixtures import own_broker
from harness.txn_wire import (
    ABORT,
    COMMIT,
    ERROR,
    TC_ASSIGN,
    TC_CLIENT_CONNECT_REQUEST,
    TC_CLIENT_CONNECT_RESPONSE,
    TxnError,
    TxnWire,
    fv,
)

TXN_SETTINGS = ["transactionCoordinatorEnabled=true"]


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
