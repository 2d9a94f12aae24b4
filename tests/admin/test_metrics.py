"""GET /metrics of a real Magnetar broker, read with the Prometheus text parser
(prometheus_client): names, types, labels, and counters that move with traffic."""

import socket
import urllib.parse
import uuid

import pulsar
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from harness.broker import MagnetarProcess
from harness.util import wait_for


def scrape(admin_url):
    """{family name: Metric}; counters are keyed without their _total suffix (parser's rule)."""
    r = requests.get(admin_url + "/metrics", timeout=30)
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    return {f.name: f for f in text_string_to_metric_families(r.text)}


def value(families, family, sample_name=None, **labels):
    """The value of the one sample of `family` whose labels include `labels` (None if absent)."""
    fam = families.get(family)
    if fam is None:
        return None
    found = [s.value for s in fam.samples
             if (sample_name is None or s.name == sample_name)
             and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) <= 1, f"{family} {labels}: {found}"
    return found[0] if found else None


def produce(service_url, topic, n, size=100):
    c = pulsar.Client(service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    try:
        p = c.create_producer(topic, batching_enabled=False)
        for _ in range(n):
            p.send_async(b"x" * size, None)
        p.flush()
    finally:
        c.close()


EXPECTED_TYPES = {
    "pulsar_topics_count": "gauge",
    "pulsar_subscriptions_count": "gauge",
    "pulsar_producers_count": "gauge",
    "pulsar_consumers_count": "gauge",
    "pulsar_rate_in": "gauge",
    "pulsar_rate_out": "gauge",
    "pulsar_throughput_in": "gauge",
    "pulsar_throughput_out": "gauge",
    "pulsar_storage_size": "gauge",
    "pulsar_msg_backlog": "gauge",
    "pulsar_storage_backlog_size": "gauge",
    "pulsar_in_messages": "counter",
    "pulsar_in_bytes": "counter",
    "pulsar_out_messages": "counter",
    "pulsar_out_bytes": "counter",
    "pulsar_subscription_back_log": "gauge",
    "pulsar_subscription_msg_rate_out": "gauge",
    "pulsar_subscription_unacked_messages": "gauge",
    "pulsar_active_connections": "gauge",
    "magnetar_thread_cpu_utilization": "gauge",
    "magnetar_handover_tasks": "counter",
    "magnetar_handover_wakeups": "counter",
    "magnetar_handover_passes": "counter",
    "magnetar_handover_held_tasks": "counter",
    "magnetar_handover_held_batches": "counter",
    "magnetar_writev_calls": "counter",
    "magnetar_protocol_errors": "counter",
}


def test_names_types_and_topic_labels(broker):
    topic = f"persistent://public/default/metrics-{uuid.uuid4().hex[:8]}"
    sub_path = "/admin/v2/persistent/public/default/" + topic.rsplit("/", 1)[1]
    assert requests.put(broker.admin_url + sub_path + "/subscription/sub").status_code == 204
    produce(broker.service_url, topic, 20)
    fams = scrape(broker.admin_url)
    for name, typ in EXPECTED_TYPES.items():
        assert name in fams, name
        assert fams[name].type == typ, (name, fams[name].type)
        assert fams[name].documentation, f"{name} has no HELP"
    labels = {"cluster": "standalone", "namespace": "public/default", "topic": topic}
    assert value(fams, "pulsar_in_messages", "pulsar_in_messages_total", **labels) == 20
    assert value(fams, "pulsar_in_bytes", "pulsar_in_bytes_total", **labels) >= 2000
    assert value(fams, "pulsar_storage_size", **labels) >= 2000
    assert value(fams, "pulsar_msg_backlog", **labels) == 20
    assert value(fams, "pulsar_subscriptions_count", **labels) == 1
    assert value(fams, "pulsar_subscription_back_log", subscription="sub", **labels) == 20
    assert value(fams, "pulsar_topics_count", cluster="standalone",
                 namespace="public/default") >= 1


def exchange_and_scrape(broker, consumer, topic, n, total):
    """Produces n messages to `topic`, acknowledges them on `consumer`, scrapes /metrics and checks
    that the topic's in and out message counters read `total`; returns the families."""
    produce(broker.service_url, topic, n)
    for _ in range(n):
        consumer.acknowledge(consumer.receive(timeout_millis=10000))
    families = scrape(broker.admin_url)
    for family in ("pulsar_in_messages", "pulsar_out_messages"):
        assert value(families, family, family + "_total", topic=topic) == total
    return families


def test_counters_and_rates_move_with_traffic(broker):
    topic = f"persistent://public/default/moving-{uuid.uuid4().hex[:8]}"
    labels = {"topic": topic}
    c = pulsar.Client(broker.service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    try:
        consumer = c.subscribe(topic, "sub")
        before = exchange_and_scrape(broker, consumer, topic, 50, 50)
        tasks_before = sum(s.value for s in before["magnetar_handover_tasks"].samples)
        writev_before = sum(s.value for s in before["magnetar_writev_calls"].samples)
        held_before = sum(s.value for s in before["magnetar_handover_held_tasks"].samples)

        after = exchange_and_scrape(broker, consumer, topic, 30, 80)
        assert sum(s.value for s in after["magnetar_handover_tasks"].samples) > tasks_before
        assert sum(s.value for s in after["magnetar_writev_calls"].samples) > writev_before
        # Coalesced wake-ups: never more wake-ups than tasks handed over, per thread.
        tasks = {s.labels["thread"]: s.value for s in after["magnetar_handover_tasks"].samples}
        for s in after["magnetar_handover_wakeups"].samples:
            assert s.value <= tasks[s.labels["thread"]]
        # Flushes requested by an ml-worker pass reach the io loops as end-of-pass batches.
        held = {s.labels["thread"]: s.value for s in after["magnetar_handover_held_tasks"].samples}
        assert sum(held.values()) > held_before
        for s in after["magnetar_handover_held_batches"].samples:
            assert s.value <= held[s.labels["thread"]] <= tasks[s.labels["thread"]]
        assert value(after, "pulsar_consumers_count", **labels) == 1

        produce(broker.service_url, topic, 200)
        got = wait_for(lambda: (value(scrape(broker.admin_url), "pulsar_rate_in", **labels) or 0)
                       > 0)
        assert got, "pulsar_rate_in stayed 0 after traffic"
    finally:
        c.close()


def test_thread_cpu_utilization(broker):
    scrape(broker.admin_url)  # starts a new interval
    produce(broker.service_url, f"persistent://public/default/cpu-{uuid.uuid4().hex[:8]}", 3000)
    fams = scrape(broker.admin_url)
    cpu = {s.labels["thread"]: s.value for s in fams["magnetar_thread_cpu_utilization"].samples}
    for name in ("pulsar-io-0", "ml-worker-0", "pulsar-web", "pulsar-stats"):
        assert name in cpu, sorted(cpu)
    for name, u in cpu.items():
        if name.startswith(("pulsar-io-", "ml-worker-")):
            assert 0 <= u <= 1, (name, u)
    assert max(u for n, u in cpu.items() if n.startswith("pulsar-io-")) > 0
    assert max(u for n, u in cpu.items() if n.startswith("ml-worker-")) > 0


def test_protocol_error_counter(broker):
    fams = scrape(broker.admin_url)
    before = value(fams, "magnetar_protocol_errors", "magnetar_protocol_errors_total",
                   error="bad_frame")
    port = int(broker.service_url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"\x00\x00\x00\x02\x00\x00")  # totalSize 2: not a frame
        s.settimeout(5)
        try:
            assert s.recv(1) == b""  # the broker closes the connection
        except ConnectionResetError:
            pass
    after = wait_for(lambda: value(scrape(broker.admin_url), "magnetar_protocol_errors",
                                   "magnetar_protocol_errors_total", error="bad_frame") > before)
    assert after


def test_label_values_are_escaped(broker):
    name = 'we"ird\\sub'
    topic = f"escape-{uuid.uuid4().hex[:8]}"
    path = (f"/admin/v2/persistent/public/default/{topic}/subscription/"
            + urllib.parse.quote(name, safe=""))
    assert requests.put(broker.admin_url + f"/admin/v2/persistent/public/default/{topic}"
                        ).status_code == 204
    assert requests.put(broker.admin_url + path).status_code == 204
    fams = scrape(broker.admin_url)
    assert value(fams, "pulsar_subscription_back_log", subscription=name,
                 topic=f"persistent://public/default/{topic}") == 0


@pytest.fixture(scope="module")
def namespace_level_broker():
    with MagnetarProcess(["exposeTopicLevelMetricsInPrometheus=false"]) as proc:
        yield proc.start()


def test_namespace_level_aggregates(namespace_level_broker):
    b = namespace_level_broker
    for i in range(3):
        produce(b.service_url, f"persistent://public/default/agg-{i}", 10)
    fams = scrape(b.admin_url)
    for name, fam in fams.items():
        if name.startswith("pulsar_"):
            for s in fam.samples:
                assert "topic" not in s.labels, (name, s.labels)
    labels = {"cluster": "standalone", "namespace": "public/default"}
    assert value(fams, "pulsar_in_messages", "pulsar_in_messages_total", **labels) == 30
    assert value(fams, "pulsar_topics_count", **labels) == 3
    assert value(fams, "pulsar_storage_size", **labels) >= 3000
