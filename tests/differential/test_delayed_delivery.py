"""Delayed delivery as Pulsar does it (default settings: 1 s tick, not strict): deliver_after holds
a message on Shared subscriptions and not on Exclusive ones, the messages behind it are not held,
msgDelayed / msgBacklogNoDelayed, and the namespace delayedDelivery policy's REST shape (the
refusal of a delay over maxDeliveryDelayInMillis is in tests/java: the C++ client resends
after that SEND_ERROR forever)."""

import time
from datetime import timedelta

import pulsar
import pytest
import requests

from harness.util import temp_namespace, wait_for
from helpers import assert_nothing, receive_n, texts


def stats(admin_url, topic):
    path = topic.replace("persistent://", "")
    r = requests.get(f"{admin_url}/admin/v2/persistent/{path}/stats", timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture
def namespace(admin_url):
    yield from temp_namespace(admin_url, "delayed")


def test_shared_holds_exclusive_does_not(client, topic, admin_url):
    shared = client.subscribe(topic, "shared", consumer_type=pulsar.ConsumerType.Shared)
    excl = client.subscribe(topic, "excl", consumer_type=pulsar.ConsumerType.Exclusive)
    producer = client.create_producer(topic, batching_enabled=False)
    sent = time.time()
    producer.send(b"late", deliver_after=timedelta(seconds=4))
    producer.send(b"now")
    assert texts(receive_n(excl, 2)) == ["late", "now"]
    first = receive_n(shared, 1)
    assert texts(first) == ["now"]
    shared.acknowledge(first[0])
    # The client groups acks: wait until "now"'s ack is in too.
    s = wait_for(lambda: (lambda x: x if x["msgDelayed"] == 1 and x["msgBacklog"] == 1 else None)(
        stats(admin_url, topic)["subscriptions"]["shared"]), 20.0)
    assert s and s["msgDelayed"] == 1 and s["msgBacklog"] == 1 and s["msgBacklogNoDelayed"] == 0
    assert stats(admin_url, topic)["subscriptions"]["excl"]["msgDelayed"] == 0
    assert_nothing(shared, 1000)
    late = receive_n(shared, 1)
    assert texts(late) == ["late"]
    # Not strict by default: at most one tick (1 s) early.
    assert time.time() - sent >= 4 - 1.2
    shared.acknowledge(late[0])


def test_namespace_policy_rest_shape(admin_url, namespace):
    url = f"{admin_url}/admin/v2/namespaces/{namespace}/delayedDelivery"
    unset = requests.get(url, timeout=30)
    assert unset.status_code == 200 and unset.text == "", "unset: 200, empty body (Pulsar)"
    body = {"active": True, "tickTime": 500, "maxDeliveryDelayInMillis": 1000}
    r = requests.post(url, json=body, timeout=30)
    assert r.status_code == 204, r.text
    assert requests.get(url, timeout=30).json() == body
    assert requests.delete(url, timeout=30).status_code == 204
    assert requests.get(url, timeout=30).text == ""
    # Fields left out take Java's defaults.
    assert requests.post(url, json={"active": True}, timeout=30).status_code == 204
    assert requests.get(url, timeout=30).json() == {
        "active": True, "tickTime": 0, "maxDeliveryDelayInMillis": 0}
