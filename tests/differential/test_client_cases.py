"""Client-visible cases the official clients depend on (message ids of partitions, ...), checked
with the official Python client against Magnetar and the reference Pulsar alike."""

import os
import sys
import time
import uuid

import pulsar
import pytest
import requests

from helpers import pulsar_hash, receive_n

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from hostile_wire import (  # noqa: E402
    ERROR,
    LOOKUP,
    LOOKUP_RESPONSE,
    MESSAGE,
    PRODUCER_SUCCESS,
    SUCCESS,
    WireClient,
    base_command,
    error_name,
    fb,
    flow_frame,
    frame,
    fv,
    producer_frame,
    subscribe_frame,
)


@pytest.fixture
def partitioned_topic(admin_url):
    name = f"public/default/parted-{uuid.uuid4().hex[:8]}"
    r = requests.put(f"{admin_url}/admin/v2/persistent/{name}/partitions", json=3, timeout=30)
    assert r.status_code == 204, r.text
    yield f"persistent://{name}"
    requests.delete(f"{admin_url}/admin/v2/persistent/{name}/partitions",
                    params={"force": "true"}, timeout=30)


@pytest.mark.admin
def test_received_ids_of_a_partitioned_topic_carry_the_partition(client, partitioned_topic):
    consumer = client.subscribe(partitioned_topic, "s", consumer_type=pulsar.ConsumerType.Shared,
                                initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(partitioned_topic, batching_enabled=False)
    sent = {}
    for i in range(30):
        msg_id = producer.send(f"m-{i}".encode(), partition_key=f"k-{i}")
        assert 0 <= msg_id.partition() < 3
        sent[f"m-{i}"] = (msg_id.ledger_id(), msg_id.entry_id(), msg_id.partition())
    got = receive_n(consumer, 30)
    partitions = set()
    for m in got:
        mid = m.message_id()
        # The id a consumer gets is the id the producer was given, partition included.
        assert (mid.ledger_id(), mid.entry_id(), mid.partition()) == sent[m.data().decode()]
        assert m.topic_name().endswith(f"-partition-{mid.partition()}")
        partitions.add(mid.partition())
        consumer.acknowledge(m)
    assert len(partitions) > 1, "keys spread over the partitions"
    producer.close()
    consumer.close()


@pytest.mark.admin
def test_reader_of_a_partition_stops_at_its_last_message(client, partitioned_topic):
    partition = partitioned_topic + "-partition-1"
    producer = client.create_producer(partition, batching_enabled=False)
    for i in range(5):
        producer.send(f"r-{i}".encode())
    reader = client.create_reader(partition, pulsar.MessageId.earliest)
    seen = []
    while reader.has_message_available():
        m = reader.read_next(10_000)
        assert m.message_id().partition() == 1
        seen.append(m.data())
        assert len(seen) <= 5, "has_message_available() stays true past the last message"
    assert seen == [f"r-{i}".encode() for i in range(5)]
    reader.close()
    producer.close()


def test_consumer_stats_request_is_answered(broker, client, topic):
    """CONSUMER_STATS (the C++ client's getBrokerConsumerStats) gets CONSUMER_STATS_RESPONSE with
    the request's id; an unknown consumer gets ConsumerNotFound on the same response type."""
    consumer_stats, consumer_stats_response = 25, 26

    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(3):
        producer.send(f"s-{i}".encode())
    c = WireClient(int(broker.service_url.rsplit(":", 1)[1]), timeout=15)
    c.handshake()
    c.send(subscribe_frame(topic, "stats-sub", 5, 1, sub_type=1, earliest=True))  # Shared
    c.expect(SUCCESS)
    c.send(flow_frame(5, 100))
    for _ in range(3):
        c.expect(MESSAGE)
    c.send(frame(base_command(consumer_stats, fv(1, 2) + fv(4, 5))))
    r = c.expect(consumer_stats_response)
    assert r[1] == [2]
    assert 2 not in r, "no error"
    assert r[8] == [97], "availablePermits: 100 given, 3 delivered"
    assert r[9] == [3], "unackedMessages"
    assert r[13] == [b"Shared"]
    assert r[15] == [3], "msgBacklog"
    assert r.get(11, [b""])[0], "address"
    assert r.get(12, [b""])[0], "connectedSince"

    if broker.kind == "magnetar":
        # Pulsar 4.2 fails this with a NullPointerException in handleConsumerStats and closes
        # the connection; Magnetar answers ConsumerNotFound and keeps it.
        c.send(frame(base_command(consumer_stats, fv(1, 3) + fv(4, 99))))
        r = c.expect(consumer_stats_response)
        assert r[1] == [3]
        assert error_name(r, 2) == "ConsumerNotFound"
        assert c.alive()
    c.close()
    producer.close()


@pytest.mark.admin
def test_stats_show_client_version_address_and_connected_since(client, topic, admin_url):
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "cv")
    stats = requests.get(f"{admin_url}/admin/v2/persistent/{topic.split('://', 1)[1]}/stats",
                         timeout=30).json()
    pub = stats["publishers"][0]
    con = stats["subscriptions"]["cv"]["consumers"][0]
    for entry in (pub, con):
        assert entry["clientVersion"], entry
        assert entry["address"].count(":") >= 1, entry
        assert entry["connectedSince"][:2] == "20", entry
    consumer.close()
    producer.close()


