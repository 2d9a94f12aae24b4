"""Rate limits as Pulsar 4 enforces them (docs/rate-limits.md): publish rate (topic policy
publishRate, namespace publishRate, broker brokerPublisherThrottlingMaxMessageRate), dispatch
rate (topic dispatchRate, subscriptionDispatchRate, namespace dispatchRate, broker
dispatchThrottlingRateInMsg), subscribe rate (subscribeRate); Pulsar's REST paths and JSON.
Rates are measured over 10 s after a 2 s settling time (a full bucket gives one period's burst at
the start), several at once to keep the suite short. Passes on Magnetar and Pulsar.

The longer form (each rate alone, 30 s windows): RATE_LIMITS_SECONDS=30 pytest -k measured."""

import os
import threading
import time
import uuid

import pulsar
import pytest
import requests

from harness.util import wait_for

SETTLE_S = 3.0
MEASURE_S = float(os.environ.get("RATE_LIMITS_SECONDS", "10"))
TOLERANCE = 0.10


def topic_url(admin_url, topic):
    return f"{admin_url}/admin/v2/persistent/{topic.removeprefix('persistent://')}"


def set_topic_policy(admin_url, topic, name, body):
    r = requests.post(f"{topic_url(admin_url, topic)}/{name}", json=body, timeout=30)
    assert r.status_code == 204, (name, r.status_code, r.text)
    # Pulsar applies topic policies when its system topic delivers them: wait until it shows.
    assert wait_for(lambda: requests.get(f"{topic_url(admin_url, topic)}/{name}",
                                         timeout=30).status_code == 200, 20.0)


def set_ns_policy(admin_url, ns, name, body):
    r = requests.post(f"{admin_url}/admin/v2/namespaces/{ns}/{name}", json=body, timeout=30)
    assert r.status_code == 204, (name, r.status_code, r.text)


def unset(r):
    """An unset policy: Pulsar answers 204, or 200 with an empty body for some namespace GETs."""
    return r.status_code == 204 or (r.status_code == 200 and r.text in ("", "null"))


def msg_out(admin_url, topic, sub):
    """The subscription's msgOutCounter in the topic's stats (messages dispatched so far)."""
    r = requests.get(f"{topic_url(admin_url, topic)}/stats", timeout=30)
    assert r.status_code == 200, (r.status_code, r.text)
    return r.json()["subscriptions"][sub]["msgOutCounter"]


def publish_rate(msgs):
    return {"publishThrottlingRateInMsg": msgs, "publishThrottlingRateInByte": -1}


def dispatch_rate(msgs):
    return {"dispatchThrottlingRateInMsg": msgs, "dispatchThrottlingRateInByte": -1,
            "relativeToPublishRate": False, "ratePeriodInSecond": 1}


class Publisher(threading.Thread):
    """Publishes as fast as the broker takes it (send_async, blocking when the client's queue is
    full), recording each receipt's time; errors are counted: a throttled send must not fail.
    Each has its own client: a throttled producer pauses its whole connection (as Pulsar), which
    would pace the other producers of a shared one too."""

    def __init__(self, service_url, topic, seconds):
        super().__init__(daemon=True)
        self.client = pulsar.Client(service_url)
        self.producer = self.client.create_producer(topic, batching_enabled=False,
                                               block_if_queue_full=True,
                                               max_pending_messages=20,
                                               send_timeout_millis=60000)
        self.seconds = seconds
        self.acked = []
        self.errors = []
        self.lock = threading.Lock()

    def callback(self, res, _msg_id):
        with self.lock:
            if res == pulsar.Result.Ok:
                self.acked.append(time.time())
            else:
                self.errors.append(res)

    def run(self):
        self.start_time = time.time()
        deadline = self.start_time + self.seconds
        while time.time() < deadline:
            self.producer.send_async(b"x" * 100, self.callback)
        self.producer.flush()
        self.client.close()

    def rate_between(self, start, end):
        with self.lock:
            return sum(1 for t in self.acked if start <= t < end) / (end - start)


class Receiver(threading.Thread):
    """Receives (and acks) for `seconds`, recording each message's arrival time."""

    def __init__(self, client, topic, sub, seconds):
        super().__init__(daemon=True)
        self.consumer = client.subscribe(topic, sub, consumer_type=pulsar.ConsumerType.Shared,
                                         initial_position=pulsar.InitialPosition.Earliest)
        self.seconds = seconds
        self.times = []

    def run(self):
        self.start_time = time.time()
        deadline = self.start_time + self.seconds
        while time.time() < deadline:
            try:
                m = self.consumer.receive(100)
            except pulsar.Timeout:
                continue
            self.times.append(time.time())
            self.consumer.acknowledge(m)

    def rate_between(self, start, end):
        return sum(1 for t in self.times if start <= t < end) / (end - start)


