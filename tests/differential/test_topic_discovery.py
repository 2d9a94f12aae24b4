"""Topic discovery on the wire: partitioned metadata without auto-creation, broker-side pattern
evaluation in GET_TOPICS_OF_NAMESPACE, and topic-list watchers (WATCH_TOPIC_LIST), the requests
Pulsar 4's Java client makes for retry/dead-letter topic names and pattern consumers.

Raw frames (tests/integration/hostile_wire.py), so each field is checked as the broker sends it.
"""

import os
import sys

import pytest
import requests

from harness.util import temp_namespace

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from hostile_wire import (  # noqa: E402
    ERROR,
    PARTITIONED_METADATA,
    PARTITIONED_METADATA_RESPONSE,
    SUCCESS,
    WireClient,
    base_command,
    crc32c,
    decode,
    error_name,
    fb,
    frame,
    fv,
)

pytestmark = pytest.mark.admin

GET_TOPICS, GET_TOPICS_RESPONSE = 32, 33
WATCH, WATCH_SUCCESS, WATCH_UPDATE, WATCH_CLOSE = 64, 65, 66, 67


def list_hash(topics):
    """Pulsar's TopicList.calculateHash: CRC32C of the sorted names joined by ',', as Guava
    prints it (little-endian bytes, hex)."""
    return crc32c(",".join(sorted(topics)).encode()).to_bytes(4, "little").hex()


@pytest.fixture
def namespace(admin_url):
    """public/disc-<random>; its topics and partitioned topics are deleted before it."""
    created = temp_namespace(admin_url, "disc")
    ns = next(created)
    yield ns
    for t in requests.get(f"{admin_url}/admin/v2/namespaces/{ns}/topics", timeout=30).json():
        requests.delete(f"{admin_url}/admin/v2/persistent/{t.split('://', 1)[1]}",
                        params={"force": "true"}, timeout=30)
    for t in requests.get(f"{admin_url}/admin/v2/persistent/{ns}/partitioned", timeout=30).json():
        requests.delete(f"{admin_url}/admin/v2/persistent/{t.split('://', 1)[1]}/partitions",
                        params={"force": "true"}, timeout=30)
    next(created, None)


@pytest.fixture
def wire(broker):
    port = int(broker.service_url.rsplit(":", 1)[1])
    c = WireClient(port, timeout=15)
    connected = c.handshake()
    yield c, connected
    c.close()


def create_topic(admin_url, topic):
    r = requests.put(f"{admin_url}/admin/v2/persistent/{topic.split('://', 1)[1]}", timeout=30)
    assert r.status_code == 204, r.text


def delete_topic(admin_url, topic):
    r = requests.delete(f"{admin_url}/admin/v2/persistent/{topic.split('://', 1)[1]}",
                        params={"force": "true"}, timeout=30)
    assert r.status_code == 204, r.text


def partition_metadata(c, topic, request_id, auto_create):
    c.send(frame(base_command(PARTITIONED_METADATA,
                              fb(1, topic) + fv(2, request_id) + fv(6, 1 if auto_create else 0))))
    return c.expect(PARTITIONED_METADATA_RESPONSE)


def test_connected_advertises_watchers_and_metadata_without_auto_creation(wire):
    _, connected = wire
    flags = decode(connected[4][0])
    assert flags.get(4) == [1], "supports_topic_watchers"
    assert flags.get(5) == [1], "supports_get_partitioned_metadata_without_auto_creation"


def test_partitioned_metadata_without_auto_creation(wire, admin_url, namespace):
    c, _ = wire
    missing = f"persistent://{namespace}/missing"
    r = partition_metadata(c, missing, 1, auto_create=False)
    assert r[2] == [1]
    assert r.get(3) == [1], "response Failed"
    assert error_name(r, 4) == "TopicNotFound"
    # Nothing was created by asking.
    assert requests.get(f"{admin_url}/admin/v2/namespaces/{namespace}/topics",
                        timeout=30).json() == []

    plain = f"persistent://{namespace}/plain"
    create_topic(admin_url, plain)
    r = partition_metadata(c, plain, 2, auto_create=False)
    assert r.get(1, [0]) == [0] and 4 not in r

    parted = f"persistent://{namespace}/parted"
    rr = requests.put(f"{admin_url}/admin/v2/persistent/{parted.split('://', 1)[1]}/partitions",
                      json=3, timeout=30)
    assert rr.status_code == 204, rr.text
    r = partition_metadata(c, parted, 3, auto_create=False)
    assert r[1] == [3] and 4 not in r

    # With auto-creation asked (and allowed by the broker), a missing topic is 0 partitions.
    r = partition_metadata(c, f"persistent://{namespace}/auto", 4, auto_create=True)
    assert 4 not in r and r.get(1, [0]) == [0]


