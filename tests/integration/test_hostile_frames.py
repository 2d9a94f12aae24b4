"""Hostile frames on the binary protocol. Each case costs the sending connection an error answer
or the connection itself, bumps magnetar_protocol_errors_total{error=...}, and leaves everyone
else alone: a bystander producer and consumer (official client) keep working in order, and
messages stored before are still readable after."""

import socket
import struct
import time

import pulsar
import pytest

from hostile_wire import (
    ACK_RESPONSE,
    CONNECTED,
    ERROR,
    PONG,
    PRODUCER_SUCCESS,
    SEND_ERROR,
    SEND_RECEIPT,
    SUCCESS,
    CounterDelta,
    HostileBroker,
    WireClient,
    ack_frame,
    active_connections,
    base_command,
    bystander,
    close_consumer_frame,
    close_producer_frame,
    connect_frame,
    entry,
    error_name,
    fb,
    flow_frame,
    frame,
    fv,
    lookup_frame,
    message_id,
    ping_frame,
    producer_frame,
    protocol_errors,
    publishers,
    quiet_client,
    send_frame,
    subscribe_frame,
    wait_until,
)


@pytest.fixture(scope="module")
def broker():
    b = HostileBroker()
    b.start()
    yield b
    b.close()


def topic_name(prefix):
    return f"persistent://public/default/{prefix}-{time.time_ns()}"


def closed_by_broker(port, data, timeout=5):
    """Sends data on a fresh connection; True when the broker then closes it."""
    c = WireClient(port)
    try:
        c.send(data)
        return c.wait_closed(timeout)
    finally:
        c.close()


HEADER = struct.Struct(">II")
MAX_FRAME = 5 * 1024 * 1024 + 10 * 1024  # maxMessageSize + Pulsar's 10 KB padding

BAD_SIZES = {
    # name: (bytes, counter label)
    "garbage command": (HEADER.pack(8, 4) + b"abcd", "bad_frame"),
    "cmdSize beyond frame": (HEADER.pack(8, 100) + b"abcd", "bad_frame"),
    "cmdSize 0xffffffff": (HEADER.pack(8, 0xFFFFFFFF) + b"abcd", "bad_frame"),
    "empty command": (HEADER.pack(4, 0), "bad_frame"),
    "totalSize 0": (struct.pack(">I", 0) + b"\x00" * 8, "bad_frame"),
    "totalSize 2": (struct.pack(">I", 2) + b"\x00\x00", "bad_frame"),
    "totalSize -5": (struct.pack(">i", -5) + b"\x00" * 8, "frame_too_large"),
    "totalSize 0x7ffffff0": (struct.pack(">I", 0x7FFFFFF0) + b"\x00" * 16, "frame_too_large"),
    "one byte over the limit": (HEADER.pack(MAX_FRAME - 3, 4), "frame_too_large"),
    "unknown command type 200": (frame(fv(1, 200)), "bad_frame"),
    "required field missing": (frame(base_command(5, fb(1, "t"))), "bad_frame"),  # PRODUCER
    "SEND without payload": (frame(base_command(6, fv(1, 1) + fv(2, 0))), "bad_frame"),
    "SEND with a bad magic": (
        frame(base_command(6, fv(1, 1) + fv(2, 0)), b"\x12\x34" + b"\x00" * 12), "bad_frame"),
    "SEND metadataSize past the end": (
        frame(base_command(6, fv(1, 1) + fv(2, 0)),
              struct.pack(">HII", 0x0E01, 0, 1000) + b"x"), "bad_frame"),
}


def test_bad_sizes_close_the_connection(broker):
    with bystander(broker.endpoint, "sizes"):
        for name, (data, label) in BAD_SIZES.items():
            d = CounterDelta(lambda label=label: protocol_errors(broker.admin_url, label))
            assert closed_by_broker(broker.port, connect_frame() + data), name
            assert d.moved(), f"{name}: magnetar_protocol_errors_total{{error={label}}}"
        # The same after a good frame on a fresh connection, without CONNECT first.
        for name, (data, _label) in BAD_SIZES.items():
            assert closed_by_broker(broker.port, data), name