def fill(client, topic, n):
    """n messages stored before any consumer: the backlog a dispatch limit then paces."""
    p = client.create_producer(topic, batching_enabled=False, block_if_queue_full=True)
    for _ in range(n):
        p.send_async(b"y" * 100, None)
    p.flush()
    p.close()


def within(measured, expected):
    return abs(measured - expected) <= TOLERANCE * expected


@pytest.mark.admin
def test_measured_rates_match_the_policies(broker, client, admin_url, namespace):
    """Topic publishRate, namespace publishRate, topic dispatchRate, subscriptionDispatchRate
    and namespace dispatchRate, measured together over MEASURE_S seconds."""
    total = SETTLE_S + MEASURE_S
    suffix = uuid.uuid4().hex[:6]
    base = f"persistent://{namespace}/t-{suffix}"
    # A second namespace carries the namespace limits: publish 35/s, dispatch 50/s. Rates stay
    # low enough for one Python client to drive all of them on a loaded machine.
    ns2 = namespace + "2"
    assert requests.put(f"{admin_url}/admin/v2/namespaces/{ns2}", timeout=30).status_code == 204
    base2 = f"persistent://{ns2}/t-{suffix}"
    pub_topic, ns_pub_topic = base + "-pub", base2 + "-nspub"
    disp_topic, sub_topic = base + "-disp", base + "-sub"
    set_ns_policy(admin_url, ns2, "publishRate", publish_rate(35))
    set_ns_policy(admin_url, ns2, "dispatchRate", dispatch_rate(50))
    for t in (pub_topic, ns_pub_topic, disp_topic, sub_topic):
        client.create_producer(t).close()  # topic policies need the topic
    set_topic_policy(admin_url, pub_topic, "publishRate", publish_rate(50))
    set_topic_policy(admin_url, disp_topic, "dispatchRate", dispatch_rate(100))
    set_topic_policy(admin_url, disp_topic, "publishRate", publish_rate(100000))
    set_topic_policy(admin_url, sub_topic, "dispatchRate", dispatch_rate(100000))
    set_topic_policy(admin_url, sub_topic, "publishRate", publish_rate(100000))
    set_topic_policy(admin_url, sub_topic, "subscriptionDispatchRate", dispatch_rate(70))
    ns_disp_topic = base2 + "-nsdisp"
    client.create_producer(ns_disp_topic).close()
    set_topic_policy(admin_url, ns_disp_topic, "publishRate", publish_rate(100000))
    for t in (disp_topic, sub_topic, ns_disp_topic):
        fill(client, t, 2000)
    workers = {
        "topic publish 50": (Publisher(broker.service_url, pub_topic, total), 50),
        "namespace publish 35": (Publisher(broker.service_url, ns_pub_topic, total), 35),
        "topic dispatch 100": (Receiver(client, disp_topic, "s", total), 100),
        "subscription dispatch 70": (Receiver(client, sub_topic, "s", total), 70),
        "namespace dispatch 50": (Receiver(client, ns_disp_topic, "s", total), 50),
    }
    for w, _ in workers.values():
        w.start()
    for w, _ in workers.values():
        w.join(total + 60)
    failures = []
    for name, (w, expected) in workers.items():
        start = w.start_time + SETTLE_S
        measured = w.rate_between(start, start + MEASURE_S)
        if not within(measured, expected):
            failures.append(f"{name}: measured {measured:.1f}/s")
        if isinstance(w, Publisher):
            assert not w.errors, (name, w.errors[:3])  # delayed, never failed
            assert len(w.acked) > 0
    assert not failures, failures


