"""A terminated topic stays terminated (the faults issue, item 3): the managed ledger stores the
terminated position (docs/storage-format.md, `/ml-terminated/<name>`), so after a kill -9 and a
restart, or a clean restart, producers are refused with TopicTerminated and the messages are
still there; deleting the topic forgets it, and a topic made again under the name takes
messages. (The unload case is a differential test: tests/differential/test_admin_rest.py.)"""

import signal
import tempfile

import pulsar
import pytest
import requests

from harness.broker import restartable_magnetar

TOPIC = "persistent://public/default/terminated"
BASE = "/admin/v2/persistent/public/default/terminated"


def read_all(client, sub="s"):
    consumer = client.subscribe(TOPIC, sub, initial_position=pulsar.InitialPosition.Earliest)
    out = []
    while True:
        try:
            out.append(consumer.receive(2000).data())
        except pulsar.Timeout:
            break
    consumer.close()
    return out


@pytest.mark.parametrize("stop_signal", [signal.SIGKILL, signal.SIGTERM], ids=["kill9", "sigterm"])
def test_termination_survives_a_restart_and_goes_with_the_topic(stop_signal):
    with tempfile.TemporaryDirectory(prefix="magnetar-terminate-") as d:
        broker = restartable_magnetar(d)
        ep = broker.start()
        try:
            client = pulsar.Client(ep.service_url, operation_timeout_seconds=15)
            producer = client.create_producer(TOPIC, batching_enabled=False)
            for i in range(3):
                producer.send(b"m-%d" % i)
            r = requests.post(ep.admin_url + BASE + "/terminate", timeout=30)
            assert r.status_code == 200, r.text
            # TopicTerminated, or AlreadyClosed once the client has seen CLOSE_PRODUCER and its
            # reconnection refused (it gives the producer up): not stored either way.
            with pytest.raises((pulsar.TopicTerminated, pulsar.AlreadyClosed)):
                producer.send(b"refused")
            # Once the client has given the terminated producer up, closing it (and the client
            # holding it) answers AlreadyClosed: nothing to check there.
            for close in (producer.close, client.close):
                try:
                    close()
                except pulsar.AlreadyClosed:
                    pass
            broker.stop(stop_signal)

            ep = broker.start(port=broker.port)
            client = pulsar.Client(ep.service_url, operation_timeout_seconds=15)
            with pytest.raises(pulsar.TopicTerminated):
                client.create_producer(TOPIC)
            assert read_all(client) == [b"m-0", b"m-1", b"m-2"]
            stats = requests.get(ep.admin_url + BASE + "/internalStats", timeout=30).json()
            assert stats["state"] == "Terminated", stats

            r = requests.delete(ep.admin_url + BASE + "?force=true", timeout=30)
            assert r.status_code == 204, r.text
            producer = client.create_producer(TOPIC, batching_enabled=False)
            producer.send(b"new life")
            assert read_all(client, "s2") == [b"new life"]
            client.close()
        finally:
            broker.close()
