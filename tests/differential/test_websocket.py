"""Pulsar's WebSocket API (webSocketServiceEnabled=true, on the web service port, as Pulsar 4.2.4
runs it inside the broker) through a real WebSocket client (websocket-client from PyPI):
producer, consumer and reader sessions with Pulsar's JSON messages, acks, negative acks,
pullMode permits, PING/PONG, the HTTP errors of a refused handshake, hostile frames, and token
authentication / authorization (a second broker with token auth).

Each module fixture starts its own broker of the --broker kind with the settings it needs.
"""

import base64
import json
import ssl
import uuid

import pytest
import requests

import websocket
from harness.auth import new_secret_key, role_token, token_auth_settings
from harness.broker import broker_process, free_port
from harness.fixtures import wait_namespace
from harness.tls import tls_certs, tls_settings  # noqa: F401 (fixture)
from harness.util import eventually

NS = "public/default"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def start_ws_broker(config, settings):
    if config.getoption("--broker-url", None):
        pytest.skip("needs a broker started with webSocketServiceEnabled=true")
    proc = broker_process(config.getoption("--broker", "magnetar"),
                          ["webSocketServiceEnabled=true", *settings])
    return proc, proc.start()


@pytest.fixture(scope="module")
def ws_broker(request, tls_certs):  # noqa: F811
    """A broker with the WebSocket service on webServicePort and webServicePortTls."""
    proc, endpoint = start_ws_broker(
        request.config, tls_settings(tls_certs, broker_port=free_port(), web_port=free_port()))
    try:
        assert wait_namespace(endpoint.admin_url), "public/default did not appear"
        yield endpoint
    finally:
        proc.close()


@pytest.fixture(scope="module")
def ws_url(ws_broker):
    return ws_broker.admin_url.replace("http://", "ws://")


def fresh(name):
    return f"persistent/{NS}/ws-{name}-{uuid.uuid4().hex[:8]}"


def connect(base, path, timeout=20, **kwargs):
    return websocket.create_connection(base + path, timeout=timeout, **kwargs)


def refused_status(base, path, **kwargs):
    """The HTTP status of a handshake the broker refuses."""
    with pytest.raises(websocket.WebSocketBadStatusException) as e:
        connect(base, path, **kwargs).close()
    return e.value.status_code


def publish(producer, payload: bytes, **fields):
    producer.send(json.dumps({"payload": b64(payload), **fields}))
    ack = json.loads(producer.recv())
    assert ack["result"] == "ok", ack
    return ack


def receive(consumer):
    return json.loads(consumer.recv())


def assert_silent(session, seconds=2.0):
    """No text frame arrives within `seconds`."""
    session.settimeout(seconds)
    with pytest.raises(websocket.WebSocketTimeoutException):
        session.recv()
    session.settimeout(20)


def test_produce_consume_ack(ws_url):
    t = fresh("pc")
    consumer = connect(ws_url, f"/ws/v2/consumer/{t}/sub")
    producer = connect(ws_url, f"/ws/v2/producer/{t}")
    acks = [publish(producer, f"m{i}".encode(), properties={"i": str(i)}, key=f"k{i}",
                    context=f"c{i}") for i in range(3)]
    assert [a["context"] for a in acks] == ["c0", "c1", "c2"]
    got = [receive(consumer) for _ in range(3)]
    assert [base64.b64decode(m["payload"]) for m in got] == [b"m0", b"m1", b"m2"]
    assert [m["messageId"] for m in got] == [a["messageId"] for a in acks]
    assert got[1]["properties"] == {"i": "1"} and got[1]["key"] == "k1"
    assert got[0]["redeliveryCount"] == 0 and got[0]["publishTime"].endswith("Z")
    for m in got[:2]:
        consumer.send(json.dumps({"messageId": m["messageId"]}))
    consumer.send(json.dumps({"type": "isEndOfTopic"}))
    assert receive(consumer) == {"endOfTopic": False}
    consumer.close()
    # The two acked messages are gone; the third comes again to the next consumer.
    again = connect(ws_url, f"/ws/v2/consumer/{t}/sub")
    assert base64.b64decode(receive(again)["payload"]) == b"m2"
    assert_silent(again)
    again.close()
    producer.close()


