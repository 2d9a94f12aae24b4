"""Seek (by message id, by publish time), readers, and GET_LAST_MESSAGE_ID."""

import os
import struct
import sys
import time

import pulsar
from pulsar import ConsumerType, MessageId

from helpers import assert_nothing, ids_tuple, receive_all, receive_n, texts

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from hostile_wire import (  # noqa: E402
    CLOSE_CONSUMER,
    ERROR,
    PRODUCER_SUCCESS,
    SEEK,
    SEND,
    SEND_RECEIPT,
    SUBSCRIBE,
    SUCCESS,
    WireClient,
    base_command,
    crc32c,
    decode,
    error_name,
    fb,
    frame,
    fv,
    message_id,
    producer_frame,
)

GET_LAST_MESSAGE_ID, GET_LAST_MESSAGE_ID_RESPONSE = 29, 30


def produce_spaced(client, topic, n, batching=False):
    producer = client.create_producer(topic, batching_enabled=batching, batching_max_messages=10)
    ids = []
    for i in range(n):
        if batching:
            producer.send_async(f"{i}".encode(), None)
        else:
            ids.append(producer.send(f"{i}".encode()))
            time.sleep(0.003)  # distinct publish times
    producer.flush()
    return producer, ids


def test_seek_by_message_id_delivers_from_the_next_message(client, topic):
    consumer = client.subscribe(topic, "sub")
    _, ids = produce_spaced(client, topic, 20)
    for m in receive_n(consumer, 20):
        consumer.acknowledge(m)
    consumer.seek(ids[5])
    # The official client resumes after the given id (start_message_id_inclusive is off).
    assert texts(receive_all(consumer)) == [str(i) for i in range(6, 20)]


def test_seek_by_timestamp_delivers_from_that_publish_time(client, topic):
    consumer = client.subscribe(topic, "sub")
    produce_spaced(client, topic, 20)
    got = receive_n(consumer, 20)
    for m in got:
        consumer.acknowledge(m)
    ts = got[10].publish_timestamp()
    assert got[9].publish_timestamp() < ts
    consumer.seek(ts)
    again = receive_all(consumer)
    assert texts(again) == [str(i) for i in range(10, 20)]


def test_seek_earliest_and_latest(client, topic):
    consumer = client.subscribe(topic, "sub", consumer_type=ConsumerType.Shared)
    producer, _ = produce_spaced(client, topic, 10)
    for m in receive_n(consumer, 10):
        consumer.acknowledge(m)
    consumer.seek(MessageId.earliest)
    assert texts(receive_n(consumer, 10)) == [str(i) for i in range(10)]
    consumer.seek(MessageId.latest)
    assert_nothing(consumer)
    producer.send(b"after-latest")
    assert texts(receive_n(consumer, 1)) == ["after-latest"]


def test_seek_into_a_batch(client, topic):
    consumer = client.subscribe(topic, "sub")
    produce_spaced(client, topic, 25, batching=True)
    got = receive_n(consumer, 25)
    target = got[13].message_id()
    assert target.batch_index() >= 0
    consumer.seek(target)
    assert texts(receive_all(consumer)) == [str(i) for i in range(14, 25)]


def test_get_last_message_id(client, topic):
    consumer = client.subscribe(topic, "sub")
    empty = consumer.get_last_message_id()
    assert (empty.ledger_id(), empty.entry_id()) == (-1, -1)
    _, ids = produce_spaced(client, topic, 5)
    assert ids_tuple(consumer.get_last_message_id()) == ids_tuple(ids[-1])


def test_get_last_message_id_of_batch_has_its_batch_index(client, topic):
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=10,
                                      batching_max_publish_delay_ms=1000)
    ids = []
    for i in range(25):
        producer.send_async(f"{i}".encode(), lambda res, mid: ids.append(mid))
    producer.flush()
    last = max(ids, key=ids_tuple)
    got = consumer.get_last_message_id()
    # 25 messages in batches of 10: the last entry holds 5, the last one has batch index 4.
    assert ids_tuple(got) == ids_tuple(last)
    assert got.batch_index() == 4


def test_reader_from_earliest_latest_and_an_id(client, topic):
    _, ids = produce_spaced(client, topic, 10)
    reader = client.create_reader(topic, MessageId.earliest)
    got = [reader.read_next(5000).data() for _ in range(10)]
    assert got == [f"{i}".encode() for i in range(10)]
    assert not reader.has_message_available()
    reader.close()

    reader = client.create_reader(topic, ids[3])
    assert reader.read_next(5000).data() == b"4"
    reader.close()
    reader = client.create_reader(topic, ids[3], start_message_id_inclusive=True)
    assert reader.read_next(5000).data() == b"3"
    reader.close()

    reader = client.create_reader(topic, MessageId.latest)
    assert not reader.has_message_available()
    client.create_producer(topic).send(b"tail")
    assert reader.read_next(5000).data() == b"tail"
    reader.close()


def test_reader_does_not_disturb_a_subscription(client, topic):
    consumer = client.subscribe(topic, "sub")
    produce_spaced(client, topic, 3)
    reader = client.create_reader(topic, MessageId.earliest)
    assert [reader.read_next(5000).data() for _ in range(3)] == [b"0", b"1", b"2"]
    assert texts(receive_n(consumer, 3)) == ["0", "1", "2"]