def test_empty_subscription_name_fails_at_once(broker, topic):
    c = WireClient(int(broker.service_url.rsplit(":", 1)[1]), timeout=15)
    c.handshake()
    c.send(subscribe_frame(topic, "", 1, 7))
    err = c.expect(ERROR)
    assert err[1] == [7]
    # ProducerBusy is what Pulsar answers (its NamingException's code): not retried by clients.
    assert error_name(err, 2) == "ProducerBusy"
    assert err[3] == [b"Empty subscription name"]
    assert c.alive()
    c.close()


@pytest.fixture
def listener_broker(start_broker):
    """A broker of the session's kind started with two advertised listeners."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    endpoint = start_broker([f"brokerServicePort={port}",
                             f"advertisedListeners=internal:pulsar://127.0.0.1:{port},"
                             "external:pulsar://external.example:6650",
                             "internalListenerName=internal"])
    return endpoint, port


def test_lookup_answers_with_the_named_listener(listener_broker):
    endpoint, port = listener_broker
    c = WireClient(port, timeout=15)
    c.handshake()
    topic = "persistent://public/default/listeners"

    def lookup(request_id, listener=None):
        body = fb(1, topic) + fv(2, request_id)
        if listener is not None:
            body += fb(7, listener)
        c.send(frame(base_command(LOOKUP, body)))
        r = c.expect(LOOKUP_RESPONSE)
        assert r[4] == [request_id]
        return r

    assert lookup(1, "external")[1] == [b"pulsar://external.example:6650"]
    assert lookup(2, "internal")[1] == [f"pulsar://127.0.0.1:{port}".encode()]
    assert lookup(3)[1] == [f"pulsar://127.0.0.1:{port}".encode()], "internal by default"
    r = lookup(4, "nope")
    assert r[3] == [2], "Failed"
    assert error_name(r, 6) == "ServiceNotReady"
    assert r[7] == [b"the broker do not have nope listener"]
    assert c.alive()
    c.close()


def auto_split_owner(key, ranges):
    """The consumer whose auto-split range holds the key's hash (Murmur3 & MAX_INT % 65536)."""
    h = pulsar_hash(key.encode()) % 65536
    h = h or 1
    for name, (lo, hi) in ranges.items():
        if lo <= h <= hi:
            return name
    raise AssertionError(f"hash {h} in no range {ranges}")


@pytest.mark.admin
def test_key_shared_hash_range_auto_split(start_broker):
    """subscriptionKeySharedUseConsistentHashing=false: Pulsar's hash-range auto-split selector.
    Each consumer takes the upper half of the biggest range; every key goes to its range's
    owner, and to the same consumer on every topic the consumers share."""
    endpoint = start_broker(["subscriptionKeySharedUseConsistentHashing=false"])
    client = pulsar.Client(endpoint.service_url, operation_timeout_seconds=30)
    topics = [f"persistent://public/default/split-{uuid.uuid4().hex[:8]}-{i}" for i in range(2)]
    try:
        consumers = {}
        for name in ("c1", "c2", "c3"):
            consumers[name] = client.subscribe(
                topics, "split", consumer_type=pulsar.ConsumerType.KeyShared,
                consumer_name=name, initial_position=pulsar.InitialPosition.Earliest)
        expected = {"c1": (32769, 65536), "c2": (16385, 32768), "c3": (0, 16384)}
        for t in topics:
            stats = requests.get(f"{endpoint.admin_url}/admin/v2/persistent/"
                                 f"{t.split('://', 1)[1]}/stats", timeout=30).json()
            got = {c["consumerName"]: c["keyHashRangeArrays"]
                   for c in stats["subscriptions"]["split"]["consumers"]}
            assert got == {n: [[lo, hi]] for n, (lo, hi) in expected.items()}
        producers = [client.create_producer(t, batching_enabled=False) for t in topics]
        keys = [f"dev-{i}" for i in range(60)]
        for p in producers:
            for k in keys:
                p.send(k.encode(), partition_key=k)
        seen = {}
        for name, c in consumers.items():
            while True:
                try:
                    m = c.receive(2000)
                except pulsar.Timeout:
                    break
                seen.setdefault(m.partition_key(), set()).add(name)
                c.acknowledge(m)
        assert set(seen) == set(keys)
        for k, owners in seen.items():
            assert owners == {auto_split_owner(k, expected)}, (k, owners)
        assert len({next(iter(o)) for o in seen.values()}) == 3, "all three consumers get keys"
    finally:
        client.close()