def test_reader_from_earliest_latest_and_message_id(ws_url):
    t = fresh("reader")
    producer = connect(ws_url, f"/ws/v2/producer/{t}")
    ids = [publish(producer, f"r{i}".encode())["messageId"] for i in range(3)]
    reader = connect(ws_url, f"/ws/v2/reader/{t}?messageId=earliest")
    got = [receive(reader) for _ in range(3)]
    assert [base64.b64decode(m["payload"]) for m in got] == [b"r0", b"r1", b"r2"]
    assert [m["messageId"] for m in got] == ids
    after_first = connect(ws_url, f"/ws/v2/reader/{t}?messageId={ids[0]}")
    assert base64.b64decode(receive(after_first)["payload"]) == b"r1"
    latest = connect(ws_url, f"/ws/v2/reader/{t}")
    assert_silent(latest)
    publish(producer, b"r3")
    assert base64.b64decode(receive(latest)["payload"]) == b"r3"
    for s in (reader, after_first, latest, producer):
        s.close()


def test_negative_ack_redelivers(ws_url):
    t = fresh("nack")
    consumer = connect(
        ws_url, f"/ws/v2/consumer/{t}/sub?subscriptionType=Shared&negativeAckRedeliveryDelay=300")
    producer = connect(ws_url, f"/ws/v2/producer/{t}")
    publish(producer, b"again")
    first = receive(consumer)
    consumer.send(json.dumps({"type": "negativeAcknowledge", "messageId": first["messageId"]}))
    second = receive(consumer)
    assert second["messageId"] == first["messageId"]
    assert base64.b64decode(second["payload"]) == b"again"
    assert second["redeliveryCount"] == 1
    consumer.send(json.dumps({"messageId": second["messageId"]}))
    consumer.close()
    producer.close()


def test_pull_mode_delivers_only_permitted_messages(ws_url):
    t = fresh("pull")
    consumer = connect(ws_url, f"/ws/v2/consumer/{t}/sub?pullMode=true")
    producer = connect(ws_url, f"/ws/v2/producer/{t}")
    for i in range(5):
        publish(producer, f"p{i}".encode())
    assert_silent(consumer)
    consumer.send(json.dumps({"type": "permit", "permitMessages": 2}))
    assert [base64.b64decode(receive(consumer)["payload"]) for _ in range(2)] == [b"p0", b"p1"]
    assert_silent(consumer)
    consumer.send(json.dumps({"type": "permit", "permitMessages": 1}))
    assert base64.b64decode(receive(consumer)["payload"]) == b"p2"
    assert_silent(consumer, 1.0)
    consumer.close()
    producer.close()


def test_ping_is_answered_with_pong(ws_url):
    producer = connect(ws_url, f"/ws/v2/producer/{fresh('ping')}")
    producer.ping("are-you-there")
    frame = producer.recv_data_frame(True)
    assert frame[0] == websocket.ABNF.OPCODE_PONG and frame[1].data == b"are-you-there"
    producer.close()


def test_wss_on_the_tls_web_port(ws_broker, tls_certs):  # noqa: F811
    base = ws_broker.admin_url_tls.replace("https://", "wss://")
    sslopt = {"ca_certs": tls_certs.ca, "cert_reqs": ssl.CERT_REQUIRED}
    t = fresh("wss")
    consumer = connect(base, f"/ws/v2/consumer/{t}/sub", sslopt=sslopt)
    producer = connect(base, f"/ws/v2/producer/{t}", sslopt=sslopt)
    ack = publish(producer, b"over tls", context="tls")
    got = receive(consumer)
    assert got["messageId"] == ack["messageId"]
    assert base64.b64decode(got["payload"]) == b"over tls"
    consumer.close()
    producer.close()


