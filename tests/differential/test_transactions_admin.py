"""`pulsar-admin transactions` (Pulsar 4.2.4's /admin/v3/transactions) and the pulsar_txn_*
metrics, on a broker of its own with transactionCoordinatorEnabled=true (as test_transactions.py):
a transaction opened on raw frames (harness.transactions.TxnWire) with a message produced on a
topic and one acked on a subscription, then what the admin API says of the coordinator, the
transaction, the topic's transaction buffer and the subscription's pending ack, before and after
the commit.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
import requests

from harness.broker import BrokerEndpoint
from harness.transactions import (
    ABORT,
    COMMIT,
    LOOKUP_RESPONSE,
    NEW_TXN,
    NEW_TXN_RESPONSE,
    TC_ASSIGN,
    TC_CLIENT_CONNECT_REQUEST,
    TC_CLIENT_CONNECT_RESPONSE,
    TxnError,
    TxnWire,
    fv,
    lookup_frame,
    txn_endpoint,
)
from harness.util import eventually

TTL_MS = 60000


@pytest.fixture(scope="module")
def txn_broker(request: pytest.FixtureRequest) -> Iterator[BrokerEndpoint]:
    yield from txn_endpoint(request.config)


@pytest.fixture
def tx(txn_broker: BrokerEndpoint) -> Iterator[TxnWire]:
    t = TxnWire(txn_broker)
    yield t
    t.close()


def v3(broker: BrokerEndpoint, path: str, **params) -> requests.Response:
    return requests.get(f"{broker.admin_url}/admin/v3/transactions/{path}", params=params,
                        timeout=30)


def ok(broker: BrokerEndpoint, path: str, **params) -> dict:
    r = v3(broker, path, **params)
    assert r.status_code == 200, f"{path}: {r.status_code} {r.text}"
    return r.json()


def position(p: str) -> tuple[int, int]:
    ledger, entry = p.split(":")[:2]
    return int(ledger), int(entry)


def open_txn_with_work(tx: TxnWire, topic: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """One plain message, then a txn that produces one message and acks the plain one on
    Shared subscription "s": (txn, position of the plain message)."""
    tx.send(topic, b"plain")
    tx.subscribe(topic, "s", consumer_id=1)
    (_, ledger, entry, _), = tx.receive(1)
    txn = tx.new_txn(TTL_MS)
    tx.add_partition(txn, topic)
    tx.send(topic, b"in-txn", txn)
    tx.add_subscription(txn, topic, "s")
    tx.ack(1, ledger, entry, txn)
    return txn, (ledger, entry)


def test_first_transaction_id_and_low_water_mark(tx, txn_broker, topic):
    """First in this module, so coordinator 0 of the module's broker is fresh: Pulsar's sequence
    starts at -1 (MLTransactionSequenceIdGenerator), so the first txn is (0,0); the coordinator's
    low water mark (first ongoing - 1, 0 with nothing ongoing) is sent with each END_TXN fan-out
    and read as a signed long by the topic: -1 while (0,0) is open, after which a SEND with an
    ended txn is refused."""
    path = topic.removeprefix("persistent://")
    fresh = ok(txn_broker, "coordinatorStats", coordinatorId=0)
    assert (fresh["leastSigBits"], fresh["lowWaterMark"]) == (-1, 0), fresh
    first, second = tx.new_txn(TTL_MS), tx.new_txn(TTL_MS)
    assert (first, second) == ((0, 0), (0, 1))
    stats = ok(txn_broker, "coordinatorStats", coordinatorId=0)
    assert (stats["leastSigBits"], stats["lowWaterMark"]) == (1, -1), stats

    for txn in (first, second):
        tx.add_partition(txn, topic)
        tx.send(topic, f"m{txn[1]}".encode(), txn)
    tx.end(first, COMMIT)  # sent while (0,0) is the first ongoing: mark -1
    assert ok(txn_broker, f"transactionBufferStats/{path}",
              lowWaterMarks="true")["lowWaterMarks"] == {"0": -1}
    tx.end(second, COMMIT)  # (0,1) the first ongoing: mark 0
    assert ok(txn_broker, f"transactionBufferStats/{path}",
              lowWaterMarks="true")["lowWaterMarks"] == {"0": 0}
    stats = ok(txn_broker, "coordinatorStats", coordinatorId=0)
    assert (stats["leastSigBits"], stats["lowWaterMark"], stats["ongoingTxnSize"]) == (1, 0, 0)
    with pytest.raises(TxnError) as e:
        tx.send(topic, b"late", first)
    assert e.value.error == "NotAllowedError"
    assert "Transaction [(0,0)] has been ended" in e.value.message
    assert tx.new_txn(TTL_MS) == (0, 2)


def test_transaction_as_admin_shows_it(tx, txn_broker, topic):
    txn, (ledger, entry) = open_txn_with_work(tx, topic)
    path = topic.removeprefix("persistent://")
    most, least = txn

    coordinators = ok(txn_broker, "coordinatorStats")
    assert "0" in coordinators and coordinators["0"]["state"] == "Ready"
    one = ok(txn_broker, "coordinatorStats", coordinatorId=0)
    assert one["ongoingTxnSize"] >= 1 and one["leastSigBits"] >= least
    assert set(one) >= {"lowWaterMark", "recoverStartTime", "recoverEndTime"}

    meta = ok(txn_broker, f"transactionMetadata/{most}/{least}")
    assert meta["txnId"] == f"({most},{least})" and meta["status"] == "OPEN"
    assert meta["timeoutAt"] == TTL_MS and meta["openTimestamp"] > 0
    assert list(meta["producedPartitions"]) == [topic]
    assert meta["producedPartitions"][topic] == {"startPosition": f"{ledger}:{entry + 1}",
                                                 "aborted": False}
    assert meta["ackedPartitions"] == {topic: {"s": {}}}  # no cumulative ack: null, left out
    assert v3(txn_broker, f"transactionMetadata/{most}/{least + 1000}").status_code == 404

    assert ok(txn_broker, f"transactionInBufferStats/{path}/{most}/{least}") == {
        "startPosition": f"{ledger}:{entry + 1}", "aborted": False}
    assert ok(txn_broker, f"transactionInPendingAckStats/{path}/s/{most}/{least}") == {}

    tb = ok(txn_broker, f"transactionBufferStats/{path}")
    assert tb["state"] == "Ready" and tb["ongoingTxnSize"] == 1
    assert tb["maxReadPosition"] == f"{ledger}:{entry}"  # before the txn's first message
    assert tb["totalAbortedTransactions"] == 0
    pa = ok(txn_broker, f"pendingAckStats/{path}/s")
    assert pa["state"] == "Ready" and pa["ongoingTxnSize"] == 1

    slow = ok(txn_broker, "slowTransactions/1000")
    assert f"({most},{least})" in slow
    assert slow[f"({most},{least})"]["producedPartitions"] == meta["producedPartitions"]
    assert f"({most},{least})" not in ok(txn_broker, f"slowTransactions/{TTL_MS}")

    tx.end(txn, COMMIT)

    def ended() -> None:
        assert v3(txn_broker, f"transactionMetadata/{most}/{least}").status_code == 404
        tb = ok(txn_broker, f"transactionBufferStats/{path}")
        assert tb["ongoingTxnSize"] == 0
        assert position(tb["maxReadPosition"]) > (ledger, entry + 1)  # past the commit marker
        assert ok(txn_broker, f"pendingAckStats/{path}/s")["ongoingTxnSize"] == 0
        assert ok(txn_broker, f"transactionInBufferStats/{path}/{most}/{least}") == {
            "aborted": False}
    eventually(ended, 10.0)


def metric(text: str, name: str) -> float:
    """The value of `name` for coordinator 0."""
    m = re.search(rf'^{name}{{[^}}]*coordinator_id="0"[^}}]*}} (\S+)$', text, re.M)
    assert m, f"{name} missing"
    return float(m.group(1))


def test_coordinator_metrics(tx, txn_broker, topic):
    def scrape() -> str:
        return requests.get(f"{txn_broker.admin_url}/metrics", timeout=30).text

    before = scrape()
    created, committed, active = (metric(before, "pulsar_txn_created_total"),
                                  metric(before, "pulsar_txn_committed_total"),
                                  metric(before, "pulsar_txn_active_count"))
    txn = tx.new_txn(TTL_MS)
    tx.add_partition(txn, topic)
    tx.send(topic, b"m", txn)
    tx.end(txn, COMMIT)

    def counted() -> None:
        text = scrape()
        assert metric(text, "pulsar_txn_created_total") == created + 1
        assert metric(text, "pulsar_txn_committed_total") == committed + 1
        assert metric(text, "pulsar_txn_active_count") == active
        for name in ("pulsar_txn_aborted_total", "pulsar_txn_timeout_total",
                     "pulsar_txn_append_log_total", "pulsar_txn_execution_latency_le_10",
                     "pulsar_txn_execution_latency_le_overflow"):
            metric(text, name)
        executions = sum(float(v) for v in re.findall(
            r'^pulsar_txn_execution_latency_le_\w+{[^}]*coordinator_id="0"[^}]*} (\S+)$',
            text, re.M))
        assert executions >= 1
    eventually(counted, 30.0)


def test_transaction_buffer_topic_metrics(tx, txn_broker, topic):
    """pulsar_txn_tb_active_total / _committed_total / _aborted_total of a topic (Pulsar's topic
    metrics, labels cluster, namespace, topic): an open txn is active, then one commit and one
    abort are counted."""
    def value(name: str) -> float:
        text = requests.get(f"{txn_broker.admin_url}/metrics", timeout=30).text
        m = re.search(rf'^{name}{{[^}}]*topic="{re.escape(topic)}"[^}}]*}} (\S+)$', text, re.M)
        assert m, f"{name} of {topic} missing"
        return float(m.group(1))

    committed, aborted = tx.new_txn(TTL_MS), tx.new_txn(TTL_MS)
    for txn in (committed, aborted):
        tx.add_partition(txn, topic)
        tx.send(topic, b"m", txn)

    def active() -> None:
        assert value("pulsar_txn_tb_active_total") == 2
    eventually(active, 30.0)
    tx.end(committed, COMMIT)
    tx.end(aborted, ABORT)

    def counted() -> None:
        assert (value("pulsar_txn_tb_active_total"), value("pulsar_txn_tb_committed_total"),
                value("pulsar_txn_tb_aborted_total")) == (0, 1, 1)
    eventually(counted, 30.0)


def test_pending_ack_metrics(tx, txn_broker, topic):
    """Pulsar's PendingAckHandleStatsImpl metrics of a subscription (labels namespace, topic,
    subscription, and status succeed/failed for the counters): a txn that acked a message and
    committed, one that acked another and aborted, count once each; the commit latency is a
    summary (quantiles 0.5/0.9/0.99/0.999, _count, _sum in microseconds)."""
    tx.send(topic, b"a")
    tx.send(topic, b"b")
    tx.subscribe(topic, "s", consumer_id=1)
    got = tx.receive(2)
    committed, aborted = tx.new_txn(TTL_MS), tx.new_txn(TTL_MS)
    for txn, (_, ledger, entry, _) in zip((committed, aborted), got):
        tx.add_subscription(txn, topic, "s")
        tx.ack(1, ledger, entry, txn)
    tx.end(committed, COMMIT)
    tx.end(aborted, ABORT)
    ns = topic.split("://", 1)[1].rsplit("/", 1)[0]
    labels = f'namespace="{ns}",topic="{topic}",subscription="s"'

    def value(name: str, extra: str = "") -> float:
        text = requests.get(f"{txn_broker.admin_url}/metrics", timeout=30).text
        m = re.search(rf'^{name}{{(?:cluster="[^"]*",)?{re.escape(labels + extra)}}} (\S+)$',
                      text, re.M)
        assert m, f"{name}{{{labels}{extra}}} missing"
        return float(m.group(1))

    def counted() -> None:
        ok = ',status="succeed"'
        assert value("pulsar_txn_tp_committed_count_total", ok) == 1
        assert value("pulsar_txn_tp_aborted_count_total", ok) == 1
        assert value("pulsar_txn_tp_commit_latency_count") == 1
        assert value("pulsar_txn_tp_commit_latency_sum") > 0
        for q in ("0.5", "0.9", "0.99", "0.999"):
            assert value("pulsar_txn_tp_commit_latency", f',quantile="{q}"') > 0
    eventually(counted, 30.0)


def test_internal_stats_and_coordinator_list(tx, txn_broker, topic):
    """coordinators, coordinatorInternalStats, transactionBufferInternalStats and
    pendingAckInternalStats (Pulsar's TransactionsBase): the logs' managed-ledger internal stats
    under Pulsar's keys, and its errors."""
    path = topic.removeprefix("persistent://")
    listed = ok(txn_broker, "coordinators")
    assert [c["id"] for c in listed] == [0] and set(listed[0]) == {"id", "brokerServiceUrl"}
    assert listed[0]["brokerServiceUrl"].startswith("pulsar://")

    tx.send(topic, b"plain")
    tx.subscribe(topic, "s", consumer_id=1)
    early = v3(txn_broker, f"pendingAckInternalStats/{path}/s")
    assert (early.status_code, early.json()) == (
        503, {"reason": "Pending ack have not init success!"})
    (_, ledger, entry, _), = tx.receive(1)
    txn = tx.new_txn(TTL_MS)
    tx.add_subscription(txn, topic, "s")
    tx.ack(1, ledger, entry, txn)

    ml_keys = {"entriesAddedCounter", "numberOfEntries", "totalSize", "currentLedgerEntries",
               "currentLedgerSize", "lastConfirmedEntry", "state", "ledgers", "cursors",
               "properties"}
    log = ok(txn_broker, "coordinatorInternalStats/0")["transactionLogStats"]
    assert log["managedLedgerName"] == "pulsar/system/persistent/__transaction_log_0"
    assert set(log["managedLedgerInternalStats"]) >= ml_keys
    assert "transaction.subscription" in log["managedLedgerInternalStats"]["cursors"]
    missing = v3(txn_broker, "coordinatorInternalStats/99")
    assert (missing.status_code, missing.json()["reason"]) == (
        404, "Transaction coordinator not found! coordinator id : 99")

    tb = ok(txn_broker, f"transactionBufferInternalStats/{path}")
    assert tb["snapshotType"] == "Single" and set(tb) == {
        "snapshotType", "singleSnapshotSystemTopicInternalStats"}
    single = tb["singleSnapshotSystemTopicInternalStats"]
    assert set(single) == {"managedLedgerName", "managedLedgerInternalStats"}
    assert set(single["managedLedgerInternalStats"]) >= ml_keys | {"compactedLedger"}

    pa = ok(txn_broker, f"pendingAckInternalStats/{path}/s")["pendingAckLogStats"]
    tenant, ns, local = path.split("/")
    assert pa["managedLedgerName"] == f"{tenant}/{ns}/persistent/{local}-s__transaction_pending_ack"
    assert set(pa["managedLedgerInternalStats"]) >= ml_keys
    assert pa["managedLedgerInternalStats"]["numberOfEntries"] == 1
    assert "__pending_ack_state" in pa["managedLedgerInternalStats"]["cursors"]
    nosub = v3(txn_broker, f"pendingAckInternalStats/{path}/nosub")
    assert (nosub.status_code, nosub.json()["reason"]) == (
        404, f"{topic} not found subscription : nosub")
    gone = v3(txn_broker, f"transactionBufferInternalStats/{path}-missing")
    assert (gone.status_code, gone.json()["reason"]) == (404, f"Topic not found {topic}-missing")
    tx.end(txn, COMMIT)


def test_scale_transaction_coordinators(tx, txn_broker):
    """Last in this module (it adds a coordinator): fewer or as many replicas as now is 406 with
    Pulsar's text; more is 204, the list grows, and the new coordinator's first txn is (1,0)."""
    def scale(n: object) -> requests.Response:
        return requests.post(f"{txn_broker.admin_url}/admin/v3/transactions/"
                             "transactionCoordinator/replicas", json=n, timeout=30)

    r = scale(1)
    assert (r.status_code, r.json()["reason"]) == (
        406, "Number of transaction coordinators should be more than the current number of "
             "transaction coordinator")
    assert scale(2).status_code == 204
    assert [c["id"] for c in ok(txn_broker, "coordinators")] == [0, 1]

    tx.wire.send(lookup_frame(f"{TC_ASSIGN}-partition-1", tx._rid()))
    tx._answer({LOOKUP_RESPONSE})

    def connect() -> None:
        tx.request(TC_CLIENT_CONNECT_REQUEST, fv(2, 1), TC_CLIENT_CONNECT_RESPONSE, 2)
    eventually(connect, 60.0)
    body = tx.request(NEW_TXN, fv(2, TTL_MS) + fv(3, 1), NEW_TXN_RESPONSE)
    assert (body[3][0], body[2][0]) == (1, 0)


def test_disabled_broker_refuses(request, broker):
    """Without transactionCoordinatorEnabled every route answers 503 with Pulsar's reason."""
    if request.config.getoption("--broker-url", None):
        pytest.skip("--broker-url: the given broker has transactions on")
    r = v3(broker, "coordinatorStats")
    assert r.status_code == 503, r.text
    assert "transactionCoordinatorEnabled=true" in r.json()["reason"]