def test_big_frame_before_connect_is_refused_at_its_header(broker):
    """Before CONNECT is answered a frame may be 64 KiB (CONNECT and AUTH_RESPONSE are small): a
    connection that has not said who it is cannot make the broker buffer a message-sized frame.
    After CONNECT the same frame is within the limit (maxMessageSize + padding)."""
    topic = topic_name("early")
    big = send_frame(1, 0, entry("early", 0, b"x" * (1024 * 1024)))
    with bystander(broker.endpoint, "early"):
        d = CounterDelta(lambda: protocol_errors(broker.admin_url, "frame_too_large"))
        c = WireClient(broker.port)
        try:
            c.send(big[:8])  # the header alone is enough to refuse it
            assert c.wait_closed(5)
        finally:
            c.close()
        assert d.moved(), "magnetar_protocol_errors_total{error=frame_too_large}"
        # Just under the bound, before CONNECT: read, then refused as a command out of turn.
        c = WireClient(broker.port)
        try:
            c.send(send_frame(1, 0, entry("early", 0, b"x" * (60 * 1024))))
            assert c.wait_closed(5)
        finally:
            c.close()
        c = WireClient(broker.port)
        try:
            c.handshake()
            c.send(producer_frame(topic, 1, 1, name="early"))
            c.expect(PRODUCER_SUCCESS)
            c.send(big)  # after CONNECT: within the limit, stored
            c.expect(SEND_RECEIPT)
            assert c.alive()
        finally:
            c.close()


def test_valid_frames_truncated_at_every_byte(broker):
    """CONNECT + PRODUCER + SEND cut after every byte, then the client closes: each cut inside
    a frame counts as truncated; producers created on the way are all released."""
    topic = topic_name("truncated")
    frames = [connect_frame(), producer_frame(topic, 1, 1),
              send_frame(1, 0, entry("trunc", 0, b"payload"))]
    data = b"".join(frames)
    boundaries = {0}
    for f in frames:
        boundaries.add(max(boundaries) + len(f))
    cuts = range(1, len(data))
    inside = [k for k in cuts if k not in boundaries]
    baseline = active_connections(broker.admin_url)
    with bystander(broker.endpoint, "truncated"):
        d = CounterDelta(lambda: protocol_errors(broker.admin_url, "truncated"))
        for k in cuts:
            s = socket.create_connection(("127.0.0.1", broker.port), timeout=5)
            s.sendall(data[:k])
            s.shutdown(socket.SHUT_WR)
            while s.recv(4096):  # until the broker closes its side
                pass
            s.close()
        assert d.moved(at_least=len(inside))
    assert wait_until(lambda: active_connections(broker.admin_url) <= baseline, 10)
    assert wait_until(lambda: publishers(broker.admin_url, topic) == 0, 10)
    # The topic still takes a producer of the official client and serves a reader.
    client = quiet_client(broker)
    client.create_producer(topic).send(b"after")
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    assert reader.read_next(5000).data() == b"after"
    client.close()


def test_bad_checksum_is_refused_and_not_stored(broker):
    topic = topic_name("checksum")
    with bystander(broker.endpoint, "checksum"):
        c = WireClient.connected(broker.port)
        c.send(producer_frame(topic, 1, 1, name="crc"))
        c.expect(PRODUCER_SUCCESS)
        d = CounterDelta(lambda: protocol_errors(broker.admin_url, "checksum"))
        c.send(send_frame(1, 0, entry("crc", 0, b"good-0")))
        c.expect(SEND_RECEIPT)
        c.send(send_frame(1, 1, entry("crc", 1, b"evil", corrupt_crc=True)))
        err = c.expect(SEND_ERROR)
        assert error_name(err, 3) == "ChecksumError" and err[2] == [1]
        c.send(send_frame(1, 2, entry("crc", 2, b"good-1")))
        c.expect(SEND_RECEIPT)
        assert c.alive()
        assert d.moved()
        c.close()
    client = quiet_client(broker)
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    assert [reader.read_next(5000).data() for _ in range(2)] == [b"good-0", b"good-1"]
    assert not reader.has_message_available()
    client.close()