@pytest.mark.parametrize("path, status", [
    # Pulsar's broker registers no /ws/pingpong servlet (only the standalone WebSocket proxy).
    ("/ws/pingpong", 404),
    ("/ws/v2/nothing/persistent/public/default/x", 404),
    ("/ws/v2/consumer/{t}/sub?subscriptionType=Bogus", 400),
    ("/ws/v2/consumer/{t}/sub?receiverQueueSize=abc", 400),
    ("/ws/v2/consumer/persistent/public/default/no-subscription", 400),
    ("/ws/v2/reader/{t}?messageId=not-an-id", 400),
    # The handler's constructor fails on a path that names no topic: Jetty answers 500.
    ("/ws/v2/producer/persistent/public/default", 500),
    ("/ws/v2/producer/bogus/public/default/x", 500),
    ("/ws/v2/producer/persistent/no-such-tenant/default/x", 404),
])
def test_refused_handshakes(ws_url, path, status):
    assert refused_status(ws_url, path.format(t=fresh("bad"))) == status


def test_second_exclusive_consumer_is_refused_with_409(ws_url):
    t = fresh("excl")
    first = connect(ws_url, f"/ws/v2/consumer/{t}/sub")
    assert refused_status(ws_url, f"/ws/v2/consumer/{t}/sub") == 409
    first.close()


def test_hostile_producer_frames_get_error_acks(ws_url):
    t = fresh("hostile")
    producer = connect(ws_url, f"/ws/v2/producer/{t}")
    cases = [
        ("not json", "send-error:3"),
        (json.dumps({"payload": "!!!", "context": "x1"}), "send-error:7"),
        (json.dumps({"context": "x2"}), "send-error:7"),
        (json.dumps({"payload": "aGk=", "eventTime": "yesterday", "context": "x3"}),
         "send-error:7"),
    ]
    for text, result in cases:
        producer.send(text)
        ack = json.loads(producer.recv())
        assert ack["result"] == result, (text, ack)
        assert ack["errorMsg"]
    publish(producer, b"still fine")
    producer.close()


def test_huge_frame_closes_only_its_session(ws_url):
    t = fresh("huge")
    producer = connect(ws_url, f"/ws/v2/producer/{t}")
    try:
        # Over webSocketMaxTextFrameSize (1 MiB): the broker closes the session (1009, message
        # too big) instead of publishing it.
        producer.send(json.dumps({"payload": b64(b"x" * (2 << 20))}))
        opcode, data = producer.recv_data(control_frame=True)
        assert opcode == websocket.ABNF.OPCODE_CLOSE, (opcode, data[:100])
        assert len(data) < 2 or int.from_bytes(data[:2], "big") == 1009, data
    except (websocket.WebSocketConnectionClosedException, ConnectionError):
        pass  # closed before the whole frame was written
    producer.close()
    again = connect(ws_url, f"/ws/v2/producer/{t}")
    publish(again, b"after the huge one")
    again.close()


def test_consumer_garbage_delivers_nothing_more(ws_url):
    t = fresh("garbage")
    consumer = connect(ws_url, f"/ws/v2/consumer/{t}/sub?pullMode=true")
    consumer.send("{not json")
    # Pulsar ends the session with its own code 3, which Jetty cannot send: the session stays
    # silent there; Magnetar closes it with 1003. Either way no message comes out of it.
    consumer.settimeout(2)
    with pytest.raises((websocket.WebSocketTimeoutException,
                        websocket.WebSocketConnectionClosedException)):
        consumer.recv()
        consumer.recv()
    consumer.close()
    producer = connect(ws_url, f"/ws/v2/producer/{t}")
    publish(producer, b"broker lives on")
    producer.close()


# --- authentication and authorization --------------------------------------------------------

@pytest.fixture(scope="module")
def auth_ws(request):
    key = new_secret_key()
    proc, endpoint = start_ws_broker(request.config, token_auth_settings(key))
    admin = {"Authorization": f"Bearer {role_token(key, 'admin')}"}

    def ready():
        r = requests.get(endpoint.admin_url + "/admin/v2/namespaces/public", headers=admin,
                         timeout=10)
        assert r.status_code == 200 and NS in r.json(), r.text
    try:
        eventually(ready, 120.0)
        yield endpoint, key, admin
    finally:
        proc.close()