@pytest.mark.admin
def test_policy_changes_take_effect_at_once(broker, client, admin_url, namespace):
    """A running producer and consumer follow a topic publishRate and a namespace dispatchRate
    changed under them (raised, then removed), within a second or two."""
    base = f"persistent://{namespace}/c-{uuid.uuid4().hex[:6]}"
    pub_topic, disp_topic = base + "-pub", base + "-disp"
    for t in (pub_topic, disp_topic):
        client.create_producer(t).close()
    set_topic_policy(admin_url, pub_topic, "publishRate", publish_rate(40))
    set_ns_policy(admin_url, namespace, "dispatchRate", dispatch_rate(40))
    set_topic_policy(admin_url, disp_topic, "publishRate", publish_rate(100000))
    fill(client, disp_topic, 2500)
    phase_s = 6.0
    pub = Publisher(broker.service_url, pub_topic, 3 * phase_s)
    recv = Receiver(client, disp_topic, "s", 3 * phase_s)
    pub.start()
    recv.start()
    t0 = time.time()
    # The dispatch rate is read from the broker's own count (the subscription's msgOutCounter):
    # the receiving thread's times bunch up when the loaded test machine starves it.
    time.sleep(3.0)
    before_out = (time.time(), msg_out(admin_url, disp_topic, "s"))
    time.sleep(phase_s - 3.0)
    before_end = (time.time(), msg_out(admin_url, disp_topic, "s"))
    r = requests.post(f"{topic_url(admin_url, pub_topic)}/publishRate", json=publish_rate(120),
                      timeout=30)
    assert r.status_code == 204
    set_ns_policy(admin_url, namespace, "dispatchRate", dispatch_rate(120))
    changed = time.time()
    time.sleep(1.5)
    after_out = (time.time(), msg_out(admin_url, disp_topic, "s"))
    time.sleep(phase_s - 1.5)
    after_end = (time.time(), msg_out(admin_url, disp_topic, "s"))
    assert requests.delete(f"{admin_url}/admin/v2/namespaces/{namespace}/dispatchRate",
                           timeout=30).status_code == 204
    removed = time.time()
    pub.join(3 * phase_s + 60)
    recv.join(3 * phase_s + 60)
    assert not pub.errors, pub.errors[:3]
    # Windows start a second after each change (Pulsar applies topic policies through its
    # system topic) and after the first bucket's burst.
    before_pub = pub.rate_between(t0 + 3.0, changed)
    after_pub = pub.rate_between(changed + 1.5, removed)
    before_disp = (before_end[1] - before_out[1]) / (before_end[0] - before_out[0])
    after_disp = (after_end[1] - after_out[1]) / (after_end[0] - after_out[0])
    # Removed: the rest of the backlog comes faster than any of the limits allowed (or all of it).
    remaining = 2500 - sum(1 for t in recv.times if t < removed)
    unlimited = sum(1 for t in recv.times if removed <= t < removed + 3.0)
    assert 30 <= before_pub <= 50, before_pub
    assert 95 <= after_pub <= 145, after_pub
    assert 30 <= before_disp <= 50, before_disp
    assert 95 <= after_disp <= 145, after_disp
    assert unlimited >= min(remaining, 600), (unlimited, remaining)


@pytest.mark.admin
def test_broker_wide_rates(broker, client, admin_url, namespace):
    """brokerPublisherThrottlingMaxMessageRate and dispatchThrottlingRateInMsg (dynamic
    settings) pace every topic of the broker together."""
    total = SETTLE_S + MEASURE_S
    base = f"persistent://{namespace}/b-{uuid.uuid4().hex[:6]}"
    disp_topic = base + "-disp"
    fill(client, disp_topic, 2000)
    cfg = f"{admin_url}/admin/v2/brokers/configuration"
    settings = {"brokerPublisherThrottlingMaxMessageRate": 100,
                "dispatchThrottlingRateInMsg": 80}
    try:
        for k, v in settings.items():
            assert requests.post(f"{cfg}/{k}/{v}", timeout=30).status_code in (200, 204)
        assert wait_for(lambda: all(
            requests.get(f"{cfg}/values", timeout=30).json().get(k) == str(v)
            for k, v in settings.items()), 20.0)
        # Two producers on two topics share the broker's 100/s.
        p1 = Publisher(broker.service_url, base + "-a", total)
        p2 = Publisher(broker.service_url, base + "-b", total)
        recv = Receiver(client, disp_topic, "s", total)
        for w in (p1, p2, recv):
            w.start()
        for w in (p1, p2, recv):
            w.join(total + 60)
    finally:
        for k in settings:
            requests.post(f"{cfg}/{k}/0", timeout=30)
    assert not p1.errors and not p2.errors
    start = max(p1.start_time, p2.start_time) + SETTLE_S
    published = p1.rate_between(start, start + MEASURE_S) + p2.rate_between(start,
                                                                            start + MEASURE_S)
    assert within(published, 100), published
    rstart = recv.start_time + SETTLE_S
    dispatched = recv.rate_between(rstart, rstart + MEASURE_S)
    assert within(dispatched, 80), dispatched


