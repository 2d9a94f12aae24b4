"""Odd topic and subscription names, and 10,000 producers on one connection. Every request gets
an answer (success or a named ServerError), the connection stays usable, /metrics and the admin
JSON stay well-formed, the names survive a restart, and bystanders are unaffected."""

import time

import pulsar
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from hostile_wire import (
    ERROR,
    LOOKUP_RESPONSE,
    PRODUCER_SUCCESS,
    SEND_RECEIPT,
    SUCCESS,
    CounterDelta,
    HostileBroker,
    WireClient,
    bystander,
    close_consumer_frame,
    entry,
    error_name,
    lookup_frame,
    producer_frame,
    protocol_errors,
    publishers,
    quiet_client,
    send_frame,
    subscribe_frame,
    wait_until,
)

NS = "persistent://public/default/"

# Names Pulsar's TopicName refuses: the broker must answer InvalidTopicName.
INVALID_TOPICS = [
    "", "persistent://", "persistent:///", NS, "bogus://public/default/x",
    "persistent://public//x", "persistent:///default/x", "persistent://pub lic/default/x",
    "persistent://pub%2Flic/default/x", "persistent://public/default/a/b/c/d",
]
# Names that may be valid or not; either way a clear answer and no harm.
ODD_TOPICS = [
    NS + "a\x00b", NS.encode() + b"\xff\xfe\xc0\x80", NS + "..", NS + "%2F..%2F..%2Fx",
    NS + "x%00", NS + "sp ace", NS + "new\nline", NS + "quote\"back\\slash",
    "persistent://no-such-tenant/default/x", "persistent://public/no-such-ns/x",
    NS + "x-partition-99999999999999999999", NS + "x-partition--1",
    NS + "a" * 65536, "b" * 70000, "non-persistent://public/default/np",
]
ODD_SUBSCRIPTIONS = [
    "a" * 65536, "a\x00b", b"\xff\xfe", "a/b", "%2F", "../..", "new\nline", " ",
    'quote"back\\slash', "#", "?x=1",
]
ALLOWED_ERRORS = {"InvalidTopicName", "TopicNotFound", "NotAllowedError", "MetadataError",
                  "ServiceNotReady", "PersistenceError"}


@pytest.fixture(scope="module")
def broker():
    b = HostileBroker()
    b.start()
    yield b
    b.close()


def create_producer(c, topic, pid):
    """PRODUCER on the raw connection -> None on success, else the ServerError name."""
    c.send(producer_frame(topic, pid, pid))
    while True:
        got = c.recv_command()
        assert got is not None, f"connection closed after PRODUCER {topic[:80]!r}"
        ctype, body = got
        if ctype == PRODUCER_SUCCESS and body[1] == [pid]:
            return None
        if ctype == ERROR and body[1] == [pid]:
            return error_name(body, 2)


def scrape_is_well_formed(admin_url):
    text = requests.get(admin_url + "/metrics", timeout=30).text
    list(text_string_to_metric_families(text))  # raises on malformed exposition
    return text


def test_odd_topic_names(broker):
    with bystander(broker.endpoint, "topics"):
        c = WireClient(broker.port, timeout=20)
        c.handshake()
        d = CounterDelta(lambda: protocol_errors(broker.admin_url, "invalid_name"))
        pid = 0
        for name in INVALID_TOPICS:
            pid += 1
            assert create_producer(c, name, pid) == "InvalidTopicName", name
        for i, name in enumerate(INVALID_TOPICS):  # LOOKUP answers the same error
            c.send(lookup_frame(name, 50_000 + i))
            got = c.expect(LOOKUP_RESPONSE)
            assert got[4] == [50_000 + i] and error_name(got, 6) == "InvalidTopicName", name
        assert d.moved(at_least=2 * len(INVALID_TOPICS))
        created = []
        for name in ODD_TOPICS:
            pid += 1
            err = create_producer(c, name, pid)
            assert err in ALLOWED_ERRORS | {None}, (name[:80], err)
            if err is None:
                created.append((pid, name))
        for pid, _name in created:  # a created producer publishes
            c.send(send_frame(pid, 0, entry(f"p{pid}", 0, b"odd")))
            assert c.expect(SEND_RECEIPT)[1] == [pid]
        assert c.alive()
        c.close()
        scrape_is_well_formed(broker.admin_url)
        r = requests.get(broker.admin_url + "/admin/v2/persistent/public/default", timeout=30)
        assert r.status_code == 200 and isinstance(r.json(), list)
        # Admin REST with the same kinds of names.
        for path in ("a%00b", "%FF%FE", "..%2F..", "a" * 8000):
            r = requests.get(f"{broker.admin_url}/admin/v2/persistent/public/default/{path}/stats",
                             timeout=30)
            assert r.status_code in (400, 404, 412, 414, 431), (path[:40], r.status_code)


