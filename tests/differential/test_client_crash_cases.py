"""The two C++ client crashes of issue 53 item 7, as raw frames: what the broker answers in each
sequence, the same on Magnetar and on Apache Pulsar 4.2.4. Both crashes are the client's own.

1. Acknowledging a list of message ids across the consumers of one subscription (the C++
   client's AcknowledgeTest.testAckMsgListWithMultiConsumer: a 5-partition topic, one
   MultiTopicsConsumerImpl, ACKs of several ids per partition, with and without ack receipts, then
   REDELIVER_UNACKNOWLEDGED_MESSAGES). Not reproduced on either broker (pulsar-tests
   --gtest_filter='*testAckMsgListWithMultiConsumer*' with --gtest_repeat): 0 crashes in 200
   executions of its 4 parameter sets on Magnetar, 40 on a binary from before the ack-receipt
   change (675080b), 100 on Pulsar; 0 also with the caller held 200 ms after each ACK is handed to
   the connection (its receipt then completes first, on the I/O thread). The broker side is pinned
   by test_list_acks_of_every_consumer_of_a_subscription: one ACK_RESPONSE per ACK, with its
   request id, nothing redelivered, nothing else sent.

2. Shutting consumers down (Pulsar/ShutdownTest.testClose/2: a regex consumer closed, subscribed
   again, unsubscribed). SIGSEGV in MultiTopicsConsumerImpl::unsubscribeAsync
   (MultiTopicsConsumerImpl.cc:355, inside SynchronizedHashMap::forEachValue, from
   Consumer::unsubscribe). The client walks its consumers map and calls each
   ConsumerImpl::unsubscribeAsync, which sends the UNSUBSCRIBE and then adds its response listener
   to the request's future. When the broker's SUCCESS has been read by the I/O thread before that
   addListener, the listener runs at once on the caller's thread: the last one completes the
   multi-topics unsubscribe, whose internalShutdown() clears the map being walked (its recursive
   mutex lets the same thread in), and the loop then uses the freed entry. A use-after-free in the
   client that needs only a fast answer: Magnetar answers UNSUBSCRIBE within microseconds, Pulsar
   after 20-40 ms (its cursor deletion). Counts (pulsar-tests --gtest_filter='*ShutdownTest*'
   --gtest_repeat=50, 20 runs per broker): Magnetar 20 of 20 runs SIGSEGV (0 of 40 runs without
   --gtest_repeat), Pulsar 0 of 20. With the caller held 200 ms after sendRequestWithId returns
   for the UNSUBSCRIBE (gdb in non-stop mode, a FinishBreakpoint on
   ClientConnection::sendRequestWithId holding that thread only, so the I/O thread reads the answer
   meanwhile) testClose/2 segfaults with the same frames on both: 5 of 5 runs on each. The broker
   side is pinned by test_unsubscribe_and_close_are_answered_once_each: one answer per request, no
   CLOSE_CONSUMER or other frame for an unsubscribed or closed consumer.

The client's own frames in both tests (strace of pulsar-tests: ShutdownTest.testClose/2 and
testAckMsgListWithMultiConsumer/0_0, 0_1, 100_1, one run each per broker) carry the same
requests, each answered by the same command type, the same MESSAGEs and SEND_RECEIPTs and nothing
else from either broker; the one difference is a second connection on Pulsar, whose lookups
answer its advertisedAddress 127.0.0.1 (tools/pulsar-reference) where Magnetar's answer localhost.
"""

import os
import sys
import time
import uuid

import pytest
import requests

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from hostile_wire import (  # noqa: E402
    ACK,
    ACK_RESPONSE,
    ERROR,
    LOOKUP,
    LOOKUP_RESPONSE,
    MESSAGE,
    PRODUCER_SUCCESS,
    SUCCESS,
    UNSUBSCRIBE,
    WireClient,
    base_command,
    close_consumer_frame,
    close_producer_frame,
    decode,
    error_name,
    fb,
    flow_frame,
    frame,
    fv,
    producer_frame,
    subscribe_frame,
)

REDELIVER_UNACKNOWLEDGED_MESSAGES = 20
SHARED = 1
PARTITIONS = 5
PER_PARTITION = 20


