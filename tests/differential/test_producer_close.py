"""A client's CLOSE_PRODUCER with publishes in flight, as Pulsar answers it: the SENDs read before
it are stored and answered, and its SUCCESS follows their SEND_RECEIPTs (Pulsar's
ServerCnx.handleCloseProducer answers once Producer.close has waited for the pending publish
acks). The C++ client's ConsumerTest.testBatchUnAckedMessageTracker closes its producer right
after 50 batched sendAsync calls and expects all 50 messages on its consumer."""

import os
import sys

from helpers import receive_n

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from hostile_wire import (  # noqa: E402
    PRODUCER_SUCCESS,
    SEND_RECEIPT,
    SUCCESS,
    WireClient,
    close_producer_frame,
    entry,
    producer_frame,
    send_frame,
)


def test_close_producer_answers_after_the_sends_before_it(broker, client, topic):
    """SENDs and CLOSE_PRODUCER in one write: every SEND gets its receipt, before the SUCCESS."""
    consumer = client.subscribe(topic, "s")
    c = WireClient(int(broker.service_url.rsplit(":", 1)[1]), timeout=15)
    c.handshake()
    c.send(producer_frame(topic, 1, 1))
    name = c.expect(PRODUCER_SUCCESS)[2][0].decode()
    n = 20
    c.send(b"".join(send_frame(1, seq, entry(name, seq, f"m-{seq}".encode())) for seq in range(n))
           + close_producer_frame(1, 2))
    answers = []
    while not answers or answers[-1] != "closed":
        ctype, body = c.recv_command()
        if ctype == SEND_RECEIPT:
            answers.append(body[2][0])  # sequence_id
        else:
            assert ctype == SUCCESS and body[1] == [2], (ctype, body)
            answers.append("closed")
    assert answers == list(range(n)) + ["closed"]
    c.close()
    got = [m.data().decode() for m in receive_n(consumer, n)]
    assert got == [f"m-{i}" for i in range(n)]
    consumer.close()


def test_batched_sends_then_close_are_all_stored(client, topic):
    """The C++ client's testBatchUnAckedMessageTracker: close right after the sendAsync calls;
    the batches already written are stored (the client fails its own callbacks with
    AlreadyClosed, as with Pulsar)."""
    consumer = client.subscribe(topic, "s")
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=5,
                                      batching_max_publish_delay_ms=60_000,
                                      block_if_queue_full=True)
    for i in range(50):
        producer.send_async(f"m-{i}".encode(), None)
    producer.close()
    got = [m.data().decode() for m in receive_n(consumer, 50)]
    assert got == [f"m-{i}" for i in range(50)]
    consumer.close()
