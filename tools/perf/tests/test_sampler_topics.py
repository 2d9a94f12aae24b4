"""The sampler's topic stats: a topic the producers have not created yet (404) is asked for
again, and its stats are kept once it exists; a broker without the endpoint is not asked again."""
import http.server
import json
import threading
from types import SimpleNamespace

import pytest

from magnetar_perf.sampler import Sampler

TOPIC = "persistent://public/default/iot-telemetry-0"


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        srv = self.server
        srv.requests += 1
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
