"""Publishing and consuming: ordering, completeness, batching, metadata round trips."""

import threading
import time

import pulsar
import pytest
from pulsar import CompressionType, ConsumerType, InitialPosition

from helpers import NOTHING_MS, assert_nothing, ids_tuple, receive_n, texts

N = 10_000


def send_all_async(producer, payloads, properties=None):
    """Sends every payload with send_async and waits for all receipts; returns the message ids."""
    ids = [None] * len(payloads)
    errors = []
    done = threading.Event()
    remaining = [len(payloads)]
    lock = threading.Lock()

    def callback_for(i):
        def cb(res, msg_id):
            with lock:
                if res != pulsar.Result.Ok:
                    errors.append((i, res))
                ids[i] = msg_id
                remaining[0] -= 1
                if remaining[0] == 0:
                    done.set()
        return cb

    for i, p in enumerate(payloads):
        producer.send_async(p, callback_for(i), properties=properties)
    producer.flush()
    assert done.wait(60), f"{remaining[0]} receipts missing"
    assert not errors, errors[:5]
    return ids


@pytest.mark.parametrize("batching", [False, True], ids=["unbatched", "batched"])
def test_10k_messages_in_order_with_acks(client, topic, batching):
    consumer = client.subscribe(topic, "sub", consumer_type=ConsumerType.Exclusive)
    producer = client.create_producer(topic, batching_enabled=batching, batching_max_messages=100,
                                      block_if_queue_full=True, max_pending_messages=2000)
    payloads = [f"m-{i:05d}".encode() for i in range(N)]
    ids = send_all_async(producer, payloads)

    # Receipts come back in publish order: ids strictly increase.
    keys = [ids_tuple(i) for i in ids]
    assert keys == sorted(keys) and len(set(keys)) == N
    if batching:
        assert all(k[2] >= 0 for k in keys), "batched messages carry a batch index"
        assert len({k[:2] for k in keys}) < N, "some entries hold more than one message"
    else:
        assert all(k[2] == -1 for k in keys)
        assert len({k[:2] for k in keys}) == N

    got = []
    for _ in range(N):
        m = consumer.receive(10_000)
        got.append(m.data())
        consumer.acknowledge(m)
    assert got == payloads
    assert_nothing(consumer, 500)
    consumer.close()

    # Everything was acked: the subscription has nothing left to deliver.
    again = client.subscribe(topic, "sub", consumer_type=ConsumerType.Exclusive)
    assert_nothing(again)


def test_initial_position_earliest_and_latest(client, topic):
    producer = client.create_producer(topic)
    for i in range(5):
        producer.send(f"old-{i}".encode())
    latest = client.subscribe(topic, "latest", initial_position=InitialPosition.Latest)
    earliest = client.subscribe(topic, "earliest", initial_position=InitialPosition.Earliest)
    assert_nothing(latest)
    producer.send(b"new")
    assert texts(receive_n(latest, 1)) == ["new"]
    assert texts(receive_n(earliest, 6)) == [f"old-{i}" for i in range(5)] + ["new"]
    # An existing subscription keeps its position: initial position only applies at creation.
    latest.close()
    producer.send(b"newer")
    again = client.subscribe(topic, "latest", initial_position=InitialPosition.Earliest)
    assert texts(receive_n(again, 2)) == ["new", "newer"]


def test_message_metadata_round_trip(client, topic):
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, producer_name="meta-producer")
    before = int(time.time() * 1000)
    sent_id = producer.send(b"payload", properties={"a": "1", "unicode": "\u00e9\u4e2d"},
                            partition_key="key-1", event_timestamp=1234567890123)
    after = int(time.time() * 1000)
    producer.send(b"", properties={"empty": "yes"})
    m = receive_n(consumer, 1)[0]
    assert m.data() == b"payload"
    assert m.properties() == {"a": "1", "unicode": "\u00e9\u4e2d"}
    assert m.partition_key() == "key-1"
    assert m.event_timestamp() == 1234567890123
    assert before - 5 <= m.publish_timestamp() <= after + 5
    assert m.producer_name() == "meta-producer"
    assert m.topic_name() == topic
    assert m.redelivery_count() == 0
    assert ids_tuple(m.message_id()) == ids_tuple(sent_id)
    empty = receive_n(consumer, 1)[0]
    assert empty.data() == b"" and empty.properties() == {"empty": "yes"}


@pytest.mark.parametrize("compression", [CompressionType.LZ4, CompressionType.ZLib,
                                         CompressionType.ZSTD, CompressionType.SNAPPY],
                         ids=lambda c: str(c).split(".")[-1])
def test_compressed_batches_pass_through(client, topic, compression):
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, compression_type=compression, batching_enabled=True,
                                      batching_max_messages=50)
    payloads = [(f"compressible-{i % 7}-" * 20).encode() + str(i).encode() for i in range(300)]
    send_all_async(producer, payloads)
    assert [m.data() for m in receive_n(consumer, 300)] == payloads


def test_large_messages_round_trip(client, topic):
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, batching_enabled=False)
    payloads = [bytes(range(256)) * 4096, b"\xab" * (5 * 1024 * 1024 - 1000)]  # 1 MiB, ~5 MiB
    for p in payloads:
        producer.send(p)
    got = receive_n(consumer, 2)
    assert [len(m.data()) for m in got] == [len(p) for p in payloads]
    assert [m.data() for m in got] == payloads


def test_many_producers_keep_per_producer_order(client, topic):
    consumer = client.subscribe(topic, "sub")
    producers = [client.create_producer(topic, producer_name=f"p{i}") for i in range(4)]
    per = 1000
    for seq in range(per):
        for i, p in enumerate(producers):
            p.send_async(f"{i}:{seq}".encode(), None)
    for p in producers:
        p.flush()
    got = receive_n(consumer, 4 * per)
    seen = {i: [] for i in range(4)}
    for m in got:
        i, seq = m.data().decode().split(":")
        seen[int(i)].append(int(seq))
        assert m.producer_name() == f"p{i}"
    for i in range(4):
        assert seen[i] == list(range(per)), f"producer {i} out of order"
    assert_nothing(consumer, NOTHING_MS)


def test_partition_metadata_of_plain_topic(client, topic):
    client.create_producer(topic).close()
    assert client.get_topic_partitions(topic) == [topic]


def test_short_topic_name_means_public_default(client, topic):
    short = topic.rsplit("/", 1)[1]
    consumer = client.subscribe(topic, "sub")
    client.create_producer(short).send(b"via-short-name")
    m = receive_n(consumer, 1)[0]
    assert m.data() == b"via-short-name"
    assert m.topic_name() == topic


def test_regex_subscription_finds_namespace_topics(client, topic):
    import re
    names = [f"{topic}-a", f"{topic}-b", f"{topic}-c"]
    producers = [client.create_producer(n) for n in names]
    # The topic name only has [A-Za-z0-9_-], none of them special outside a character class.
    consumer = client.subscribe(re.compile(topic + "-.*"), "sub",
                                initial_position=InitialPosition.Earliest)
    for i, p in enumerate(producers):
        p.send(f"from-{i}".encode())
    got = receive_n(consumer, 3)
    assert sorted(texts(got)) == ["from-0", "from-1", "from-2"]
    assert sorted(m.topic_name() for m in got) == names
