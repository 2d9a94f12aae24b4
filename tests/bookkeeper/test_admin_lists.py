"""Admin reads of a cluster on BookKeeper (issues 20 and 22): 3 `magnetar broker` processes with
their topics on this directory's bookies.

- A namespace's topic list is the storage's (Pulsar lists /managed-ledgers/{t}/{ns}/persistent):
  every broker lists the topics created through all of them, loaded or not (after a namespace
  unload none is loaded anywhere).
- stats, internalStats and subscriptions of a topic that exists but is not loaded on its owner
  (after an unload) load it: 200 with the old backlog, as Pulsar's getTopicIfExists.
- A topic that never existed: 404, and it is not created (not listed, no managed-ledger znode)."""

import os
import re
import shutil
import sys
import tempfile
import uuid

import pulsar
import pytest
import requests
from conftest import cluster_brokers
from test_topics import CLUSTER, Broker

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness.util import check_pattern_consumer  # noqa: E402
from harness.zk import ZkClient  # noqa: E402

QUIET = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)


@pytest.fixture(scope="module")
def brokers(bk_cluster):
    with cluster_brokers(bk_cluster, CLUSTER, lambda base, i: Broker(base, i, bk_cluster.uri), 3,
                         "magnetar-bk-admin-") as started:
        yield started


@pytest.fixture(scope="module")
def namespace(brokers):
    ns = f"public/tl-{uuid.uuid4().hex[:8]}"
    r = requests.put(f"{brokers[0].web}/admin/v2/namespaces/{ns}",
                     json={"bundles": {"numBundles": 8}}, timeout=30)
    assert r.status_code == 204, r.text
    return ns


def topic_list(web: str, ns: str) -> list[str]:
    r = requests.get(f"{web}/admin/v2/persistent/{ns}", timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def owner_web(brokers, web: str, topic: str) -> str:
    url = requests.get(f"{web}/lookup/v2/topic/{topic.replace('://', '/')}",
                       timeout=30).json()["brokerUrl"]
    return next(b.web for b in brokers if b.url == url)


def test_every_broker_lists_every_topic_loaded_or_not(brokers, namespace):
    topics = sorted(f"persistent://{namespace}/t-{i}" for i in range(6))
    for i, t in enumerate(topics):  # created through each broker in turn (307 to the owner)
        r = requests.put(f"{brokers[i % 3].web}/admin/v2/persistent/{t[len('persistent://'):]}",
                         timeout=30)
        assert r.status_code == 204, r.text
    owners = {owner_web(brokers, brokers[0].web, t) for t in topics}
    print(f"\n6 topics on {len(owners)} brokers")
    for b in brokers:
        assert topic_list(b.web, namespace) == topics
        r = requests.get(f"{b.web}/admin/v2/namespaces/{namespace}/topics", timeout=30)
        assert r.status_code == 200 and r.json() == topics, r.text
        r = requests.get(f"{b.web}/admin/v2/non-persistent/{namespace}", timeout=30)
        assert r.status_code == 200 and r.json() == [], r.text
    # Unloaded everywhere: still listed by every broker (the storage's list, not the loaded one).
    r = requests.put(f"{brokers[1].web}/admin/v2/namespaces/{namespace}/unload", timeout=60)
    assert r.status_code == 204, r.text
    for b in brokers:
        assert topic_list(b.web, namespace) == topics
    # Their new owners (placed by the admin calls' lookups) find them in the storage: a create is
    # 409, topic policies are served.
    for i, t in enumerate(topics):
        path = t[len("persistent://"):]
        r = requests.put(f"{brokers[(i + 1) % 3].web}/admin/v2/persistent/{path}", timeout=30)
        assert r.status_code == 409, (t, r.status_code, r.text)
        r = requests.get(f"{brokers[i % 3].web}/admin/v2/persistent/{path}/maxProducers",
                         timeout=30)
        assert r.status_code == 204, (t, r.status_code, r.text)
    # A pattern consumer (GET_TOPICS_OF_NAMESPACE) finds them all through a broker that has none
    # of them loaded.
    client = pulsar.Client(brokers[0].url, operation_timeout_seconds=30, logger=QUIET)
    try:
        check_pattern_consumer(client, namespace, topics, 30_000)
    finally:
        client.close()
    # An unknown namespace: 404, as before.
    r = requests.get(f"{brokers[0].web}/admin/v2/persistent/public/nope-{uuid.uuid4().hex[:6]}",
                     timeout=30)
    assert r.status_code == 404, r.text


def test_stats_of_an_unloaded_topic_load_it_on_its_new_owner(brokers, namespace):
    topic = f"persistent://{namespace}/unloaded-{uuid.uuid4().hex[:6]}"
    path = topic[len("persistent://"):]
    client = pulsar.Client(brokers[0].url, operation_timeout_seconds=30, logger=QUIET)
    try:
        client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest).close()
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(10):
            producer.send(f"m{i}".encode())
        producer.close()
    finally:
        client.close()
    # Unload the topic's bundle: no broker has it loaded now.
    r = requests.put(f"{brokers[2].web}/admin/v2/namespaces/{namespace}/unload", timeout=60)
    assert r.status_code == 204, r.text
    # Each read through any broker: the owner (placed anew by the lookup of the 307) loads it.
    for b in brokers:
        r = requests.get(f"{b.web}/admin/v2/persistent/{path}/stats", timeout=60)
        assert r.status_code == 200, (b.web, r.status_code, r.text)
        assert r.json()["subscriptions"]["s"]["msgBacklog"] == 10, r.text
    r = requests.put(f"{brokers[0].web}/admin/v2/namespaces/{namespace}/unload", timeout=60)
    assert r.status_code == 204, r.text
    r = requests.get(f"{brokers[1].web}/admin/v2/persistent/{path}/internalStats", timeout=60)
    assert r.status_code == 200, r.text
    assert r.json()["numberOfEntries"] == 10 and "s" in r.json()["cursors"], r.text
    r = requests.put(f"{brokers[0].web}/admin/v2/namespaces/{namespace}/unload", timeout=60)
    assert r.status_code == 204, r.text
    r = requests.get(f"{brokers[2].web}/admin/v2/persistent/{path}/subscriptions", timeout=60)
    assert r.status_code == 200 and r.json() == ["s"], r.text


