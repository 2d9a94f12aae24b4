"""ACTIVE_CONSUMER_CHANGE on a Failover subscription of a non-partitioned topic, on raw frames:
who is told what, how many times, and in which order with the SUBSCRIBE's SUCCESS (issue 53
item 6, issue 43) and with the messages of a consumer taking over. Which consumer is active comes
from Pulsar's ring (helpers)."""

import os
import socket
import sys
import time
import uuid

import pytest

from helpers import predicted_failover_active

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from hostile_wire import (  # noqa: E402
    LOOKUP_RESPONSE,
    MESSAGE,
    PING,
    PONG,
    PRODUCER_SUCCESS,
    SEND_RECEIPT,
    SUCCESS,
    WireClient,
    base_command,
    close_consumer_frame,
    decode,
    entry,
    fb,
    flow_frame,
    frame,
    fv,
    lookup_frame,
    producer_frame,
    send_frame,
)

SUBSCRIBE, ACTIVE_CONSUMER_CHANGE = 4, 31
EXCLUSIVE, FAILOVER = 0, 2
# Pulsar tells of a change from its delayed read task, activeConsumerFailoverDelayTimeMillis
# (1 s) after it; "nothing (more) comes" waits past that.
QUIET_S = 1.5


def subscribe_frame(topic: str, name: str, consumer_id: int, request_id: int,
                    sub_type: int = FAILOVER) -> bytes:
    body = (fb(1, topic) + fb(2, "s") + fv(3, sub_type) + fv(4, consumer_id)
            + fv(5, request_id) + fb(6, name))
    return frame(base_command(SUBSCRIBE, body))


def commands(c: WireClient, want: int, quiet_s: float = 0.3) -> list[tuple]:
    """What the broker sends: ("SUCCESS", request id), ("ACC", consumer id, is_active), ("MSG",
    consumer id, (ledger, entry)); read until `want` came (5 s at most), then until nothing more
    comes for quiet_s."""
    out = []
    deadline = time.monotonic() + 5
    while True:
        wait = deadline - time.monotonic() if len(out) < want else quiet_s
        if wait <= 0:
            return out
        c.sock.settimeout(wait)
        try:
            got = c.recv_command()
        except socket.timeout:
            if len(out) >= want:
                return out
            continue
        if got is None:
            return out
        ctype, body = got
        if ctype == PING:
            c.send(frame(base_command(PONG, b"")))
        elif ctype == SUCCESS:
            out.append(("SUCCESS", body[1][0]))
        elif ctype == ACTIVE_CONSUMER_CHANGE:
            out.append(("ACC", body[1][0], bool(body.get(2, [0])[0])))
        elif ctype == MESSAGE:
            out.append(("MSG", body[1][0], message_position(body[2][0])))
        else:
            out.append((ctype,))


def message_position(message_id: bytes) -> tuple[int, int]:
    f = decode(message_id)
    return f[1][0], f[2][0]


def connect(broker, topic: str) -> WireClient:
    c = WireClient(int(broker.service_url.rsplit(":", 1)[1]), timeout=15)
    c.handshake()
    c.send(lookup_frame(topic, 1))  # Pulsar serves a topic once its bundle is looked up
    c.expect(LOOKUP_RESPONSE)
    return c


def failover_topic(c2_takes_over: bool) -> str:
    while True:
        topic = f"persistent://public/default/fo-events-{uuid.uuid4().hex[:8]}"
        if (predicted_failover_active(topic, ["c1", "c2"]) == "c2") == c2_takes_over:
            return topic


@pytest.mark.parametrize("c2_takes_over", [False, True], ids=["standby", "takeover"])
def test_active_consumer_change_whom_how_often_and_after_success(broker, c2_takes_over):
    topic = failover_topic(c2_takes_over)
    a, b = connect(broker, topic), connect(broker, topic)

    # The first consumer becomes active: SUCCESS, then it is told once.
    a.send(subscribe_frame(topic, "c1", 1, 10))
    assert commands(a, 2) == [("SUCCESS", 10), ("ACC", 1, True)]

    b.send(subscribe_frame(topic, "c2", 2, 20))
    if c2_takes_over:
        # The active consumer changed: each consumer is told once, the newcomer after SUCCESS.
        assert commands(b, 2) == [("SUCCESS", 20), ("ACC", 2, True)]
        assert commands(a, 1) == [("ACC", 1, False)]
    else:
        # Unchanged: only the newcomer is told (inactive); c1 hears nothing again.
        got_b = commands(b, 2)
        if broker.kind != "magnetar":
            # Pulsar 4.2 sends this one from addConsumer, before the SUCCESS (a client that only
            # knows the consumer after SUCCESS, as the Go client, drops it); Magnetar sends it
            # after, as every other ACTIVE_CONSUMER_CHANGE.
            assert sorted(got_b) == sorted([("SUCCESS", 20), ("ACC", 2, False)])
        else:
            assert got_b == [("SUCCESS", 20), ("ACC", 2, False)]
        assert commands(a, 0, QUIET_S) == []

    # c1 leaves: c2 is told it is active only if it was not already.
    a.send(close_consumer_frame(1, 11))
    assert commands(a, 1) == [("SUCCESS", 11)]
    if c2_takes_over:
        assert commands(b, 0, QUIET_S) == []
    else:
        assert commands(b, 1) == [("ACC", 2, True)]
    a.close()
    b.close()


