"""pytest fixtures shared by tests/differential, tests/admin and tests/integration; each suite's
conftest.py imports the ones it uses (and defines its session `broker` with session_broker()).

  client        an official Python client on `broker` (closed after the test)
  topic         a fresh persistent topic name in public/default, unique per test
  admin_url     `broker`'s admin URL (skips when it has none)
  start_broker  start_broker([k=v, ...]) -> BrokerEndpoint: a broker of the --broker kind
                (magnetar where the suite has no such option), stopped after the test
  magnetar      magnetar([k=v, ...], **MagnetarProcess args) -> a started MagnetarProcess,
                closed after the test (restart/kill it in between)
"""

from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Callable, Iterator

import pulsar
import pytest
import requests

from harness.broker import BrokerEndpoint, MagnetarProcess, PulsarReferenceProcess, broker_process


def add_broker_options(parser: pytest.Parser, group_name: str) -> None:
    """--broker, --broker-url and --admin-url (defaults from DIFF_BROKER, BROKER_URL, ADMIN_URL)."""
    group = parser.getgroup(group_name)
    group.addoption("--broker", choices=["magnetar", "pulsar"],
                    default=os.environ.get("DIFF_BROKER", "magnetar"),
                    help="broker to start for the session (ignored with --broker-url)")
    group.addoption("--broker-url", default=os.environ.get("BROKER_URL"),
                    help="pulsar:// URL of an already running broker")
    group.addoption("--admin-url", default=os.environ.get("ADMIN_URL"),
                    help="http:// URL of that broker's admin API (admin tests skip without it)")


def session_broker(config: pytest.Config, kind: str | None = None) -> Iterator[BrokerEndpoint]:
    """The body of a session `broker` fixture: the --broker-url one when given, else a started
    broker of `kind` (default: the --broker option, else magnetar), stopped at the end."""
    url = config.getoption("--broker-url", None)
    if url:
        yield BrokerEndpoint("external", url, config.getoption("--admin-url", None))
        return
    proc = broker_process(kind or config.getoption("--broker", "magnetar"))
    endpoint = proc.start()
    try:
        yield endpoint
    finally:
        proc.close()


def wait_namespace(admin_url: str, namespace: str = "public/default",
                   timeout_s: float = 120.0) -> bool:
    """Waits until the tenant's namespace list holds `namespace` (Pulsar standalone is healthy
    before it has created public/default); False after timeout_s."""
    tenant = namespace.split("/")[0]
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            r = requests.get(f"{admin_url}/admin/v2/namespaces/{tenant}", timeout=10)
            if r.status_code == 200 and namespace in r.json():
                return True
        except requests.RequestException:
            pass
        time.sleep(0.5)
    return False


@pytest.fixture
def client(broker: BrokerEndpoint) -> Iterator[pulsar.Client]:
    c = pulsar.Client(broker.service_url, operation_timeout_seconds=15,
                      logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    yield c
    c.close()


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A fresh persistent topic name in public/default, unique per test."""
    name = re.sub(r"[^A-Za-z0-9_-]", "-", request.node.name)[:60]
    return f"persistent://public/default/diff-{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def admin_url(broker: BrokerEndpoint) -> str:
    if not broker.admin_url:
        pytest.skip("no admin URL for this broker (pass --admin-url)")
    return broker.admin_url


@pytest.fixture
def start_broker(request: pytest.FixtureRequest
                 ) -> Iterator[Callable[[list[str]], BrokerEndpoint]]:
    """start_broker([k=v, ...]) starts a broker of the chosen kind (--broker) with extra settings
    and returns its BrokerEndpoint; it is stopped after the test. Skips with --broker-url. The
    session's broker is not started for it."""
    if request.config.getoption("--broker-url", None):
        pytest.skip("needs a broker this suite starts (not --broker-url)")
    kind = request.config.getoption("--broker", "magnetar")
    started: list[MagnetarProcess | PulsarReferenceProcess] = []

    def start(settings: list[str]) -> BrokerEndpoint:
        proc = broker_process(kind, settings)
        started.append(proc)
        endpoint = proc.start()
        assert endpoint.admin_url
        wait_namespace(endpoint.admin_url)
        return endpoint
    yield start
    for proc in started:
        proc.close()


@pytest.fixture
def magnetar() -> Iterator[Callable[..., MagnetarProcess]]:
    """magnetar(settings, **kwargs): a started MagnetarProcess(settings, **kwargs), closed (and
    checked for sanitizer reports) after the test."""
    started: list[MagnetarProcess] = []

    def start(settings: list[str] | tuple[str, ...] = (), **kwargs: object) -> MagnetarProcess:
        proc = MagnetarProcess(settings, **kwargs)  # type: ignore[arg-type]
        started.append(proc)
        proc.start()
        return proc
    yield start
    for proc in started:
        proc.close()
