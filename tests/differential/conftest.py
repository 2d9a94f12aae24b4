"""Fixtures of the differential suite: the broker under test, a client, unique topic names.

Choose the broker with one of:
  --broker=magnetar   start $MAGNETAR_BIN (default build/src/app/magnetar) on free ports (default)
  --broker=pulsar     start the reference Apache Pulsar via tools/pulsar-reference/
  --broker-url=pulsar://host:port [--admin-url=http://host:port]   use a running broker
The environment variables DIFF_BROKER, BROKER_URL and ADMIN_URL set the same defaults.
"""

import os
import re
import uuid

import pulsar
import pytest

from brokers import BrokerEndpoint, MagnetarProcess, PulsarReferenceProcess


def pytest_addoption(parser):
    group = parser.getgroup("differential")
    group.addoption("--broker", choices=["magnetar", "pulsar"],
                    default=os.environ.get("DIFF_BROKER", "magnetar"),
                    help="broker to start for the session (ignored with --broker-url)")
    group.addoption("--broker-url", default=os.environ.get("BROKER_URL"),
                    help="pulsar:// URL of an already running broker")
    group.addoption("--admin-url", default=os.environ.get("ADMIN_URL"),
                    help="http:// URL of that broker's admin API (admin tests skip without it)")


@pytest.fixture(scope="session")
def broker(request):
    """The broker under test for the whole session (BrokerEndpoint)."""
    url = request.config.getoption("--broker-url")
    if url:
        yield BrokerEndpoint("external", url, request.config.getoption("--admin-url"))
        return
    kind = request.config.getoption("--broker")
    proc = MagnetarProcess() if kind == "magnetar" else PulsarReferenceProcess()
    endpoint = proc.start()
    try:
        yield endpoint
    finally:
        proc.stop()


@pytest.fixture(scope="session")
def broker_kind(broker):
    return broker.kind


@pytest.fixture
def client(broker):
    c = pulsar.Client(broker.service_url, operation_timeout_seconds=15,
                      logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    yield c
    c.close()


@pytest.fixture
def topic(request):
    """A fresh persistent topic name in public/default, unique per test."""
    name = re.sub(r"[^A-Za-z0-9_-]", "-", request.node.name)[:60]
    return f"persistent://public/default/diff-{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def admin_url(broker):
    if not broker.admin_url:
        pytest.skip("no admin URL for this broker (pass --admin-url)")
    return broker.admin_url


@pytest.fixture
def start_broker(request):
    """Starts a broker of the chosen kind (--broker) with extra settings:
    start_broker([k=v, ...]) returns its BrokerEndpoint; it is stopped after the test. Skips
    with --broker-url. The session's broker is not started for it."""
    if request.config.getoption("--broker-url"):
        pytest.skip("needs a broker this suite starts (not --broker-url)")
    kind = request.config.getoption("--broker")
    started = []

    def start(settings):
        proc = (MagnetarProcess(extra_settings=settings) if kind == "magnetar"
                else PulsarReferenceProcess(extra_settings=settings))
        endpoint = proc.start()
        started.append(proc)
        # Pulsar standalone is healthy before it has created public/default: wait for it.
        import time
        import requests
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                r = requests.get(f"{endpoint.admin_url}/admin/v2/namespaces/public", timeout=10)
                if r.status_code == 200 and "public/default" in r.json():
                    break
            except requests.RequestException:
                pass
            time.sleep(0.5)
        return endpoint
    yield start
    for proc in started:
        proc.stop()
