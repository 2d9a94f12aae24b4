"""Hostile transactional clients (issue 45): requests a well-behaved client never sends, each
answered with Pulsar's error (or a stricter one, said where) while the broker keeps serving.
Raw frames (tests/harness/transactions.py); standalone brokers of their own."""

from __future__ import annotations

import pytest
import requests

from harness.auth import SUPER_USER, new_secret_key, role_token, token_auth_settings
from harness.transactions import COMMIT, TxnError, TxnWire
from hostile_wire import (
    ERROR,
    PRODUCER_SUCCESS,
    HostileBroker,
    WireClient,
    base_command,
    error_name,
    fb,
    frame,
    fv,
    port_of,
    producer_frame,
    subscribe_frame,
)

TC_CONNECT, TC_CONNECT_RESPONSE = 62, 63
NEW_TXN, NEW_TXN_RESPONSE = 50, 51
END_TXN_ON_PARTITION, END_TXN_ON_PARTITION_RESPONSE = 58, 59
END_TXN_ON_SUBSCRIPTION, END_TXN_ON_SUBSCRIPTION_RESPONSE = 60, 61
U64_MAX = (1 << 64) - 1


@pytest.fixture(scope="module")
def txn_broker():
    b = HostileBroker(["transactionCoordinatorEnabled=true"])
    b.start()
    yield b
    b.close()


def coordinator_stats(b: HostileBroker) -> dict:
    r = requests.get(f"{b.endpoint.admin_url}/admin/v3/transactions/coordinatorStats", timeout=10)
    assert r.status_code == 200, r.text
    return r.json()


def test_tc_connect_only_for_the_assign_topics_partitions(txn_broker):
    """Standalone has one coordinator (the assign topic's one partition). TC_CLIENT_CONNECT for
    any other id answers TransactionCoordinatorNotFound and loads nothing (before: every id was
    loaded, each with a transaction log of its own kept open, and an id above INT_MAX was taken
    for another partition in cluster mode). Pulsar 4.2.4 loads such an id when its (int-cast)
    partition's bundle is owned; no client asks for one it did not read from the metadata."""
    c = WireClient.connected(port_of(txn_broker.endpoint))
    for i, tc in enumerate((1, 7, 1 << 32, U64_MAX)):
        c.send(frame(base_command(TC_CONNECT, fv(1, i) + fv(2, tc))))
        r = c.expect(TC_CONNECT_RESPONSE)
        assert r[1] == [i]
        assert error_name(r, 2) == "TransactionCoordinatorNotFound", r
        assert r[3] == [f"Transaction coordinator with id {tc} not found!".encode()]
        c.send(frame(base_command(NEW_TXN, fv(1, 100 + i) + fv(2, 1000) + fv(3, tc))))
        r = c.expect(NEW_TXN_RESPONSE)
        assert error_name(r, 4) == "TransactionCoordinatorNotFound", r
    c.send(frame(base_command(TC_CONNECT, fv(1, 9) + fv(2, 0))))
    assert 2 not in c.expect(TC_CONNECT_RESPONSE)
    assert sorted(coordinator_stats(txn_broker)) == ["0"]
    c.close()


def test_transaction_internal_names_are_not_topics(txn_broker):
    """A producer or consumer on the name of a subscription's pending-ack store or of a
    coordinator's log is refused with Pulsar's NotAllowedError "Can not create transaction system
    topic ..." (before: the topic opened the pending-ack store's own ledger from another
    executor, and the broker aborted on the ledger's thread check, "setRetention: DCHECK
    failed"); the transaction still commits and its ack takes effect."""
    ep = txn_broker.endpoint
    topic = "persistent://public/default/internal-victim"
    a, w = TxnWire(ep), TxnWire(ep, connect_tc=False)
    w.subscribe(topic, "s", 1)
    a.send(topic, b"in")
    (cid, ledger, entry, _), = w.receive(1)
    t = a.new_txn()
    a.add_subscription(t, topic, "s")
    w.ack(cid, ledger, entry, t)  # creates the subscription's pending-ack store
    c = WireClient.connected(port_of(ep))
    for rid, name in enumerate((topic + "-s__transaction_pending_ack",
                                "persistent://pulsar/system/__transaction_log_0",
                                "persistent://pulsar/system/transaction_coordinator_assign"
                                "-partition-0"), start=1):
        c.send(producer_frame(name, rid, rid))
        err = c.expect(ERROR)
        assert error_name(err, 2) == "NotAllowedError", err
        assert err[3] == [f"Can not create transaction system topic {name}".encode()], err
        c.send(subscribe_frame(name, "x", 10 + rid, 10 + rid))
        assert error_name(c.expect(ERROR), 2) == "NotAllowedError"
    c.send(producer_frame(topic + "-s", 9, 9))  # a name that only looks alike is a topic
    c.expect(PRODUCER_SUCCESS)
    c.close()
    a.end(t, COMMIT)
    r = requests.get(f"{ep.admin_url}/admin/v2/persistent/public/default/internal-victim/stats",
                     timeout=10)
    assert r.json()["subscriptions"]["s"]["msgBacklog"] == 0, r.text
    a.close()
    w.close()