def test_odd_subscription_names_survive_a_restart(broker):
    topic = f"{NS}odd-subs-{time.time_ns()}"
    with bystander(broker.endpoint, "subs"):
        c = WireClient(broker.port, timeout=20)
        c.handshake()
        d = CounterDelta(lambda: protocol_errors(broker.admin_url, "invalid_name"))
        c.send(subscribe_frame(topic, "", 1, 1))
        # Pulsar's answer, settled by test_client_cases
        assert error_name(c.expect(ERROR), 2) == "ProducerBusy"
        assert d.moved()
        accepted = []
        for i, sub in enumerate(ODD_SUBSCRIPTIONS, start=2):
            c.send(subscribe_frame(topic, sub, i, i))
            ctype, body = c.recv_command()
            if ctype == SUCCESS:
                accepted.append(sub)
                c.send(close_consumer_frame(i, 1000 + i))
                assert c.expect(SUCCESS)[1] == [1000 + i]
            else:
                assert ctype == ERROR and error_name(body, 2) in ALLOWED_ERRORS, (sub, body)
        assert c.alive()
        c.close()
        scrape_is_well_formed(broker.admin_url)
        local = topic.rsplit("/", 1)[1]
        stats = requests.get(f"{broker.admin_url}/admin/v2/persistent/public/default/{local}/stats",
                             timeout=30)
        assert stats.status_code == 200
        assert len(stats.json()["subscriptions"]) == len(accepted)
    client = quiet_client(broker)
    p = client.create_producer(topic, batching_enabled=False)
    for i in range(3):
        p.send(b"%d" % i)
    client.close()
    # The odd names are persisted: the broker restarts and each subscription has its backlog.
    broker.restart()
    local = topic.rsplit("/", 1)[1]
    stats = requests.get(f"{broker.admin_url}/admin/v2/persistent/public/default/{local}/stats",
                         timeout=30).json()
    assert len(stats["subscriptions"]) == len(accepted)
    assert all(s["msgBacklog"] == 3 for s in stats["subscriptions"].values()), stats
    scrape_is_well_formed(broker.admin_url)


def test_ten_thousand_producers_on_one_connection(broker):
    n = 10_000
    topic = f"{NS}many-producers-{time.time_ns()}"
    with bystander(broker.endpoint, "many"):
        c = WireClient(broker.port, timeout=60)
        c.handshake()
        c.send(b"".join(producer_frame(topic, pid, pid) for pid in range(1, n + 1)))
        names = set()
        for _ in range(n):
            names.add(c.expect(PRODUCER_SUCCESS)[2][0])
        assert len(names) == n, "each producer gets its own generated name"
        assert wait_until(lambda: publishers(broker.admin_url, topic) == n, 20)
        for pid in (1, n // 2, n):
            c.send(send_frame(pid, 0, entry(f"p{pid}", 0, b"%d" % pid)))
            assert c.expect(SEND_RECEIPT)[1] == [pid]
        assert c.alive()
        c.close()
        assert wait_until(lambda: publishers(broker.admin_url, topic) == 0, 20)
        # Thousands of creates in flight when the connection goes: none is left behind.
        c = WireClient(broker.port, timeout=60)
        c.handshake()
        c.send(b"".join(producer_frame(topic, pid, pid) for pid in range(1, 3001)))
        c.close()
        time.sleep(1)
        assert wait_until(lambda: publishers(broker.admin_url, topic) == 0, 20)
    client = quiet_client(broker)
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    got = sorted(int(reader.read_next(5000).data()) for _ in range(3))
    assert got == [1, n // 2, n]
    client.close()
