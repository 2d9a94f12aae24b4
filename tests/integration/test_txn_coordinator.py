"""The transaction coordinator's commands on the wire (src/broker/service/server_cnx_txn.cc):
TC_CLIENT_CONNECT_REQUEST, NEW_TXN, ADD_PARTITION_TO_TXN, END_TXN with Pulsar's answers and
errors, refused when transactionCoordinatorEnabled is off, and the coordinator's log recovered
after a restart (ids never reused, an open transaction kept). Raw frames, since the official
Python client has no transaction API."""

from __future__ import annotations

import pytest
import requests

from harness.transactions import TxnWire
from hostile_wire import (
    ERROR,
    HostileBroker,
    WireClient,
    base_command,
    error_name,
    fb,
    frame,
    fv,
    port_of,
)

TC_CONNECT, TC_CONNECT_RESPONSE = 62, 63
NEW_TXN, NEW_TXN_RESPONSE = 50, 51
ADD_PARTITION, ADD_PARTITION_RESPONSE = 52, 53
END_TXN, END_TXN_RESPONSE = 56, 57
COMMIT, ABORT = 0, 1


def tc_connect(rid: int, tc: int) -> bytes:
    return frame(base_command(TC_CONNECT, fv(1, rid) + fv(2, tc)))


def new_txn(rid: int, tc: int, ttl_ms: int = 60000) -> bytes:
    return frame(base_command(NEW_TXN, fv(1, rid) + fv(2, ttl_ms) + fv(3, tc)))


def add_partition(rid: int, most: int, least: int, topic: str) -> bytes:
    body = fv(1, rid) + fv(2, least) + fv(3, most) + fb(4, topic)
    return frame(base_command(ADD_PARTITION, body))


def end_txn(rid: int, most: int, least: int, action: int) -> bytes:
    return frame(base_command(END_TXN, fv(1, rid) + fv(2, least) + fv(3, most) + fv(4, action)))


def open_txn(c: WireClient, rid: int, tc: int = 0) -> tuple[int, int]:
    c.send(new_txn(rid, tc))
    r = c.expect(NEW_TXN_RESPONSE)
    assert r[1] == [rid] and 4 not in r, r
    return r[3][0], r[2][0]


@pytest.fixture
def txn_broker():
    b = HostileBroker(["transactionCoordinatorEnabled=true"])
    b.start()
    yield b
    b.close()


def test_refused_when_transactions_are_off():
    with HostileBroker() as b:
        b.start()
        c = WireClient.connected(port_of(b.endpoint))
        for req in (tc_connect(1, 0), new_txn(1, 0), end_txn(1, 0, 1, COMMIT)):
            c.send(req)
            err = c.expect(ERROR)
            assert err[1] == [1]
            assert error_name(err, 2) == "NotAllowedError"
            assert err[3] == [b"Transactions are not enabled."]
        c.close()


def test_new_and_end_transactions(txn_broker):
    c = WireClient.connected(port_of(txn_broker.endpoint))
    c.send(tc_connect(1, 0))
    ok = c.expect(TC_CONNECT_RESPONSE)
    assert ok[1] == [1] and 2 not in ok
    assert open_txn(c, 2) == (0, 0)  # Pulsar's first id: the sequence starts at -1
    assert open_txn(c, 3) == (0, 1)
    # An empty transaction commits; ending it again: it is gone (TransactionNotFound).
    c.send(end_txn(4, 0, 0, COMMIT))
    r = c.expect(END_TXN_RESPONSE)
    assert r[1] == [4] and 4 not in r and r[2] == [0] and r[3] == [0]
    c.send(end_txn(5, 0, 0, ABORT))
    r = c.expect(END_TXN_RESPONSE)
    assert error_name(r, 4) == "TransactionNotFound"
    assert r[5] == [b"The transaction with this txdID `(0,0)`not found "]
    c.send(add_partition(6, 0, 99, "persistent://public/default/t"))
    r = c.expect(ADD_PARTITION_RESPONSE)
    assert error_name(r, 4) == "TransactionNotFound"
    c.send(end_txn(7, 0, 1, ABORT))
    assert 4 not in c.expect(END_TXN_RESPONSE)
    # A coordinator this broker does not serve.
    c.send(new_txn(8, 5))
    r = c.expect(NEW_TXN_RESPONSE)
    assert error_name(r, 4) == "TransactionCoordinatorNotFound"
    assert r[3] == [5]
    assert r[5] == [b"Transaction coordinator with id 5 not found!"]
    c.close()


