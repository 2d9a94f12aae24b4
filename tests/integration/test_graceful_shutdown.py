"""Graceful shutdown (SIGTERM), bounded by brokerShutdownTimeoutMs: the broker stops accepting
and reading, sends the receipt of every SEND it read once it is persisted, then CLOSE_PRODUCER
and CLOSE_CONSUMER, and closes. With deduplication off, a producer under load across a SIGTERM
and restart writes no message twice (a SEND persisted without its receipt would be sent again)
and loses none."""

import signal
import socket
import tempfile
import threading
import time

import pulsar

from harness.broker import restartable_magnetar
from harness.util import Receipts
from hostile_wire import (
    CLOSE_CONSUMER,
    CLOSE_PRODUCER,
    PRODUCER_SUCCESS,
    SEND_RECEIPT,
    SUCCESS,
    HostileBroker,
    WireClient,
    entry,
    flow_frame,
    producer_frame,
    send_frame,
    subscribe_frame,
)

TOPIC = "persistent://public/default/graceful-shutdown"


def test_sigterm_under_load_no_duplicates_no_loss():
    total = 6000
    with tempfile.TemporaryDirectory(prefix="magnetar-shutdown-") as d:
        broker = restartable_magnetar(d, ["brokerDeduplicationEnabled=false"])
        url = broker.start().service_url
        client = pulsar.Client(url, operation_timeout_seconds=60)
        # A subscription holds the messages (without one and without retention the ledgers
        # of the first run may be trimmed after the restart, as in Pulsar).
        client.subscribe(TOPIC, "check").close()
        producer = client.create_producer(TOPIC, batching_enabled=False, send_timeout_millis=0,
                                          max_pending_messages=1000,
                                          block_if_queue_full=True)
        receipts = Receipts()
        receipted, failed = receipts.ok, receipts.failed

        def produce():
            for i in range(total):
                producer.send_async(b"%d" % i, receipts.callback(i))
                if i % 20 == 0:
                    time.sleep(0.002)

        t = threading.Thread(target=produce)
        t.start()
        deadline = time.time() + 30
        while len(receipted) < 1000 and time.time() < deadline:
            time.sleep(0.01)
        assert len(receipted) >= 1000, "the producer made no progress"
        assert t.is_alive(), "the load should still be running at the SIGTERM"
        start = time.time()
        assert broker.stop(timeout_s=30) == 0
        exit_s = time.time() - start
        before = receipts.snapshot()
        log = open(broker.log_path, errors="replace").read()
        assert "connections drained" in log, "the connections were not drained"

        broker.start(port=broker.port)
        t.join(timeout=120)
        assert not t.is_alive()
        producer.flush()
        deadline = time.time() + 60
        while len(receipted) < total and not failed and time.time() < deadline:
            time.sleep(0.05)
        assert not failed, failed[:5]
        assert len(receipted) == total

        consumer = client.subscribe(TOPIC, "check", receiver_queue_size=1000)
        seen: list[int] = []
        while True:  # everything, then a quiet period for duplicates written after it
            try:
                wait = 3000 if len(set(seen)) >= total else 20000
                seen.append(int(consumer.receive(timeout_millis=wait).data()))
            except pulsar.Timeout:
                break
        client.close()
        broker.stop()

        duplicates = len(seen) - len(set(seen))
        assert duplicates == 0, f"{duplicates} duplicates across the SIGTERM"
        lost = before - set(seen)
        assert not lost, (f"{len(lost)} receipted before the SIGTERM and missing after it "
                          f"({len(seen)} read)")
        assert set(seen) == set(range(total))
        assert exit_s < 10, f"shutdown took {exit_s:.1f} s"


def test_sigterm_sends_receipts_then_close_producer_and_consumer():
    """On the wire: receipts for what was read come first, then CLOSE_PRODUCER and
    CLOSE_CONSUMER with the client's ids, then the broker closes the connection; the process
    exits 0."""
    b = HostileBroker(settings=["brokerShutdownTimeoutMs=10000"])
    b.start()
    try:
        topic = "persistent://public/default/graceful-wire"
        c = WireClient(b.port)
        c.handshake()
        c.send(producer_frame(topic, 7, 1, name="wire-producer"))
        c.expect(PRODUCER_SUCCESS)
        c.send(subscribe_frame(topic, "s", 9, 2))
        c.expect(SUCCESS)
        c.send(flow_frame(9, 1000))
        for seq in range(50):
            c.send(send_frame(7, seq, entry("wire-producer", seq, b"x" * 100)))
        time.sleep(0.3)  # all 50 read (the load test above covers SENDs in flight)
        b.proc.send_signal(signal.SIGTERM)
        order = []
        c.sock.settimeout(10)
        while True:
            try:
                got = c.recv_command()
            except (socket.timeout, ConnectionResetError):
                break
            if got is None:
                break
            if got[0] in (SEND_RECEIPT, CLOSE_PRODUCER, CLOSE_CONSUMER):
                order.append((got[0], got[1]))
        receipts = [body for kind, body in order if kind == SEND_RECEIPT]
        kinds = [kind for kind, _ in order]
        assert CLOSE_PRODUCER in kinds and CLOSE_CONSUMER in kinds, kinds
        first_close = kinds.index(CLOSE_PRODUCER)
        assert all(k == SEND_RECEIPT for k in kinds[:first_close])
        assert SEND_RECEIPT not in kinds[first_close:], "a receipt after CLOSE_PRODUCER"
        assert len(receipts) == 50, f"{len(receipts)} receipts of 50 SENDs read"
        assert dict(order)[CLOSE_PRODUCER][1] == [7]
        assert dict(order)[CLOSE_CONSUMER][1] == [9]
        assert b.proc.wait(timeout=15) == 0
        c.close()
    finally:
        if b.running():
            b.kill()
        b.close()
