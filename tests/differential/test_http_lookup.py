"""The HTTP lookup (issue 53, item 4): a client given the broker's http:// URL as its service URL
looks topics up over the web service, then talks to the broker over the binary protocol.

The C++ client (wrapped by the Python client used here) and the Java client call, in this order:
GET /admin/v2/{domain}/{t}/{ns}/{topic}/partitions?checkAllowAutoCreation=true (partitioned
metadata), GET /lookup/v2/topic/{domain}/{t}/{ns}/{topic} (LookupData),
GET /admin/v2/namespaces/{t}/{ns}/topics?mode=... (regex subscriptions) and
GET /admin/v2/schemas/{t}/{ns}/{topic}/schema. Checked through the client (fresh namespace,
non-persistent topics, a partitioned topic, a regex subscription, a missing namespace) and with
`requests` (status codes, reasons, JSON field names and order), as Pulsar 4.2.4 answers.
"""

import re
import time
import uuid

import pulsar
import pytest
import requests

from helpers import receive_n, texts

pytestmark = pytest.mark.admin

# Pulsar's LookupData through Jackson in a broker without TLS: the null TLS URLs are left out
# and the legacy "brokerUrlSsl" is always "".
LOOKUP_KEYS = ["brokerUrl", "httpUrl", "nativeUrl", "brokerUrlSsl"]


def http(admin_url, method, path, **kw):
    return requests.request(method, admin_url + path, timeout=30, allow_redirects=False, **kw)


def reason(r):
    return r.json()["reason"]


@pytest.fixture
def namespace(admin_url):
    """A namespace created a moment before use (PUT with an empty body, as the C++ client's
    LookupServiceTest does), deleted afterwards."""
    ns = f"public/http-{uuid.uuid4().hex[:8]}"
    r = http(admin_url, "PUT", f"/admin/v2/namespaces/{ns}", data="")
    assert r.status_code == 204, r.text
    yield ns
    http(admin_url, "DELETE", f"/admin/v2/namespaces/{ns}", params={"force": "true"})