def test_commit_naming_names_that_are_not_topics_ends(txn_broker):
    """ADD_PARTITION_TO_TXN / ADD_SUBSCRIPTION_TO_TXN with a partitioned topic's own name (not a
    partition's) or a transaction-internal name: nothing can be published there, so the commit
    ends at once, as on Pulsar. (The internal names are refused as topics since this test's
    change, kNotAllowed; the transaction buffer client and END_TXN_ON_* take that as "nothing to
    end", else the coordinator would retry the end every second forever.)"""
    ep = txn_broker.endpoint
    base = "persistent://public/default/txn-parted"
    r = requests.put(f"{ep.admin_url}/admin/v2/persistent/public/default/txn-parted/partitions",
                     json=2, timeout=10)
    assert r.status_code == 204, r.text
    a = TxnWire(ep)
    for name in (base, base + "-s__transaction_pending_ack",
                 "persistent://pulsar/system/__transaction_log_0"):
        t = a.new_txn()
        a.add_partition(t, name)
        a.add_subscription(t, name, "s")
        a.end(t, COMMIT)
        assert coordinator_stats(txn_broker)["0"]["ongoingTxnSize"] == 0, name
    a.close()


@pytest.fixture(scope="module")
def auth_broker():
    key = new_secret_key()
    b = HostileBroker(["transactionCoordinatorEnabled=true", *token_auth_settings(key)])
    b.start()
    yield b, key
    b.close()


def test_end_txn_on_a_topic_needs_a_super_user(auth_broker):
    """END_TXN_ON_PARTITION and END_TXN_ON_SUBSCRIPTION are the coordinator's (broker to broker):
    with authorization on, another role gets Pulsar's TransactionNotFound "TC client (role) is
    not a super user, and is not allowed to operate on transaction (m,l)" (before:
    END_TXN_ON_SUBSCRIPTION was served for anyone, so any client could commit or abort the held
    acks of another's transaction; END_TXN_ON_PARTITION answered NotAllowedError with another
    text) and the transaction is left as it was."""
    b, key = auth_broker
    ep = b.endpoint
    topic = "persistent://public/default/txn-auth"
    admin = role_token(key, SUPER_USER)
    a, w = TxnWire(ep, token=admin), TxnWire(ep, connect_tc=False, token=admin)
    w.subscribe(topic, "s", 1)
    a.send(topic, b"in")
    (cid, ledger, entry, _), = w.receive(1)
    t = a.new_txn()
    a.add_subscription(t, topic, "s")
    a.add_partition(t, topic)
    w.ack(cid, ledger, entry, t)
    a.send(topic, b"txn", t)
    intruder = TxnWire(ep, connect_tc=False, token=role_token(key, "alice"))
    want = (f"TC client (alice) is not a super user, and is not allowed to operate on "
            f"transaction ({t[0]},{t[1]})")
    txn = fv(2, t[1]) + fv(3, t[0])
    for ctype, body, answer in (
            (END_TXN_ON_SUBSCRIPTION, txn + fb(4, fb(1, topic) + fb(2, "s")) + fv(5, COMMIT),
             END_TXN_ON_SUBSCRIPTION_RESPONSE),
            (END_TXN_ON_PARTITION, txn + fb(4, topic) + fv(5, COMMIT),
             END_TXN_ON_PARTITION_RESPONSE)):
        with pytest.raises(TxnError) as e:
            intruder.request(ctype, body, answer)
        assert (e.value.error, e.value.message) == ("TransactionNotFound", want)
    # Nothing ended: the ack is still held (not in the cursor) and the message invisible.
    r = requests.get(f"{ep.admin_url}/admin/v2/persistent/public/default/txn-auth/stats",
                     headers={"Authorization": f"Bearer {admin}"}, timeout=10)
    assert r.json()["subscriptions"]["s"]["msgBacklog"] >= 1, r.text
    a.end(t, COMMIT)
    assert len(w.receive(2)) == 2  # the committed message arrives after the commit
    for c in (a, w, intruder):
        c.close()


def test_broker_still_serves_after_the_hostile_requests(txn_broker):
    """The module's broker took every request above and still serves a whole transaction."""
    a = TxnWire(txn_broker.endpoint)
    t = a.new_txn()
    a.add_partition(t, "persistent://public/default/after-hostile")
    a.send("persistent://public/default/after-hostile", b"x", t)
    a.end(t, COMMIT)
    a.close()