def test_closing_every_consumer_of_a_connection_answers_each_and_sends_nothing_after(
        broker, client, topic):
    """What a client shutting down with consumers attached sees (issue 53 item 7: the C++ client
    crashed there; the crash is its own, on Pulsar too): CLOSE_CONSUMER for each consumer of a
    connection in one write gets one SUCCESS each, nothing addressed to a consumer comes after its
    SUCCESS, and closing one again (already closed) is answered SUCCESS too. (Pulsar itself may
    send a just-closed consumer frames after its SUCCESS: see below.)"""
    close_consumer = 16
    active_consumer_change = 31
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(10):
        producer.send(f"c-{i}".encode())
    c = WireClient(int(broker.service_url.rsplit(":", 1)[1]), timeout=15)
    c.handshake()
    c.send(subscribe_frame(topic, "shared", 1, 1, sub_type=1, earliest=True)
           + subscribe_frame(topic, "shared", 2, 2, sub_type=1, earliest=True)
           + subscribe_frame(topic, "failover", 3, 3, sub_type=2, earliest=True))
    successes = set()
    while successes != {1, 2, 3}:
        ctype, body = c.recv_command()
        if ctype == SUCCESS:
            successes.add(body[1][0])
    c.send(flow_frame(1, 100) + flow_frame(2, 100) + flow_frame(3, 100))
    time.sleep(1)
    closes = b"".join(frame(base_command(close_consumer, fv(1, cid) + fv(2, 10 + cid)))
                      for cid in (1, 2, 3))
    c.send(closes)
    answered = set()
    late = []
    c.sock.settimeout(3)
    while True:
        try:
            got = c.recv_command()
        except OSError:
            break
        assert got is not None, "the broker closed the connection"
        ctype, body = got
        if ctype == SUCCESS:
            answered.add(body[1][0])
        elif ctype in (MESSAGE, active_consumer_change):
            cid = body[1][0]
            if 10 + cid in answered:
                late.append((ctype, cid))
        elif ctype != 18:  # PING
            raise AssertionError(f"unexpected command {ctype}: {body}")
    assert answered == {11, 12, 13}
    if broker.kind == "pulsar":
        # Pulsar 4.2.4 may still send a consumer MESSAGEs (and a Failover one its
        # ACTIVE_CONSUMER_CHANGE) after the SUCCESS of its close: its dispatch (the Failover read
        # after activeConsumerFailoverDelayTimeMillis, a closed Shared consumer's messages going
        # to the next one) races the close, so a client must drop frames for an id it no longer
        # has. Magnetar sends nothing for a consumer after its close.
        assert {cid for _t, cid in late} <= {1, 2, 3}, late
    else:
        assert late == [], f"frames for consumers after their close: {late}"
    c.sock.settimeout(15)
    c.send(frame(base_command(close_consumer, fv(1, 1) + fv(2, 21))))
    r = c.expect(SUCCESS)
    assert r[1] == [21]
    assert c.alive()
    c.close()
    producer.close()


def _lookup(c, topic):
    """A LOOKUP first: Pulsar takes the topic's bundle on it (raw commands need an owner)."""
    c.send(frame(base_command(LOOKUP, fb(1, topic) + fv(2, 99))))
    r = c.next_command()
    assert r[0] == LOOKUP_RESPONSE, r


def test_a_consumer_closed_before_its_subscribe_completes_is_not_left_behind(broker, topic):
    """SUBSCRIBE, CLOSE_CONSUMER and SUBSCRIBE again with the same consumer id in one write, then
    the connection closes: no consumer is left on the subscription, so another Exclusive consumer
    gets it (Magnetar's first subscribe adopted the second's entry and its consumer stayed, so
    every later subscriber got ConsumerBusy)."""
    close_consumer = 16
    port = int(broker.service_url.rsplit(":", 1)[1])
    c = WireClient(port, timeout=15)
    c.handshake()
    _lookup(c, topic)
    c.send(subscribe_frame(topic, "ex", 5, 1, sub_type=0)
           + frame(base_command(close_consumer, fv(1, 5) + fv(2, 2)))
           + subscribe_frame(topic, "ex", 5, 3, sub_type=0))
    c.commands_within(3)
    c.close()
    time.sleep(1)
    d = WireClient(port, timeout=15)
    d.handshake()
    d.send(subscribe_frame(topic, "ex", 1, 1, sub_type=0))
    r = d.next_command()
    assert r[0] == SUCCESS, f"a consumer was left behind: {r}"
    d.close()


def test_a_producer_closed_before_its_creation_completes_is_not_left_behind(broker, topic):
    """PRODUCER then CLOSE_PRODUCER in one write: the close is answered and no producer stays
    registered, so another connection gets the same producer name (Pulsar's "closed while being
    created"; Magnetar answered PRODUCER_SUCCESS after the close and kept the producer)."""
    port = int(broker.service_url.rsplit(":", 1)[1])
    c = WireClient(port, timeout=15)
    c.handshake()
    _lookup(c, topic)
    c.send(producer_frame(topic, 1, 1, name="gp")
           + frame(base_command(15, fv(1, 1) + fv(2, 2))))  # CLOSE_PRODUCER
    got = c.commands_within(3)
    assert (SUCCESS, 2) in [(t, b.get(1, [None])[0]) for t, b in got], got
    d = WireClient(port, timeout=15)
    d.handshake()
    d.send(producer_frame(topic, 1, 1, name="gp"))
    r = d.next_command()
    assert r[0] == PRODUCER_SUCCESS, f"the closed producer is still registered: {r}"
    d.close()
    c.close()