def grant(endpoint, admin, topic, role, actions):
    r = requests.post(f"{endpoint.admin_url}/admin/v2/{topic}/permissions/{role}",
                      json=actions, headers=admin, timeout=30)
    assert r.status_code == 204, r.text


def test_auth_refusals_and_grants(auth_ws):
    endpoint, key, admin = auth_ws
    base = endpoint.admin_url.replace("http://", "ws://")
    t = fresh("auth")
    # The topic must exist for a topic-level grant.
    r = requests.put(f"{endpoint.admin_url}/admin/v2/{t}", headers=admin, timeout=30)
    assert r.status_code == 204, r.text
    assert refused_status(base, f"/ws/v2/producer/{t}") == 401
    assert refused_status(base, f"/ws/v2/producer/{t}?token=not-a-jwt") == 401
    role = f"role-{uuid.uuid4().hex[:8]}"
    token = role_token(key, role)
    bearer = [f"Authorization: Bearer {token}"]
    assert refused_status(base, f"/ws/v2/producer/{t}", header=bearer) == 403
    grant(endpoint, admin, t, role, ["produce"])

    def produces():
        producer = connect(base, f"/ws/v2/producer/{t}", header=bearer)
        publish(producer, b"granted")
        producer.close()
    eventually(produces, 30.0)
    assert refused_status(base, f"/ws/v2/consumer/{t}/sub?token={token}") == 403
    grant(endpoint, admin, t, role, ["produce", "consume"])

    def consumes():
        reader = connect(base, f"/ws/v2/reader/{t}?messageId=earliest&token={token}")
        assert base64.b64decode(receive(reader)["payload"]) == b"granted"
        reader.close()
    eventually(consumes, 30.0)
    # The super-user's token in the query string.
    consumer = connect(base, f"/ws/v2/consumer/{t}/sub?subscriptionType=Shared&"
                             f"token={role_token(key, 'admin')}")
    consumer.close()


def test_subscription_auth_mode_prefix(auth_ws):
    """A namespace in subscription_auth_mode Prefix: a WebSocket consumer whose subscription does
    not start with its role is refused (Pulsar's check throws: the handshake answers 500); its
    own prefix connects, a reader is not checked, the super-user uses any name."""
    endpoint, key, admin = auth_ws
    base = endpoint.admin_url.replace("http://", "ws://")
    ns = f"public/ws-prefix-{uuid.uuid4().hex[:8]}"
    rest = f"{endpoint.admin_url}/admin/v2/namespaces/{ns}"
    assert requests.put(rest, headers=admin, timeout=30).status_code == 204
    assert requests.post(f"{rest}/subscriptionAuthMode", json="Prefix", headers=admin,
                         timeout=30).status_code == 204
    role = f"dev-{uuid.uuid4().hex[:6]}"
    token = role_token(key, role)
    assert requests.post(f"{rest}/permissions/{role}", json=["consume"], headers=admin,
                         timeout=30).status_code == 204
    t = f"persistent/{ns}/prefixed"
    assert requests.put(f"{endpoint.admin_url}/admin/v2/{t}", headers=admin,
                        timeout=30).status_code == 204

    def own_prefix_connects():
        connect(base, f"/ws/v2/consumer/{t}/{role}-sub?token={token}").close()
    eventually(own_prefix_connects, 30.0)
    assert refused_status(base, f"/ws/v2/consumer/{t}/other?token={token}") == 500
    connect(base, f"/ws/v2/reader/{t}?token={token}").close()
    connect(base, f"/ws/v2/consumer/{t}/other?token={role_token(key, 'admin')}").close()
    # Back to None: any name.
    assert requests.post(f"{rest}/subscriptionAuthMode", json="None", headers=admin,
                         timeout=30).status_code == 204
    eventually(lambda: connect(base, f"/ws/v2/consumer/{t}/other?token={token}").close(), 30.0)