@pytest.mark.admin
def test_subscribe_rate_refuses_the_consumer_over_it(broker, admin_url, namespace):
    """subscribeRate: SUBSCRIBEs per consumer (client host, consumer name, consumer id) per
    period; the next one gets Pulsar's NotAllowedError."""
    topic = f"persistent://{namespace}/s-{uuid.uuid4().hex[:6]}"
    c = pulsar.Client(broker.service_url)
    c.create_producer(topic).close()
    c.close()
    set_topic_policy(admin_url, topic, "subscribeRate",
                     {"subscribeThrottlingRatePerConsumer": 2, "ratePeriodInSecond": 60})

    def subscribe(name):
        # A new client each time: its first consumer has id 0, so the identity repeats.
        c = pulsar.Client(broker.service_url, operation_timeout_seconds=5)
        try:
            c.subscribe(topic, "sub", consumer_name=name,
                        consumer_type=pulsar.ConsumerType.Shared).close()
        finally:
            c.close()

    subscribe("fixed")
    subscribe("fixed")
    with pytest.raises(pulsar.NotAllowedError):
        subscribe("fixed")
    subscribe("other")  # another consumer name: its own budget
    # Removed: at once no limit.
    assert requests.delete(f"{topic_url(admin_url, topic)}/subscribeRate",
                           timeout=30).status_code == 204
    assert wait_for(lambda: unset(requests.get(f"{topic_url(admin_url, topic)}/subscribeRate",
                                               timeout=30)), 20.0)
    subscribe("fixed")


@pytest.mark.admin
def test_rate_policy_rest_shapes(client, admin_url, namespace):
    """Set, get (Pulsar's JSON with its defaults filled in) and remove, topic and namespace
    level."""
    topic = f"persistent://{namespace}/r-{uuid.uuid4().hex[:6]}"
    client.create_producer(topic).close()
    tbase = topic_url(admin_url, topic)
    nbase = f"{admin_url}/admin/v2/namespaces/{namespace}"
    bodies = {
        "publishRate": ({"publishThrottlingRateInMsg": 10},
                        {"publishThrottlingRateInMsg": 10, "publishThrottlingRateInByte": -1}),
        "dispatchRate": ({"dispatchThrottlingRateInMsg": 20, "ratePeriodInSecond": 2},
                         {"dispatchThrottlingRateInMsg": 20, "dispatchThrottlingRateInByte": 0,
                          "relativeToPublishRate": False, "ratePeriodInSecond": 2}),
        "subscriptionDispatchRate": (
            {"dispatchThrottlingRateInByte": 3000, "ratePeriodInSecond": 1},
            {"dispatchThrottlingRateInMsg": 0, "dispatchThrottlingRateInByte": 3000,
             "relativeToPublishRate": False, "ratePeriodInSecond": 1}),
        "subscribeRate": ({"subscribeThrottlingRatePerConsumer": 4},
                          {"subscribeThrottlingRatePerConsumer": 4, "ratePeriodInSecond": 30}),
    }
    for name, (body, shown) in bodies.items():
        assert unset(requests.get(f"{nbase}/{name}", timeout=30)), name
        r = requests.post(f"{nbase}/{name}", json=body, timeout=30)
        assert r.status_code == 204, (name, r.text)
        assert requests.get(f"{nbase}/{name}", timeout=30).json() == shown, name
        assert unset(requests.get(f"{tbase}/{name}", timeout=30)), name
        set_topic_policy(admin_url, topic, name, body)
        assert requests.get(f"{tbase}/{name}", timeout=30).json() == shown, name
        assert requests.delete(f"{tbase}/{name}", timeout=30).status_code == 204
        assert wait_for(lambda name=name: unset(requests.get(f"{tbase}/{name}", timeout=30)),
                        20.0)
        assert requests.delete(f"{nbase}/{name}", timeout=30).status_code == 204
        assert unset(requests.get(f"{nbase}/{name}", timeout=30)), name
    # The namespace's policies carry them in Pulsar's per-cluster maps.
    set_ns_policy(admin_url, namespace, "publishRate", {"publishThrottlingRateInMsg": 7})
    policies = requests.get(nbase, timeout=30).json()
    assert list(policies["publishMaxMessageRate"].values()) == [
        {"publishThrottlingRateInMsg": 7, "publishThrottlingRateInByte": -1}]


@pytest.mark.admin
def test_rate_policy_empty_body_reads_back_zeros(admin_url, namespace):
    """A body without fields: the dispatch rates read back Jackson's 0 for every field (period
    included: Pulsar 4.2.4 keeps 0, which its limiters take as 1 s); publish and subscribe rates
    keep their classes' defaults (-1, period 30)."""
    nbase = f"{admin_url}/admin/v2/namespaces/{namespace}"
    zeros = {"dispatchThrottlingRateInMsg": 0, "dispatchThrottlingRateInByte": 0,
             "relativeToPublishRate": False, "ratePeriodInSecond": 0}
    shown = {
        "dispatchRate": zeros,
        "subscriptionDispatchRate": zeros,
        "replicatorDispatchRate": zeros,
        "publishRate": {"publishThrottlingRateInMsg": -1, "publishThrottlingRateInByte": -1},
        "subscribeRate": {"subscribeThrottlingRatePerConsumer": -1, "ratePeriodInSecond": 30},
    }
    for name, want in shown.items():
        set_ns_policy(admin_url, namespace, name, {})
        assert requests.get(f"{nbase}/{name}", timeout=30).json() == want, name