def test_commands_before_connect(broker):
    topic = topic_name("early")
    early = {
        "PRODUCER": producer_frame(topic, 1, 1),
        "SUBSCRIBE": subscribe_frame(topic, "s", 1, 1),
        "SEND": send_frame(1, 0, entry("x", 0, b"x")),
        "FLOW": flow_frame(1, 100),
        "LOOKUP": lookup_frame(topic, 1),
        "CLOSE_PRODUCER": close_producer_frame(1, 1),
    }
    with bystander(broker.endpoint, "early"):
        for name, data in early.items():
            d = CounterDelta(lambda: protocol_errors(broker.admin_url, "before_connect"))
            assert closed_by_broker(broker.port, data), name
            assert d.moved(), name
        # PING is fine before CONNECT; a second CONNECT is refused without closing.
        c = WireClient(broker.port)
        c.send(ping_frame())
        c.expect(PONG)
        c.handshake()
        c.send(connect_frame())
        assert error_name(c.expect(ERROR), 2) == "NotAllowedError"
        assert c.alive()
        c.close()


def test_unknown_command_types(broker):
    with bystander(broker.endpoint, "unknown"):
        c = WireClient.connected(broker.port)
        d = CounterDelta(lambda: protocol_errors(broker.admin_url, "unknown_command"))
        # Commands only a broker sends. The error carries the command's request_id when it has
        # one (0 otherwise), so a client's pending request fails at once instead of at its
        # operation timeout. (Transaction commands are served: test_txn_coordinator.py.)
        for cmd, request_id in ((base_command(3, fb(1, "not-a-broker")), 0),    # CONNECTED
                                (base_command(7, fv(1, 1) + fv(2, 1)), 0),      # SEND_RECEIPT
                                (base_command(17, fv(1, 7) + fb(2, "p")), 7),   # PRODUCER_SUCCESS
                                (base_command(13, fv(1, 1)), 1)):               # SUCCESS
            c.send(frame(cmd))
            err = c.expect(ERROR)
            assert error_name(err, 2) == "NotAllowedError"
            assert err[1] == [request_id]
        assert c.alive()
        assert d.moved(at_least=4)
        c.close()


def test_ids_that_do_not_exist(broker):
    topic = topic_name("ids")
    with bystander(broker.endpoint, "ids"):
        c = WireClient.connected(broker.port)
        d = CounterDelta(lambda: protocol_errors(broker.admin_url, "unknown_id"))
        c.send(flow_frame(999, 1000))
        c.send(ack_frame(999, 1, 1))
        c.send(ack_frame(999, 1, 1, request_id=5))
        c.send(frame(base_command(20, fv(1, 999) + fb(2, message_id(1, 1)))))  # REDELIVER
        c.send(close_producer_frame(999, 6))
        assert c.expect(SUCCESS)[1] == [6]  # as Pulsar: closing an unknown producer succeeds
        c.send(close_consumer_frame(999, 7))
        assert c.expect(SUCCESS)[1] == [7]
        c.send(frame(base_command(12, fv(1, 999) + fv(2, 8))))  # UNSUBSCRIBE
        assert error_name(c.expect(ERROR), 2) == "MetadataError"
        c.send(frame(base_command(28, fv(1, 999) + fv(2, 9) + fb(3, message_id(1, 1)))))  # SEEK
        assert error_name(c.expect(ERROR), 2) == "MetadataError"
        c.send(frame(base_command(29, fv(1, 999) + fv(2, 10))))  # GET_LAST_MESSAGE_ID
        assert error_name(c.expect(ERROR), 2) == "ConsumerNotFound"
        assert c.alive()
        assert d.moved(at_least=8)
        # SEND for a producer that does not exist: Pulsar closes the connection.
        c.send(send_frame(999, 0, entry("x", 0, b"x")))
        assert c.wait_closed()
        c.close()

        # Message ids that do not exist, on a real consumer with a backlog.
        client = quiet_client(broker)
        p = client.create_producer(topic, batching_enabled=False)
        c = WireClient.connected(broker.port)
        c.send(subscribe_frame(topic, "sub", 1, 1, earliest=True))
        c.expect(SUCCESS)
        for i in range(5):
            p.send(b"%d" % i)
        c.send(ack_frame(1, 1 << 62, 5, request_id=2))          # individual
        c.expect(ACK_RESPONSE)
        c.send(ack_frame(1, (1 << 64) - 1, (1 << 64) - 1, request_id=4))  # -1:-1 as int64
        c.expect(ACK_RESPONSE)
        cumulative = fv(1, 1) + fv(2, 1) + fb(3, message_id(1 << 62, 1 << 40)) + fv(8, 3)
        c.send(frame(base_command(10, cumulative)))             # cumulative, far past the end
        c.expect(ACK_RESPONSE)
        c.send(flow_frame(1, 0xFFFFFFFF))                       # all the permits there are
        assert c.alive()
        c.close()
        # Nothing of the backlog was lost to those acks. The broker sees the close a moment
        # later: until then the exclusive subscription is busy (ConsumerBusy, as Pulsar).
        deadline = time.monotonic() + 10
        while True:
            try:
                consumer = client.subscribe(topic, "sub")
                break
            except pulsar.ConsumerBusy:
                assert time.monotonic() < deadline, "the closed connection's consumer stayed"
                time.sleep(0.05)
        got = [consumer.receive(5000).data() for _ in range(5)]
        assert got == [b"%d" % i for i in range(5)]
        client.close()