@pytest.fixture
def http_client(admin_url):
    c = pulsar.Client(admin_url, operation_timeout_seconds=10,
                      logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    yield c
    c.close()


def wait_auto_creation(admin_url, ns, partitions):
    """Waits until the namespace's autoTopicCreation policy is in force (Pulsar applies it from
    its policy cache a moment after the POST): the partitioned metadata of a fresh name with
    checkAllowAutoCreation answers 404 when auto-creation is off, else `partitions`."""
    deadline = time.time() + 30
    while True:
        r = http(admin_url, "GET", f"/admin/v2/persistent/{ns}/probe-{uuid.uuid4().hex[:6]}"
                 "/partitions", params={"checkAllowAutoCreation": "true"})
        if (partitions is None and r.status_code == 404) or \
                (r.status_code == 200 and r.json()["partitions"] == partitions):
            return
        assert time.time() < deadline, r.text
        time.sleep(0.2)


def test_producers_on_new_namespace_over_http(http_client, admin_url, namespace):
    """The C++ client's LookupServiceTest.basicGetNamespaceTopics with an http:// URL: producers
    on persistent and non-persistent topics of a namespace created just before, then the
    namespace's topics by mode (persistent ones first for ALL)."""
    t1, t2 = f"persistent://{namespace}/t1", f"persistent://{namespace}/t2"
    t3 = f"non-persistent://{namespace}/t3"
    producers = [http_client.create_producer(t) for t in (t1, t2, t3)]
    consumer = http_client.subscribe(t3, "sub")
    producers[2].send(b"np")
    assert texts(receive_n(consumer, 1)) == ["np"]
    reader = http_client.create_reader(t1, pulsar.MessageId.earliest)
    producers[0].send(b"p")
    assert reader.read_next(10_000).data() == b"p"
    lists = {mode: http(admin_url, "GET", f"/admin/v2/namespaces/{namespace}/topics",
                        params={"mode": mode}) for mode in ("PERSISTENT", "NON_PERSISTENT", "ALL")}
    assert lists["PERSISTENT"].json() == [t1, t2]
    assert lists["NON_PERSISTENT"].json() == [t3]
    assert lists["ALL"].json() == [t1, t2, t3]
    # No mode means PERSISTENT; a value that is not a Mode is JAX-RS's 404.
    assert http(admin_url, "GET", f"/admin/v2/namespaces/{namespace}/topics").json() == [t1, t2]
    for bad in ("all", "bogus"):
        assert http(admin_url, "GET", f"/admin/v2/namespaces/{namespace}/topics",
                    params={"mode": bad}).status_code == 404


def test_partitioned_topic_and_regex_subscription_over_http(http_client, admin_url, namespace):
    topic = f"persistent://{namespace}/parted"
    assert http(admin_url, "PUT", f"/admin/v2/persistent/{namespace}/parted/partitions",
                json=3).status_code == 204
    assert http_client.get_topic_partitions(topic) == [f"{topic}-partition-{i}" for i in range(3)]
    names = [f"persistent://{namespace}/rx-a", f"persistent://{namespace}/rx-b"]
    producers = [http_client.create_producer(n) for n in names + [topic]]
    # The regex consumer lists the namespace over HTTP (mode=PERSISTENT) and finds both topics
    # and the partitioned one's partitions.
    consumer = http_client.subscribe(re.compile(f"persistent://{namespace}/.*"), "sub",
                                     initial_position=pulsar.InitialPosition.Earliest)
    for i, p in enumerate(producers):
        for j in range(3):
            p.send(f"{i}-{j}".encode())
    got = receive_n(consumer, 9)
    assert sorted(texts(got)) == sorted(f"{i}-{j}" for i in range(3) for j in range(3))
    assert {m.topic_name() for m in got} >= set(names)


def test_missing_namespace_over_http(http_client, admin_url):
    """The partitioned metadata answers 404, which the C++ client's HTTP lookup reports as
    ConnectError (curl's HTTP error), on either broker."""
    ns = f"public/nope-{uuid.uuid4().hex[:6]}"
    with pytest.raises(pulsar.ConnectError):
        http_client.create_producer(f"persistent://{ns}/t")
    with pytest.raises(pulsar.ConnectError):
        http_client.create_producer(f"non-persistent://{ns}/t")


def test_lookup_data_fields(admin_url, namespace):
    for domain in ("persistent", "non-persistent"):
        for local in ("never-used", "other"):
            r = http(admin_url, "GET", f"/lookup/v2/topic/{domain}/{namespace}/{local}")
            assert r.status_code == 200, r.text
            assert r.headers["Content-Type"].startswith("application/json")
            body = r.json()
            assert list(body) == LOOKUP_KEYS, body
            assert body["brokerUrl"] == body["nativeUrl"]
            assert body["brokerUrl"].startswith("pulsar://")
            assert body["httpUrl"].startswith("http://")
            assert body["brokerUrlSsl"] == ""
        # authoritative is for redirected lookups; a standalone broker answers the same.
        r = http(admin_url, "GET", f"/lookup/v2/topic/{domain}/{namespace}/x",
                 params={"authoritative": "true"})
        assert r.status_code == 200 and list(r.json()) == LOOKUP_KEYS
        # A listener the broker does not advertise: Pulsar's PulsarServerException, 500.
        r = http(admin_url, "GET", f"/lookup/v2/topic/{domain}/{namespace}/x",
                 params={"listenerName": "nosuch"})
        assert r.status_code == 500
        assert "the broker do not have nosuch listener" in reason(r)


def test_missing_namespace_and_tenant_answers(admin_url):
    for ns in (f"public/nope-{uuid.uuid4().hex[:6]}", f"nope-{uuid.uuid4().hex[:6]}/ns"):
        for domain in ("persistent", "non-persistent"):
            r = http(admin_url, "GET", f"/lookup/v2/topic/{domain}/{ns}/t")
            assert (r.status_code, reason(r)) == (404, "Namespace not found")
            for q in ({"checkAllowAutoCreation": "true"}, {}):
                r = http(admin_url, "GET", f"/admin/v2/{domain}/{ns}/t/partitions", params=q)
                assert (r.status_code, reason(r)) == (404, "Namespace not found")
        r = http(admin_url, "GET", f"/admin/v2/namespaces/{ns}/topics", params={"mode": "ALL"})
        assert (r.status_code, reason(r)) == (404, "Namespace does not exist")
        # The bundle of a topic in a namespace Pulsar does not know: the whole range.
        r = http(admin_url, "GET", f"/lookup/v2/topic/persistent/{ns}/t/bundle")
        assert (r.status_code, r.text) == (200, "0x00000000_0xffffffff")
    r = http(admin_url, "GET", "/admin/v2/schemas/public/default/never-had-one/schema")
    assert (r.status_code, reason(r)) == (404, "Schema not found")
    # Pulsar's TopicName.get refuses these (500).
    assert http(admin_url, "GET", "/lookup/v2/topic/bogus/public/default/t").status_code == 500
    assert http(admin_url, "GET", "/lookup/v2/topic/persistent/pub%20lic/default/t"
                ).status_code == 500


def test_bundle_of_topic(admin_url):
    """public/default has Pulsar standalone's 4 bundles; the topic's CRC32 picks one."""
    r = http(admin_url, "GET", "/lookup/v2/topic/persistent/public/default/x/bundle")
    assert (r.status_code, r.text) == (200, "0x80000000_0xc0000000")


def test_partitioned_metadata_answers(http_client, admin_url, namespace):
    base = f"/admin/v2/persistent/{namespace}"
    assert http(admin_url, "PUT", f"{base}/parted/partitions", json=2).status_code == 204
    http_client.create_producer(f"persistent://{namespace}/plain").close()
    check = {"checkAllowAutoCreation": "true"}
    for q in (check, {}):
        r = http(admin_url, "GET", f"{base}/parted/partitions", params=q)
        assert r.json() == {"partitions": 2, "deleted": False}
        r = http(admin_url, "GET", f"{base}/plain/partitions", params=q)
        assert r.json() == {"partitions": 0, "deleted": False}
        r = http(admin_url, "GET", f"{base}/parted-partition-1/partitions", params=q)
        assert r.json() == {"partitions": 0, "deleted": False}
    # A topic that does not exist: the client may create it (checkAllowAutoCreation), else 404.
    r = http(admin_url, "GET", f"{base}/missing/partitions", params=check)
    assert r.json() == {"partitions": 0, "deleted": False}
    for domain in ("persistent", "non-persistent"):
        r = http(admin_url, "GET", f"/admin/v2/{domain}/{namespace}/missing/partitions")
        assert (r.status_code, reason(r)) == (
            404, f"Topic {domain}://{namespace}/missing not found")
    # A non-persistent topic exists while it is loaded.
    r = http(admin_url, "GET", f"/admin/v2/non-persistent/{namespace}/plain/partitions")
    assert r.status_code == 404
    p = http_client.create_producer(f"non-persistent://{namespace}/np")
    r = http(admin_url, "GET", f"/admin/v2/non-persistent/{namespace}/np/partitions")
    assert r.json() == {"partitions": 0, "deleted": False}
    p.close()


def test_lookup_without_auto_creation(http_client, admin_url, namespace):
    r = http(admin_url, "POST", f"/admin/v2/namespaces/{namespace}/autoTopicCreation",
             json={"allowAutoTopicCreation": False})
    assert r.status_code == 204, r.text
    wait_auto_creation(admin_url, namespace, None)
    missing = f"persistent://{namespace}/missing"
    r = http(admin_url, "GET", f"/lookup/v2/topic/persistent/{namespace}/missing")
    assert (r.status_code, reason(r)) == (404, f"Topic not found {missing}")
    r = http(admin_url, "GET", f"/lookup/v2/topic/persistent/{namespace}/missing-partition-0")
    assert r.status_code == 404
    for domain in ("persistent", "non-persistent"):
        r = http(admin_url, "GET", f"/admin/v2/{domain}/{namespace}/missing/partitions",
                 params={"checkAllowAutoCreation": "true"})
        assert (r.status_code, reason(r)) == (
            404, f"Topic {domain}://{namespace}/missing not found")
    # A non-persistent topic lives only in a broker: its lookup is not checked.
    r = http(admin_url, "GET", f"/lookup/v2/topic/non-persistent/{namespace}/missing")
    assert r.status_code == 200 and list(r.json()) == LOOKUP_KEYS
    with pytest.raises(pulsar.ConnectError):
        http_client.create_producer(missing)
    # Created through the admin API, it is found.
    assert http(admin_url, "PUT", f"/admin/v2/persistent/{namespace}/made").status_code == 204
    r = http(admin_url, "GET", f"/lookup/v2/topic/persistent/{namespace}/made")
    assert r.status_code == 200
    http_client.create_producer(f"persistent://{namespace}/made").close()


def test_partitioned_auto_creation_over_http(http_client, admin_url, namespace):
    r = http(admin_url, "POST", f"/admin/v2/namespaces/{namespace}/autoTopicCreation",
             json={"allowAutoTopicCreation": True, "topicType": "partitioned",
                   "defaultNumPartitions": 2})
    assert r.status_code == 204, r.text
    wait_auto_creation(admin_url, namespace, 2)
    base = f"/admin/v2/persistent/{namespace}/auto"
    # Without checkAllowAutoCreation nothing is created.
    assert http(admin_url, "GET", f"{base}/partitions").status_code == 404
    topic = f"persistent://{namespace}/auto"
    producer = http_client.create_producer(topic)
    assert http(admin_url, "GET", f"{base}/partitions").json() == {"partitions": 2,
                                                                    "deleted": False}
    assert http_client.get_topic_partitions(topic) == [f"{topic}-partition-{i}" for i in range(2)]
    producer.close()
