"""mqttNumIOThreads (issue 51): 0 serves MQTT connections on the broker's pulsar-io loops; N > 0 on
N loops of MQTT's own, threads named pulsar-ph-mqtt-<i> (Pulsar's name for a protocol handler's
separate pool). Evidence of where the connections live: the pulsar-io loops' writev() counter on
/metrics moves with MQTT traffic only when MQTT shares them. paho-mqtt on both MQTT ends, the
official Pulsar client reading the topic afterwards."""

from __future__ import annotations

import os
import queue
import uuid

import paho.mqtt.client as mqtt
import pulsar
import pytest
import requests

from harness.broker import BrokerError, MagnetarProcess
from harness.util import metric_sum

MESSAGES = 200


def thread_names(pid: int) -> list[str]:
    """The names (/proc comm, 15 characters at most) of the process's threads."""
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                out.append(f.read().strip())
        except FileNotFoundError:
            pass  # the thread exited meanwhile
    return out


def pulsar_io_writevs(proc: MagnetarProcess) -> float:
    text = requests.get(proc.admin_url + "/metrics", timeout=10).text
    return metric_sum(text, "magnetar_writev_calls_total", kind="pulsar-io")


def paho(port: int, client_id: str) -> tuple[mqtt.Client, queue.Queue]:
    """A connected MQTT 3.1.1 client on its network thread, and the payloads it receives."""
    got: queue.Queue = queue.Queue()
    connacks: queue.Queue = queue.Queue()
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id,
                    protocol=mqtt.MQTTv311)
    c.on_message = lambda _c, _u, m: got.put(m.payload)
    c.on_connect = lambda _c, _u, _f, rc, _p: connacks.put(rc.value)
    c.connect("127.0.0.1", port, 30)
    c.loop_start()
    assert connacks.get(timeout=10) == 0
    return c, got


@pytest.mark.parametrize("mqtt_threads", [0, 2])
def test_mqtt_connections_on_the_loops_the_setting_names(mqtt_threads: int) -> None:
    settings = ["mqttListeners=mqtt://127.0.0.1:0", "numIOThreads=2",
                f"mqttNumIOThreads={mqtt_threads}"]
    with MagnetarProcess(settings) as proc:
        proc.start()
        assert proc.pid is not None
        names = thread_names(proc.pid)
        # Linux keeps 15 characters: pulsar-ph-mqtt-0 and -1 both read "pulsar-ph-mqtt-".
        assert sum(n.startswith("pulsar-ph-mqtt") for n in names) == mqtt_threads, names
        assert sum(n.startswith("pulsar-io-") for n in names) == 2, names
        port = proc.ports["mqttPort"]
        topic = f"loops/{uuid.uuid4().hex[:8]}"
        sub, got = paho(port, "loops-sub")
        subacks: queue.Queue = queue.Queue()
        sub.on_subscribe = lambda *_a: subacks.put(1)
        sub.subscribe(topic, 1)
        subacks.get(timeout=10)
        pub, _ = paho(port, "loops-pub")
        before = pulsar_io_writevs(proc)
        infos = [pub.publish(topic, b"m%d" % i, qos=1) for i in range(MESSAGES)]
        for info in infos:
            info.wait_for_publish(timeout=20)
            assert info.is_published()
        received = [got.get(timeout=20) for _ in range(MESSAGES)]
        assert received == [b"m%d" % i for i in range(MESSAGES)]
        moved = pulsar_io_writevs(proc) - before
        if mqtt_threads:
            assert moved == 0, "an MQTT connection wrote on a pulsar-io loop"
        else:
            assert moved > 0, "MQTT traffic did not show on the shared pulsar-io loops"
        for c in (pub, sub):
            c.disconnect()
            c.loop_stop()
        # The messages are in the Pulsar topic for Pulsar consumers as well.
        client = pulsar.Client(proc.endpoint.service_url, operation_timeout_seconds=10)
        try:
            reader = client.create_reader(
                "persistent://public/default/" + topic.replace("/", "%2F"),
                pulsar.MessageId.earliest)
            read = [reader.read_next(timeout_millis=10000).data() for _ in range(MESSAGES)]
            assert read == [b"m%d" % i for i in range(MESSAGES)]
        finally:
            client.close()


def test_mqtt_num_io_threads_refuses_a_negative_count() -> None:
    proc = MagnetarProcess(["mqttListeners=mqtt://127.0.0.1:0", "mqttNumIOThreads=-1"])
    try:
        with pytest.raises(BrokerError, match="mqttNumIOThreads"):
            proc.start(timeout_s=15)
    finally:
        proc.close()


def test_loops_stop_with_the_broker() -> None:
    """SIGTERM with MQTT clients connected to the separate loops ends in exit 0."""
    proc = MagnetarProcess(["mqttListeners=mqtt://127.0.0.1:0", "mqttNumIOThreads=2"])
    proc.start()
    clients = [paho(proc.ports["mqttPort"], f"stop-{i}")[0] for i in range(3)]
    try:
        for c in clients:
            c.publish("stop/t", b"x", qos=1).wait_for_publish(timeout=10)
        assert proc.stop(timeout_s=30) == 0
    finally:
        for c in clients:
            c.loop_stop()
        proc.close()