def test_reads_of_a_missing_topic_answer_404_and_create_nothing(brokers, namespace, bk_cluster):
    before = topic_list(brokers[0].web, namespace)
    path = f"{namespace}/never-{uuid.uuid4().hex[:6]}"
    for b in brokers:
        for suffix in ("/stats", "/internalStats", "/subscriptions"):
            r = requests.get(f"{b.web}/admin/v2/persistent/{path}{suffix}", timeout=60)
            assert r.status_code == 404, (suffix, r.status_code, r.text)
            assert r.json()["reason"] == "Topic not found", r.text
    for b in brokers:
        assert topic_list(b.web, namespace) == before
    # No managed-ledger znode either.
    host, port = re.match(r"zk://([^:/]+):(\d+)/", bk_cluster.uri).groups()
    with ZkClient(host, int(port)) as zk:
        assert zk.children(f"/managed-ledgers/{namespace}/persistent") == sorted(
            t.rsplit("/", 1)[1] for t in before)
        assert zk.get(f"/managed-ledgers/{namespace}/persistent/{path.rsplit('/', 1)[1]}") is None


def test_a_topic_deleted_after_a_broker_started_is_not_listed_by_it(brokers, namespace, bk_cluster):
    # A broker started while the topic existed (it saw the managed-ledger znode at start), then
    # the topic deleted through its owner: the late broker lists the storage's topics, not the
    # names it saw at start.
    topic = f"persistent://{namespace}/deleted-{uuid.uuid4().hex[:6]}"
    path = topic[len("persistent://"):]
    r = requests.put(f"{brokers[0].web}/admin/v2/persistent/{path}", timeout=30)
    assert r.status_code == 204, r.text
    base = tempfile.mkdtemp(prefix="magnetar-bk-late-")
    late = Broker(base, 9, bk_cluster.uri)
    try:
        late.wait_registered()
        assert topic in topic_list(late.web, namespace)
        r = requests.delete(f"{brokers[1].web}/admin/v2/persistent/{path}", timeout=60)
        assert r.status_code == 204, r.text
        for b in [*brokers, late]:
            assert topic not in topic_list(b.web, namespace), b.web
            r = requests.get(f"{b.web}/admin/v2/namespaces/{namespace}/topics", timeout=30)
            assert r.status_code == 200 and topic not in r.json(), (b.web, r.text)
        # A pattern consumer through the late broker (GET_TOPICS_OF_NAMESPACE) does not get it.
        client = pulsar.Client(late.url, operation_timeout_seconds=30, logger=QUIET)
        try:
            consumer = client.subscribe(re.compile(f"persistent://{namespace}/deleted-.*"), "p")
            consumer.close()
        finally:
            client.close()
        r = requests.get(f"{late.web}/admin/v2/persistent/{path}/stats", timeout=60)
        assert r.status_code == 404, r.text
        assert topic not in topic_list(late.web, namespace)
    finally:
        late.stop()
        shutil.rmtree(base, ignore_errors=True)