def test_log_recovered_after_restart(txn_broker):
    c = WireClient.connected(port_of(txn_broker.endpoint))
    assert open_txn(c, 1) == (0, 0)
    assert open_txn(c, 2) == (0, 1)
    c.send(end_txn(3, 0, 1, COMMIT))
    assert 4 not in c.expect(END_TXN_RESPONSE)
    c.close()
    txn_broker.restart()
    c = WireClient.connected(port_of(txn_broker.endpoint))
    assert open_txn(c, 1) == (0, 2)  # the sequence went on
    c.send(end_txn(2, 0, 0, ABORT))  # (0,0) was still open: recovered
    assert 4 not in c.expect(END_TXN_RESPONSE)
    c.send(end_txn(3, 0, 1, COMMIT))  # (0,1) had ended
    assert error_name(c.expect(END_TXN_RESPONSE), 4) == "TransactionNotFound"
    c.close()


def test_commit_ends_when_its_subscription_or_topic_name_is_gone():
    """A transaction that acked on a subscription deleted before the commit, or that named a topic
    no topic can have, still ends: the commit succeeds and the coordinator holds nothing open
    (Pulsar's commit succeeds too; before, ours retried END_TXN_ON_SUBSCRIPTION forever)."""
    with HostileBroker(["transactionCoordinatorEnabled=true"]) as b:
        ep = b.start()
        a, w = TxnWire(ep), TxnWire(ep)
        out, src = "persistent://public/default/gone-out", "persistent://public/default/gone-in"
        w.subscribe(src, "s", 3)
        a.send(src, b"in")
        (cid, ledger, entry, _), = w.receive(1)
        t = a.new_txn()
        a.add_subscription(t, src, "s")
        w.ack(cid, ledger, entry, t)
        a.add_partition(t, out)
        a.add_partition(t, "persistent://bad name")
        a.send(out, b"txn", t)
        w.close()
        r = requests.delete(f"{ep.admin_url}/admin/v2/persistent/public/default/gone-in/"
                            "subscription/s?force=true", timeout=30)
        assert r.status_code == 204, r.text
        a.end(t, COMMIT)
        stats = requests.get(f"{ep.admin_url}/admin/v3/transactions/coordinatorStats",
                             timeout=10).json()
        assert stats["0"]["ongoingTxnSize"] == 0, stats
        a.close()


END_TXN_ON_PARTITION, END_TXN_ON_PARTITION_RESPONSE = 58, 59
END_TXN_ON_SUBSCRIPTION, END_TXN_ON_SUBSCRIPTION_RESPONSE = 60, 61


def test_end_txn_on_a_topic_never_created_answers_success(txn_broker):
    """END_TXN_ON_PARTITION and END_TXN_ON_SUBSCRIPTION (what a coordinator sends the owner of a
    topic) for a topic that does not exist, or no longer does, answer success as Pulsar 4.2.4's
    handleEndTxnOnPartition / handleEndTxnOnSubscription ("has not been created"), so the
    coordinator's end completes (before, END_TXN_ON_SUBSCRIPTION answered UnknownError "The topic
    ... is not exist in broker." and the coordinator retried it forever)."""
    topic = "persistent://public/default/never-created-txn-end"
    c = WireClient.connected(port_of(txn_broker.endpoint))
    body = fv(1, 1) + fv(2, 7) + fv(3, 0) + fb(4, topic.encode()) + fv(5, COMMIT)
    c.send(frame(base_command(END_TXN_ON_PARTITION, body)))
    r = c.expect(END_TXN_ON_PARTITION_RESPONSE)
    assert 4 not in r, r
    sub = fb(1, topic.encode()) + fb(2, b"s")
    c.send(frame(base_command(END_TXN_ON_SUBSCRIPTION,
                              fv(1, 2) + fv(2, 7) + fv(3, 0) + fb(4, sub) + fv(5, COMMIT))))
    r = c.expect(END_TXN_ON_SUBSCRIPTION_RESPONSE)
    assert 4 not in r, (error_name(r, 4), r.get(5))
    c.close()
