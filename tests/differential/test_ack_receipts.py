"""Ack receipts (ACK with a request id, the clients' ackReceiptEnabled) as Pulsar answers them: at
once, when the ack is applied, not when the cursor's write completes. Pulsar's
Consumer.messageAcked completes a non-transactional ack in the same pass, so its ACK_RESPONSE
goes out before the answer to any command sent after the ACK on that connection; the cursor is
written later (managedLedgerDefaultMarkDeleteRateLimit)."""

import os
import sys

import pulsar

from helpers import receive_n

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from hostile_wire import (  # noqa: E402
    ACK,
    ACK_RESPONSE,
    MESSAGE,
    SUCCESS,
    WireClient,
    base_command,
    decode,
    error_name,
    fb,
    flow_frame,
    frame,
    fv,
    subscribe_frame,
)

GET_LAST_MESSAGE_ID, GET_LAST_MESSAGE_ID_RESPONSE = 29, 30
EXCLUSIVE, SHARED = 0, 1
INDIVIDUAL, CUMULATIVE = 0, 1


def _id(ledger, entry, ack_set=()):
    return fv(1, ledger) + fv(2, entry) + b"".join(fv(5, w) for w in ack_set)


def _ack(consumer_id, ack_type, ids, request_id):
    body = fv(1, consumer_id) + fv(2, ack_type) + b"".join(fb(3, i) for i in ids)
    return frame(base_command(ACK, body + fv(8, request_id)))


def _next(c, skip_messages=True):
    while True:
        got = c.next_command()
        if got[0] != MESSAGE or not skip_messages:
            return got


def _receipt_comes_first(c, consumer_id, ack_frame, request_id):
    """Sends the ACK and a GET_LAST_MESSAGE_ID in one write; returns the order of their answers
    and checks the receipt carries no error."""
    c.send(ack_frame + frame(base_command(
        GET_LAST_MESSAGE_ID, fv(1, consumer_id) + fv(2, request_id + 1))))
    order = []
    while len(order) < 2:
        ctype, body = _next(c)
        if ctype == ACK_RESPONSE:
            assert body[6] == [request_id], body
            assert 4 not in body, f"ack answered with {error_name(body, 4)}: {body.get(5)}"
            order.append("ack")
        elif ctype == GET_LAST_MESSAGE_ID_RESPONSE:
            assert body[2] == [request_id + 1], body
            order.append("last-id")
        else:
            raise AssertionError(f"unexpected command {ctype}: {body}")
    return order


def _subscribe(broker, topic, sub, sub_type, n):
    c = WireClient(int(broker.service_url.rsplit(":", 1)[1]), timeout=15)
    c.handshake()
    c.send(subscribe_frame(topic, sub, 1, 1, sub_type=sub_type, earliest=True))
    c.expect(SUCCESS)
    c.send(flow_frame(1, 1000))
    ids = []
    while len(ids) < n:
        ctype, body = _next(c, skip_messages=False)
        assert ctype == MESSAGE, (ctype, body)
        mid = decode(body[2][0])
        ids.append((mid[1][0], mid[2][0]))
    return c, ids


def test_ack_receipts_are_answered_when_applied(broker, client, topic):
    """Individual, list, batch-index and cumulative acks: each receipt precedes the answer to the
    GET_LAST_MESSAGE_ID sent right after it."""
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(6):
        producer.send(f"plain-{i}".encode())
    batched = client.create_producer(topic, batching_enabled=True,
                                     batching_max_publish_delay_ms=60_000,
                                     batching_max_messages=5)
    for i in range(5):
        batched.send_async(f"batched-{i}".encode(), None)
    batched.flush()
    producer.send(b"tail")

    c, ids = _subscribe(broker, topic, "receipts", EXCLUSIVE, 8)  # 6 plain, 1 batch, 1 tail
    (l0, e0), (l1, e1), (l2, e2), (l3, e3) = ids[0], ids[1], ids[2], ids[3]
    cases = [
        ("individual", _ack(1, INDIVIDUAL, [_id(l0, e0)], 10)),
        ("list", _ack(1, INDIVIDUAL, [_id(l1, e1), _id(l2, e2), _id(l3, e3)], 20)),
        # Batch indexes 0 and 1 of the 5-message batch (bit i set = index i still unacked).
        ("batch-index", _ack(1, INDIVIDUAL, [_id(*ids[6], ack_set=[0b11100])], 30)),
        ("cumulative", _ack(1, CUMULATIVE, [_id(*ids[5])], 40)),
    ]
    for name, ack in cases:
        request_id = int.from_bytes(ack[-1:], "big")  # the one-byte varint request id
        assert _receipt_comes_first(c, 1, ack, request_id) == ["ack", "last-id"], name
    c.close()
    producer.close()
    batched.close()


def test_cumulative_ack_on_shared_is_ignored_and_answered(broker, client, topic):
    """Pulsar ignores a cumulative ack on a Shared subscription ("Received cumulative ack on shared
    subscription, ignoring") and still answers the receipt without an error."""
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(4):
        producer.send(f"m-{i}".encode())
    c, ids = _subscribe(broker, topic, "shared-cumulative", SHARED, 4)
    assert _receipt_comes_first(c, 1, _ack(1, CUMULATIVE, [_id(*ids[3])], 50), 50) == \
        ["ack", "last-id"]
    c.close()
    # Nothing was acknowledged: a new consumer gets all four again.
    consumer = client.subscribe(topic, "shared-cumulative",
                                consumer_type=pulsar.ConsumerType.Shared)
    got = sorted(m.data().decode() for m in receive_n(consumer, 4))
    assert got == [f"m-{i}" for i in range(4)]
    consumer.close()
    producer.close()