def _chunk_sender(broker, topic):
    """A raw producer that sends chunks as the clients do (SEND is_chunk, metadata uuid,
    num_chunks_from_msg, total_chunk_msg_size, chunk_id), so a test decides which chunks exist."""
    w = WireClient(int(broker.service_url.rsplit(":", 1)[1]), timeout=15)
    w.handshake()
    w.send(producer_frame(topic, 1, 1, name="chunker"))
    w.expect(PRODUCER_SUCCESS)
    seq = [0]

    def send(uuid, chunk_id, num_chunks, payload, total):
        md = fb(1, "chunker") + fv(2, seq[0]) + fv(3, int(time.time() * 1000))
        if uuid is not None:
            md += fb(26, uuid) + fv(27, num_chunks) + fv(28, total) + fv(29, chunk_id)
        checked = struct.pack(">I", len(md)) + md + payload
        ent = struct.pack(">HI", 0x0E01, crc32c(checked)) + checked
        body = fv(1, 1) + fv(2, seq[0]) + (fv(7, 1) if uuid is not None else b"")
        if uuid is None or chunk_id == num_chunks - 1:
            seq[0] += 1
        w.send(frame(base_command(SEND, body), ent))
        w.expect(SEND_RECEIPT)

    return w, send


def test_seek_with_a_chunked_message_half_received_loses_it_in_the_cpp_client(broker, client,
                                                                              topic):
    """Issue 53, item 5. The broker seeks to the first chunk of the id given (the client sends
    that one); the official C++ client (here under the Python client) keeps its cache of chunks
    across a seek, so a chunked message it held half received is dropped when its chunks come
    again after the seek (chunk 0 does not follow the cached ones, the rest are then "uncached").
    Pulsar behaves the same: the client's doing. A client that clears that cache on seek delivers
    X here, and this test then fails on both brokers alike."""
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    w, send = _chunk_sender(broker, topic)
    send("A", 0, 2, b"a" * 10, 20)
    send("A", 1, 2, b"a" * 10, 20)
    send("X", 0, 3, b"x" * 10, 30)
    send("X", 1, 3, b"x" * 10, 30)
    a = consumer.receive(10_000)
    assert a.data() == b"a" * 20
    time.sleep(1)  # X's first two chunks reach the client's cache
    consumer.seek(a.message_id())  # resumes after A: X's chunks come again
    send("X", 2, 3, b"x" * 10, 30)
    send(None, 0, 1, b"after", 0)
    got = receive_all(consumer)
    assert [m.data() for m in got] == [b"after"], "X lost by the client on either broker"
    w.close()


def _until_answer(w, request_id):
    """The commands up to the SUCCESS or ERROR of request_id (PINGs answered, MESSAGEs kept),
    as (type, body, monotonic seconds)."""
    got = []
    while True:
        cmd = w.next_command()
        got.append((cmd[0], cmd[1], time.monotonic()))
        if cmd[0] in (SUCCESS, ERROR) and cmd[1].get(1, [None])[0] == request_id:
            return got


def test_seek_closes_the_consumer_before_answering_and_its_id_is_gone_until_it_subscribes(
        broker, client, topic):
    """Issue 43 (the Go client's TestReaderWithSeekByID, flaky on both brokers). A reader from the
    latest message, inclusive, as the Go client makes it: non-durable SUBSCRIBE from latest,
    GET_LAST_MESSAGE_ID, SEEK to that id. The broker closes the consumer (CLOSE_CONSUMER) first
    and answers the SEEK after (Pulsar's PersistentSubscription.resetCursor disconnects the
    consumers, then resets the cursor, then completes); the connection then knows the consumer id
    no more, so a SEEK on it before the client subscribes again gets MetadataError "Consumer not
    found" on both brokers. The Go client's events loop picks at random between that
    resubscription and an application's Seek queued meanwhile, hence the flaky test."""
    _, ids = produce_spaced(client, topic, 3)
    w = WireClient(int(broker.service_url.rsplit(":", 1)[1]), timeout=15)
    w.handshake()
    latest = fb(9, fv(1, 2**63 - 1) + fv(2, 2**63 - 1))
    sub = fb(1, topic) + fb(2, "reader-sub") + fv(3, 0) + fv(4, 1) + fv(8, 0)
    w.send(frame(base_command(SUBSCRIBE, sub + fv(5, 1) + latest)))
    assert [c[0] for c in _until_answer(w, 1)] == [SUCCESS]
    w.send(frame(base_command(GET_LAST_MESSAGE_ID, fv(1, 1) + fv(2, 2))))
    last = decode(w.expect(GET_LAST_MESSAGE_ID_RESPONSE)[1][0])
    assert (last[1][0], last[2][0]) == ids_tuple(ids[-1])[:2]
    last_id = message_id(last[1][0], last[2][0])

    w.send(frame(base_command(SEEK, fv(1, 1) + fv(2, 3) + fb(3, last_id))))
    got = _until_answer(w, 3)
    assert [c[0] for c in got] == [CLOSE_CONSUMER, SUCCESS], got
    assert got[0][1][1] == [1]  # the reader's consumer id

    w.send(frame(base_command(SEEK, fv(1, 1) + fv(2, 4) + fb(3, last_id))))
    got = _until_answer(w, 4)
    assert [c[0] for c in got] == [ERROR], got
    assert error_name(got[0][1], 2) == "MetadataError"
    assert got[0][1][3] == [b"Consumer not found"]

    # Subscribed again (from the id sought, as the Go client does), the id seeks again.
    w.send(frame(base_command(SUBSCRIBE, sub + fv(5, 5) + fb(9, last_id))))
    assert [c[0] for c in _until_answer(w, 5)] == [SUCCESS]
    w.send(frame(base_command(SEEK, fv(1, 1) + fv(2, 6) + fb(3, last_id))))
    assert [c[0] for c in _until_answer(w, 6)] == [CLOSE_CONSUMER, SUCCESS]
    w.close()
