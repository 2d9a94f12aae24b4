"""A browser page (tests/differential/browser/ws_roundtrip.html, served by the test over HTTP)
produces and consumes through Pulsar's WebSocket API in headless Chromium (Debian's `chromium`
package), driven over the DevTools protocol with websocket-client: the browser's own WebSocket
and base64 carry payload bytes, properties and key both ways; a Python reader then checks what
the browser published on the wire. Skipped when no chromium binary is installed
(`bash scripts/install-test-deps.sh` installs it).
"""

import base64
import functools
import http.server
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import uuid

import pytest
import requests

import websocket
from harness.broker import broker_process
from harness.fixtures import wait_namespace

PAGE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "browser")
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which(
    "chromium-browser")

pytestmark = pytest.mark.skipif(
    not CHROMIUM, reason="no chromium binary (Debian package `chromium`; set $CHROMIUM)")

# Every byte value, a UTF-8 text, an empty payload: the browser's btoa/atob must carry them all.
MESSAGES = [
    {"bytes": list(range(256)), "properties": {"device": "browser", "n": "0"}, "key": "k0"},
    {"bytes": list("grüße, 世界".encode()), "properties": {"n": "1"}, "key": "clé"},
    {"bytes": [], "properties": {}, "key": "k2"},
]


@pytest.fixture(scope="module")
def ws_broker(request):
    if request.config.getoption("--broker-url", None):
        pytest.skip("needs a broker started with webSocketServiceEnabled=true")
    proc = broker_process(request.config.getoption("--broker", "magnetar"),
                          ["webSocketServiceEnabled=true"])
    endpoint = proc.start()
    try:
        assert wait_namespace(endpoint.admin_url), "public/default did not appear"
        yield endpoint
    finally:
        proc.close()


@pytest.fixture(scope="module")
def page_url():
    """The page's directory served on a free loopback port."""
    handler = functools.partial(QuietHandler, directory=PAGE_DIR)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/ws_roundtrip.html"
    finally:
        server.shutdown()
        server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class DevTools:
    """One page of a headless Chromium, driven over the DevTools protocol."""

    def __init__(self, url: str):
        self.dir = tempfile.mkdtemp(prefix="magnetar-chromium-")
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-extensions", "--remote-debugging-port=0", f"--user-data-dir={self.dir}",
             url], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.ws = websocket.create_connection(self._page_socket(url), timeout=20,
                                              suppress_origin=True)
        self.next_id = 0

    def _page_socket(self, url: str) -> str:
        port_file = os.path.join(self.dir, "DevToolsActivePort")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"chromium exited with {self.proc.returncode}"
            if os.path.exists(port_file) and open(port_file).read().count("\n") >= 1:
                port = open(port_file).read().split("\n")[0]
                pages = requests.get(f"http://127.0.0.1:{port}/json/list", timeout=5).json()
                for p in pages:
                    if p.get("type") == "page" and p.get("url") == url:
                        return p["webSocketDebuggerUrl"]
            time.sleep(0.1)
        raise AssertionError("chromium's DevTools page did not appear within 20 s")

    def call(self, method: str, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == self.next_id:
                assert "error" not in reply, reply
                return reply["result"]

    def evaluate(self, expression: str):
        """The value of `expression` (a promise is awaited); a thrown error fails the test."""
        result = self.call("Runtime.evaluate", expression=expression, awaitPromise=True,
                           returnByValue=True)
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"].get("value")

    def close(self):
        self.ws.close()
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def browser(page_url):
    tools = DevTools(page_url)
    try:
        # Until the page (not the initial about:blank) has run its script.
        deadline = time.monotonic() + 20
        while tools.evaluate("typeof roundTrip") != "function":
            assert time.monotonic() < deadline, "the page did not load"
            time.sleep(0.1)
        yield tools
    finally:
        tools.close()


def test_browser_produces_and_consumes(ws_broker, browser):
    base = ws_broker.admin_url.replace("http://", "ws://")
    topic = f"persistent/public/default/ws-browser-{uuid.uuid4().hex[:8]}"
    args = ", ".join(json.dumps(a) for a in (base, topic, "browser-sub", MESSAGES))
    seen = browser.evaluate(f"roundTrip({args})")

    assert "HeadlessChrome" in seen["userAgent"] or "Chrome" in seen["userAgent"]
    acks = seen["acks"]
    assert [a["result"] for a in acks] == ["ok"] * len(MESSAGES), acks
    assert [a["context"] for a in acks] == [f"browser-{i}" for i in range(len(MESSAGES))]
    got = seen["received"]
    assert [m["messageId"] for m in got] == [a["messageId"] for a in acks]
    for want, m in zip(MESSAGES, got):
        assert m["bytes"] == want["bytes"]
        assert m["properties"] == want["properties"]
        assert m["key"] == want["key"]

    # What the browser published, read back by a non-browser client.
    reader = websocket.create_connection(f"{base}/ws/v2/reader/{topic}?messageId=earliest",
                                         timeout=20)
    try:
        for want in MESSAGES:
            m = json.loads(reader.recv())
            assert base64.b64decode(m["payload"]) == bytes(want["bytes"])
            assert m.get("properties", {}) == want["properties"] and m["key"] == want["key"]
    finally:
        reader.close()