def test_a_new_active_consumer_is_told_after_the_failover_delay(broker):
    """Pulsar tells a consumer that became active from its delayed read task,
    activeConsumerFailoverDelayTimeMillis (1 s by default) after the change, so well after the
    SUBSCRIBE's SUCCESS (the Go client's TestPartitionTopic_ActiveConsumerChanged needs the gap)."""
    topic = f"persistent://public/default/fo-delay-{uuid.uuid4().hex[:8]}"
    a = connect(broker, topic)
    a.send(subscribe_frame(topic, "c1", 1, 10))
    a.sock.settimeout(5)
    at = {}
    while len(at) < 2:
        got = a.recv_command()
        assert got is not None, at
        if got[0] == SUCCESS:
            at["SUCCESS"] = time.monotonic()
        elif got[0] == ACTIVE_CONSUMER_CHANGE:
            assert bool(got[1].get(2, [0])[0]), got
            at["ACC"] = time.monotonic()
        elif got[0] == PING:
            a.send(frame(base_command(PONG, b"")))
    a.close()
    gap = at["ACC"] - at["SUCCESS"]
    assert 0.5 <= gap <= 3.0, f"active-consumer notice {gap:.3f} s after SUCCESS"


def publish(broker, topic: str, n: int) -> list[tuple[int, int]]:
    """n messages from a raw producer; their positions in order (from the SEND_RECEIPTs)."""
    p = connect(broker, topic)
    p.send(producer_frame(topic, 1, 2))
    name = p.expect(PRODUCER_SUCCESS)[2][0].decode()
    p.send(b"".join(send_frame(1, seq, entry(name, seq, b"m-%d" % seq)) for seq in range(n)))
    positions = []
    while len(positions) < n:
        ctype, body = p.next_command("SEND_RECEIPTs")
        assert ctype == SEND_RECEIPT, (ctype, body)
        positions.append(message_position(body[3][0]))
    p.close()
    return positions


def switch_over(conns: dict[str, WireClient], ids: dict[str, int], topic: str, gone: str,
                req: int, positions: list, one_connection: bool) -> str:
    """CLOSE_CONSUMER for the active consumer `gone`; the one Pulsar's ring picks among those
    left must be told it is active, then get every message in order; the others are told they
    are not. Returns the new active consumer's name."""
    conns[gone].send(close_consumer_frame(ids.pop(gone), req))
    new = predicted_failover_active(topic, ids)
    expected = [("ACC", ids[new], True)] + [("MSG", ids[new], p) for p in positions]
    others = sorted(("ACC", ids[o], False) for o in ids if o != new)
    if one_connection:
        got = commands(conns[gone], 1 + len(expected) + len(others))
        assert ("SUCCESS", req) in got, got
        mine = [g for g in got if g[0] != "SUCCESS" and g[1] == ids[new]]
        rest = sorted(g for g in got if g[0] != "SUCCESS" and g[1] != ids[new])
    else:
        gone_conn = conns.pop(gone)
        assert commands(gone_conn, 1) == [("SUCCESS", req)]
        gone_conn.close()
        mine = commands(conns[new], len(expected))
        rest = sorted(g for o in ids if o != new for g in commands(conns[o], 1))
    first = next((i for i, g in enumerate(mine) if g[0] == "MSG"), len(mine))
    assert expected[0] in mine[:first], f"{new}: a MESSAGE before ACTIVE_CONSUMER_CHANGE: {mine}"
    assert mine == expected
    assert rest == others
    return new


@pytest.mark.parametrize("one_connection", [True, False], ids=["one-connection", "connection-each"])
def test_a_new_active_consumer_is_told_before_its_messages(broker, one_connection):
    """The active consumer closes with messages unacked (and, the first time, more waiting for
    permits): the consumer taking over, with permits, is told it is active before any MESSAGE,
    and every message, the unacked ones first, comes after the notice (Pulsar's delayed read
    task, PersistentDispatcherSingleActiveConsumer.scheduleReadOnActiveConsumer: notify, then
    read). Four consumers, so three switch-overs: each a chance to see the wrong order."""
    delivered, waiting = 10, 10
    topic = f"persistent://public/default/fo-order-{uuid.uuid4().hex[:8]}"
    names = ["c1", "c2", "c3", "c4"]
    ids = {name: i + 1 for i, name in enumerate(names)}
    shared = connect(broker, topic) if one_connection else None
    conns = {name: shared or connect(broker, topic) for name in names}
    for name in names:
        conns[name].send(subscribe_frame(topic, name, ids[name], 10 + ids[name]))
    time.sleep(QUIET_S)  # past the failover delay: every answer and notice (pinned above) is in
    distinct = list({id(c): c for c in conns.values()}.values())
    drained = {id(c): commands(c, 0) for c in distinct}
    for name in names:
        assert ("SUCCESS", 10 + ids[name]) in drained[id(conns[name])], drained

    active = predicted_failover_active(topic, names)
    conns[active].send(flow_frame(ids[active], delivered))
    positions = publish(broker, topic, delivered + waiting)
    got = commands(conns[active], delivered)
    assert got == [("MSG", ids[active], p) for p in positions[:delivered]]
    for name in names:
        if name != active:
            conns[name].send(flow_frame(ids[name], delivered + waiting))

    for req in range(100, 100 + len(names) - 1):
        active = switch_over(conns, ids, topic, active, req, positions, one_connection)
    for c in distinct:
        c.close()


def test_no_active_consumer_change_on_exclusive(broker, topic):
    c = connect(broker, topic)
    c.send(subscribe_frame(topic, "c1", 1, 10, sub_type=EXCLUSIVE))
    assert commands(c, 1, QUIET_S) == [("SUCCESS", 10)]
    c.close()
