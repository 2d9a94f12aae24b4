"""Seek (by message id, by publish time), readers, and GET_LAST_MESSAGE_ID."""

import time

from pulsar import ConsumerType, MessageId

from helpers import assert_nothing, ids_tuple, receive_all, receive_n, texts


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