def test_odd_values_in_valid_commands(broker):
    """Out-of-range numbers in well-formed commands: a clear answer, the connection stays."""
    topic = topic_name("odd-values")
    with bystander(broker.endpoint, "values"):
        c = WireClient(broker.port)
        c.send(frame(base_command(2, fb(1, "v" * 60000) + fv(4, -1))))  # CONNECT, version -1
        c.expect(CONNECTED)
        assert c.alive()
        c.close()

        c = WireClient.connected(broker.port)

        def ranges(*pairs):
            meta = fv(1, 1)  # STICKY
            for start, end in pairs:
                meta += fb(3, fv(1, start) + fv(2, end))
            return fb(17, meta)

        def key_shared(cid, meta):
            body = fb(1, topic) + fb(2, "ks") + fv(3, 3) + fv(4, cid) + fv(5, cid) + meta
            return frame(base_command(4, body))  # SUBSCRIBE Key_Shared

        c.send(key_shared(50, ranges((0, 100))))
        assert c.expect(SUCCESS)[1] == [50]
        bad = [ranges((5000, 10)), ranges((0, 70000)), ranges((-5, 10)), ranges(),
               ranges((50, 200))]  # the last overlaps consumer 50
        for i, meta in enumerate(bad, start=1):
            c.send(key_shared(i, meta))
            ctype, got = c.recv_command()
            assert ctype == ERROR, (i, ctype, got)
            assert error_name(got, 2) == "ConsumerAssignError", (i, got)
        assert c.alive()

        # A real consumer seeks to ids and times far out of range.
        c.send(subscribe_frame(topic, "seeker", 100, 100, earliest=True))
        assert c.expect(SUCCESS)[1] == [100]
        seek_far = fb(3, message_id((1 << 64) - 1, (1 << 64) - 1))
        c.send(frame(base_command(28, fv(1, 100) + fv(2, 101) + seek_far)))
        c.send(frame(base_command(28, fv(1, 100) + fv(2, 102) + fv(4, (1 << 64) - 1))))
        answers = {}
        while len(answers) < 2:
            ctype, got = c.recv_command()
            if ctype in (SUCCESS, ERROR):
                answers[got[1][0]] = ctype
            # CLOSE_CONSUMER from the seek is expected too (Pulsar disconnects the consumer)
        assert set(answers) == {101, 102}
        assert c.alive()
        c.close()
