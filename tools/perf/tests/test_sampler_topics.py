"""The sampler's topic stats: a topic the producers have not created yet (404) is asked for
again, and its stats are kept once it exists; a broker without the endpoint is not asked again."""
import http.server
import json
import threading
import time
from types import SimpleNamespace

import pytest

from magnetar_perf.sampler import Sampler

TOPIC = "persistent://public/default/iot-telemetry-0"


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the brokers' web servers

    def setup(self):
        super().setup()
        self.server.connections += 1

    def do_GET(self):  # noqa: N802 - http.server's name
        srv = self.server
        srv.requests += 1
        srv.paths.append(self.path)
        if srv.requests <= srv.fail_first:
            self.send_error(srv.fail_code)
            return
        body = json.dumps({"msgRateIn": 10.0, "msgRateOut": 20.0, "storageSize": 5,
                           "subscriptions": {"app": {"msgRateOut": 20.0, "msgBacklog": 3}}})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.requests = 0
    srv.connections = 0
    srv.paths = []
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _sampler(srv):
    broker = SimpleNamespace(web_url="http://127.0.0.1:%d" % srv.server_address[1])
    return Sampler(broker, [TOPIC])


def test_a_topic_not_created_yet_is_asked_for_again(server):
    server.fail_first, server.fail_code = 2, 404
    s = _sampler(server)
    for t in range(4):
        if s.topic_stats:
            s._sample_topics(float(t))
    assert s.topic_stats, "a 404 before the topic exists must not stop the sampling"
    assert server.requests == 4
    assert s.stats_ok == 2 and s.stats_note is None
    subs = [r for r in s.topic_rows if r["subscription"] == "app"]
    assert [r["t"] for r in subs] == [2.0, 3.0] and subs[0]["msgBacklog"] == 3


def test_a_broker_without_the_endpoint_is_not_asked_again(server):
    server.fail_first, server.fail_code = 100, 405
    s = _sampler(server)
    for t in range(3):
        if s.topic_stats:
            s._sample_topics(float(t))
    assert server.requests == 1 and not s.topic_stats
    assert "answered 405" in s.stats_note and s.topic_rows == []


def test_topic_stats_use_one_kept_alive_connection(server):
    server.fail_first = 0
    s = Sampler(SimpleNamespace(web_url="http://127.0.0.1:%d" % server.server_address[1]),
                [TOPIC, TOPIC + "-b", TOPIC + "-c"])
    for t in range(3):
        s._sample_topics(float(t))
    assert server.requests == 9 and s.stats_ok == 9
    assert server.connections == 1, "each GET opened a connection of its own"
    # without the producers' and consumers' lists (Pulsar's GetStatsOptions)
    assert server.paths[0] == ("/admin/v2/persistent/public/default/iot-telemetry-0/stats"
                               "?excludePublishers=true&excludeConsumers=true")


def test_a_dropped_connection_is_made_again(server):
    server.fail_first = 0
    s = _sampler(server)
    s._sample_topics(0.0)
    s._http.sock.close()  # the broker closed it (or a restart): the next sample reconnects
    s._sample_topics(1.0)
    s._sample_topics(2.0)
    assert s.stats_ok >= 2 and server.connections >= 2
    assert [r["t"] for r in s.topic_rows if r["subscription"] == "app"][-1] == 2.0


def test_topic_stats_are_spread_over_the_topic_stats_interval():
    topics = [TOPIC + "-%d" % i for i in range(5)]
    s = Sampler(SimpleNamespace(web_url="http://127.0.0.1:1"), topics, interval=1.0,
                topic_stats_interval=5.0)
    assert s.topic_stats_interval == 5.0
    calls = []
    s._sample_process = lambda now: None
    s._sample_topic = lambda topic, now: calls.append((topic, now)) or True
    # 5 topics every 0.25 s: one request every 0.05 s, while the process is sampled every 0.01 s
    s.interval = 0.01
    s.topic_stats_interval = 0.25
    s.start()
    time.sleep(0.5)
    s._stop.set()
    s._thread.join(timeout=5)
    # about 10 requests in 0.5 s (one per process sample would be about 50), in topic order
    assert 3 <= len(calls) <= 16
    assert [t for t, _ in calls] == [topics[i % 5] for i in range(len(calls))]
    # one at a time: the 5 requests of a round are not made together
    gaps = [b - a for (_, a), (_, b) in zip(calls, calls[1:])]
    assert sorted(gaps)[len(gaps) // 2] >= 0.02
    assert Sampler(SimpleNamespace(web_url=None), [], interval=2.0,
                   topic_stats_interval=0.5).topic_stats_interval == 2.0


def test_before_the_topics_exist_the_first_is_asked_for_every_interval():
    topics = [TOPIC + "-%d" % i for i in range(3)]
    s = Sampler(SimpleNamespace(web_url="http://127.0.0.1:1"), topics, interval=0.02,
                topic_stats_interval=10.0)
    asked = []

    def sample(topic, now):
        asked.append(topic)
        return False  # 404: not created yet

    s._sample_process = lambda now: None
    s._sample_topic = sample
    s.start()
    time.sleep(0.3)
    s._stop.set()
    s._thread.join(timeout=5)
    # every 0.02 s (not once per 10 s / 3 topics), and always the first topic
    assert len(asked) >= 4 and set(asked) == {topics[0]}