def _port(broker):
    return int(broker.service_url.rsplit(":", 1)[1])


def _lookup(c, topic, request_id):
    """A LOOKUP first: Pulsar takes the topic's bundle on it (raw commands need an owner)."""
    c.send(frame(base_command(LOOKUP, fb(1, topic) + fv(2, request_id))))
    ctype, body = c.next_command()
    assert ctype == LOOKUP_RESPONSE, (ctype, body)


@pytest.fixture
def partitioned_topic(admin_url):
    name = f"public/default/crash-{uuid.uuid4().hex[:8]}"
    r = requests.put(f"{admin_url}/admin/v2/persistent/{name}/partitions", json=PARTITIONS,
                     timeout=30)
    assert r.status_code == 204, r.text
    yield f"persistent://{name}"
    requests.delete(f"{admin_url}/admin/v2/persistent/{name}/partitions",
                    params={"force": "true"}, timeout=30)


def _ack(consumer_id, ids, request_id=None):
    body = fv(1, consumer_id) + fv(2, 0) + b"".join(fb(3, fv(1, le) + fv(2, en)) for le, en in ids)
    if request_id is not None:
        body += fv(8, request_id)
    return frame(base_command(ACK, body))


@pytest.mark.admin
def test_list_acks_of_every_consumer_of_a_subscription(broker, client, partitioned_topic):
    """Case 1. One connection holds a Shared consumer on each partition of a 5-partition topic,
    one subscription (what the C++ client's multi-topics consumer opens). After every message is
    received, one write carries, per consumer, its ids in two ACKs of 10 (the client's
    ackGroupingMaxSize) with request ids, one more ACK of the same ids without a request id (a
    duplicate), then REDELIVER_UNACKNOWLEDGED_MESSAGES for every consumer. Each ACK with a request
    id gets exactly one ACK_RESPONSE carrying that request id and its consumer id and no error;
    nothing else comes: no answer to the ACK without a request id, no redelivery, no
    CLOSE_CONSUMER. A new consumer of the subscription then gets nothing."""
    partitions = [f"{partitioned_topic}-partition-{p}" for p in range(PARTITIONS)]
    for p, t in enumerate(partitions):
        producer = client.create_producer(t, batching_enabled=False)
        for i in range(PER_PARTITION):
            producer.send(f"p{p}-{i}".encode())
        producer.close()

    c = WireClient(_port(broker), timeout=15)
    c.handshake()
    for p, t in enumerate(partitions):
        _lookup(c, t, 100 + p)
    c.send(b"".join(subscribe_frame(t, "sub-ack-list", p + 1, p + 1, sub_type=SHARED,
                                    earliest=True) for p, t in enumerate(partitions)))
    answered = set()
    while answered != set(range(1, PARTITIONS + 1)):
        ctype, body = c.next_command()
        assert ctype == SUCCESS, (ctype, body)
        answered.add(body[1][0])
    c.send(b"".join(flow_frame(p + 1, 1000) for p in range(PARTITIONS)))
    ids = {p + 1: [] for p in range(PARTITIONS)}
    while sum(len(v) for v in ids.values()) < PARTITIONS * PER_PARTITION:
        ctype, body = c.next_command()
        assert ctype == MESSAGE, (ctype, body)
        mid = decode(body[2][0])
        ids[body[1][0]].append((mid[1][0], mid[2][0]))
    assert all(len(v) == PER_PARTITION for v in ids.values()), {k: len(v) for k, v in ids.items()}

    out = b""
    request_ids = {}
    for cid, got in ids.items():
        for half in (0, 1):
            rid = 1000 + cid * 10 + half
            request_ids[rid] = cid
            out += _ack(cid, got[half * 10:(half + 1) * 10], rid)
        out += _ack(cid, got)  # the same ids again, no receipt asked
    out += b"".join(frame(base_command(REDELIVER_UNACKNOWLEDGED_MESSAGES, fv(1, cid)))
                    for cid in ids)
    c.send(out)
    got = c.commands_within(3)
    receipts = [(b[6][0], b[1][0], error_name(b, 4) if 4 in b else None)
                for t, b in got if t == ACK_RESPONSE]
    others = [(t, b) for t, b in got if t != ACK_RESPONSE]
    assert sorted(receipts) == sorted((rid, cid, None) for rid, cid in request_ids.items()), got
    assert others == [], f"more than the receipts: {others}"

    c.send(b"".join(close_consumer_frame(cid, 2000 + cid) for cid in ids))
    closes = c.commands_within(2)
    assert sorted((t, b[1][0]) for t, b in closes) == [(SUCCESS, 2000 + cid) for cid in ids]
    c.close()

    d = WireClient(_port(broker), timeout=15)
    d.handshake()
    d.send(b"".join(subscribe_frame(t, "sub-ack-list", p + 1, p + 1, sub_type=SHARED)
                    for p, t in enumerate(partitions)))
    d.send(b"".join(flow_frame(p + 1, 1000) for p in range(PARTITIONS)))
    later = d.commands_within(2)
    assert sorted(t for t, _b in later) == [SUCCESS] * PARTITIONS, later
    d.close()