def get_topics(c, ns, request_id, pattern=None, topics_hash=None):
    body = fv(1, request_id) + fb(2, ns)
    if pattern is not None:
        body += fb(4, pattern)
    if topics_hash is not None:
        body += fb(5, topics_hash)
    c.send(frame(base_command(GET_TOPICS, body)))
    r = c.expect(GET_TOPICS_RESPONSE)
    assert r[1] == [request_id]
    return ([t.decode() for t in r.get(2, [])], r.get(3, [0]) == [1],
            r[4][0].decode() if 4 in r else None, r.get(5, [1]) == [1])


def test_get_topics_of_namespace_filters_by_pattern(wire, admin_url, namespace):
    c, _ = wire
    a, b, other = (f"persistent://{namespace}/{n}" for n in ("sensor-a", "sensor-b", "other"))
    for t in (a, b, other):
        create_topic(admin_url, t)
    topics, filtered, h, changed = get_topics(c, namespace, 10,
                                              pattern=f"persistent://{namespace}/sensor-.*")
    assert filtered and changed
    assert sorted(topics) == [a, b]
    assert h == list_hash([a, b])
    # The client's hash is current: nothing is sent again.
    topics, filtered, h2, changed = get_topics(c, namespace, 11,
                                               pattern=f"persistent://{namespace}/sensor-.*",
                                               topics_hash=h)
    assert topics == [] and not changed and h2 == h
    # Without a pattern, every topic of the namespace.
    topics, filtered, _, _ = get_topics(c, namespace, 12)
    assert not filtered and sorted(topics) == sorted([a, b, other])


def test_watcher_sees_topics_created_and_deleted(wire, admin_url, namespace):
    c, _ = wire
    first = f"persistent://{namespace}/w-1"
    create_topic(admin_url, first)
    pattern = f"persistent://{namespace}/w-.*"
    c.send(frame(base_command(WATCH, fv(1, 20) + fv(2, 7) + fb(3, namespace) + fb(4, pattern))))
    ok = c.expect(WATCH_SUCCESS)
    assert ok[1] == [20] and ok[2] == [7]
    assert [t.decode() for t in ok.get(3, [])] == [first]
    assert ok[4][0].decode() == list_hash([first])

    create_topic(admin_url, f"persistent://{namespace}/not-watched")
    second = f"persistent://{namespace}/w-2"
    create_topic(admin_url, second)
    up = c.expect(WATCH_UPDATE)
    assert up[1] == [7]
    assert [t.decode() for t in up.get(2, [])] == [second], "only the matching topic"
    assert up.get(3, []) == []
    assert up[4][0].decode() == list_hash([first, second])

    delete_topic(admin_url, first)
    up = c.expect(WATCH_UPDATE)
    assert [t.decode() for t in up.get(3, [])] == [first] and up.get(2, []) == []
    assert up[4][0].decode() == list_hash([second])

    c.send(frame(base_command(WATCH_CLOSE, fv(1, 21) + fv(2, 7))))
    assert c.expect(SUCCESS)[1] == [21]
    # Closed: a new topic is not announced (a PING round trip proves nothing else arrived).
    create_topic(admin_url, f"persistent://{namespace}/w-3")
    assert c.alive()


def test_watcher_with_a_pattern_over_the_limit_is_refused(wire, namespace):
    c, _ = wire
    pattern = f"persistent://{namespace}/" + "x" * 60 + ".*"
    c.send(frame(base_command(WATCH, fv(1, 30) + fv(2, 8) + fb(3, namespace) + fb(4, pattern))))
    err = c.expect(ERROR)
    assert err[1] == [30]
    assert error_name(err, 2) == "NotAllowedError"
    assert c.alive()