@pytest.mark.admin
def test_unsubscribe_and_close_are_answered_once_each(broker, partitioned_topic):
    """Case 2, Pulsar/ShutdownTest.testClose's sequence on one connection: a producer created and
    closed, a consumer subscribed and closed, then subscribed again on every partition of a
    2-partition subscription (the multi-topics consumer) and unsubscribed on all of them in one
    write. Each request gets exactly one answer (PRODUCER_SUCCESS, then SUCCESS; the two
    UNSUBSCRIBEs, of two topics, in either order on both brokers) and nothing else comes for those
    ids: no CLOSE_CONSUMER, no ERROR. An unsubscribed id is unknown afterwards on both brokers:
    UNSUBSCRIBE again is MetadataError 'Consumer not found', CLOSE_CONSUMER is SUCCESS. The
    subscriptions are gone."""
    admin = broker.admin_url
    parts = [f"{partitioned_topic}-partition-{p}" for p in range(2)]
    c = WireClient(_port(broker), timeout=15)
    c.handshake()
    for p, t in enumerate(parts):
        _lookup(c, t, 90 + p)

    def exchange(data, expected):
        c.send(data)
        got = [c.next_command() for _ in expected]
        assert sorted((t, b[1][0]) for t, b in got) == expected, got
        return got

    # Each request after the answer to the one before, as the client sends them.
    exchange(producer_frame(parts[0], 1, 1), [(PRODUCER_SUCCESS, 1)])
    exchange(close_producer_frame(1, 2), [(SUCCESS, 2)])
    exchange(subscribe_frame(parts[0], "sub", 1, 3), [(SUCCESS, 3)])
    exchange(close_consumer_frame(1, 4), [(SUCCESS, 4)])
    exchange(subscribe_frame(parts[0], "sub", 2, 5), [(SUCCESS, 5)])
    exchange(subscribe_frame(parts[1], "sub", 3, 6), [(SUCCESS, 6)])
    unsubscribes = (frame(base_command(UNSUBSCRIBE, fv(1, 2) + fv(2, 7)))
                    + frame(base_command(UNSUBSCRIBE, fv(1, 3) + fv(2, 8))))
    t0 = time.monotonic()
    exchange(unsubscribes, [(SUCCESS, 7), (SUCCESS, 8)])
    print(f"{broker.kind}: two UNSUBSCRIBEs answered in {(time.monotonic() - t0) * 1000:.2f} ms")
    assert c.commands_within(2) == [], "frames after the answers"

    c.send(frame(base_command(UNSUBSCRIBE, fv(1, 2) + fv(2, 9))) + close_consumer_frame(3, 10))
    answers = {b[1][0]: (t, b) for t, b in (c.next_command(), c.next_command())}
    t1, b1 = answers[9]
    assert (t1, error_name(b1, 2), b1[3][0].decode()) == \
        (ERROR, "MetadataError", "Consumer not found"), b1
    assert answers[10][0] == SUCCESS, answers[10]
    assert c.alive()
    c.close()
    for t in parts:
        stats = requests.get(f"{admin}/admin/v2/persistent/{t.split('://', 1)[1]}/stats",
                             timeout=30).json()
        assert "sub" not in stats.get("subscriptions", {}), stats
