"""pytest fixtures shared by tests/differential, tests/admin and tests/integration; each suite's
conftest.py imports the ones it uses (and defines its session `broker` with session_broker()).

  client        an official Python client on `broker` (closed after the test)
  topic         a fresh persistent topic name in public/default, unique per test
  admin_url     `broker`'s admin URL (skips when it has none)
  start_broker  start_broker([k=v, ...]) -> BrokerEndpoint: a broker of the --broker kind
                (magnetar where the suite has no such option), stopped after the test
  magnetar      magnetar([k=v, ...], **MagnetarProcess args) -> a started MagnetarProcess,
                closed after the test (restart/kill it in between)
  admin_http    an AdminHttp on `broker`'s admin URL: admin_http("GET", "/admin/v2/clusters")
  tenant        a fresh tenant (allowed on `standalone`, admin role role-a), deleted with its
                namespaces after the test
  namespace     TENANT/ns of that tenant, created (a module may override it)
  restartable   restartable([k=v, ...]) -> restartable_magnetar() on a directory under tmp_path,
                not started; closed after the test
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pulsar
import pytest
import requests

from harness.broker import (
    BrokerEndpoint,
    MagnetarProcess,
    PulsarReferenceProcess,
    broker_process,
    restartable_magnetar,
)
from harness.util import eventually

T = TypeVar("T")
P = TypeVar("P", MagnetarProcess, PulsarReferenceProcess)
R = TypeVar("R")


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


def own_broker(config: pytest.Config, settings: list[str], wrap: Callable[[BrokerEndpoint], T],
               list_public: Callable[[T], requests.Response], skip_reason: str,
               workdir: str | None = None) -> Iterator[T]:
    """The body of a module fixture for a broker with settings of its own (authentication, TLS):
    skips with --broker-url (skip_reason), starts a broker of the --broker kind, yields
    wrap(endpoint) once list_public(wrapped) (GET /admin/v2/namespaces/public as a super-user)
    answers 200 with public/default (within 120 s); then stops it and removes `workdir`."""
    try:
        if config.getoption("--broker-url", None):
            pytest.skip(skip_reason)
        proc = broker_process(config.getoption("--broker", "magnetar"), settings)
        try:
            env = wrap(proc.start())

            def ready() -> None:
                r = list_public(env)
                assert r.status_code == 200 and "public/default" in r.json(), r.text
            eventually(ready, 120.0)
            yield env
        finally:
            proc.close()
    finally:
        if workdir:
            shutil.rmtree(workdir, ignore_errors=True)


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


class AdminHttp:
    """A requests.Session bound to an admin URL: http("GET", "/admin/v2/clusters"). A json or
    data (raw text) body goes with Content-Type application/json unless `headers` name one."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.session = requests.Session()

    def __call__(self, method: str, path: str, json: Any = None, data: Any = None,
                 headers: dict[str, str] | None = None) -> requests.Response:
        h = dict(headers or {})
        if json is not None or data is not None:
            h.setdefault("Content-Type", "application/json")
        return self.session.request(method, self.base + path, json=json, data=data, headers=h,
                                    timeout=30)


@pytest.fixture
def admin_http(admin_url: str) -> Iterator[AdminHttp]:
    http = AdminHttp(admin_url)
    yield http
    http.session.close()


@pytest.fixture
def tenant(admin_http: AdminHttp) -> Iterator[str]:
    """t-<random>, allowed on the `standalone` cluster with admin role role-a; after the test its
    namespaces are force-deleted, then it (best effort)."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    r = admin_http("PUT", f"/admin/v2/tenants/{name}",
                   json={"allowedClusters": ["standalone"], "adminRoles": ["role-a"]})
    assert r.status_code == 204, r.text
    yield name
    for ns in admin_http("GET", f"/admin/v2/namespaces/{name}").json():
        admin_http("DELETE", f"/admin/v2/namespaces/{ns}?force=true")
    admin_http("DELETE", f"/admin/v2/tenants/{name}")


@pytest.fixture
def namespace(admin_http: AdminHttp, tenant: str) -> str:
    """TENANT/ns, created with an empty body (deleted with the tenant)."""
    ns = f"{tenant}/ns"
    r = admin_http("PUT", f"/admin/v2/namespaces/{ns}")
    assert r.status_code == 204, r.text
    return ns


def closed_after(make: Callable[..., P], then: Callable[[P], R]) -> Iterator[Callable[..., R]]:
    """The body of a factory fixture: yields f(*args) = then(make(*args)); everything made is
    closed after the test (also when `then`, e.g. its start, failed)."""
    made: list[P] = []

    def call(*args: Any, **kwargs: Any) -> R:
        made.append(make(*args, **kwargs))
        return then(made[-1])
    yield call
    for obj in made:
        obj.close()


def _serving(proc: MagnetarProcess | PulsarReferenceProcess) -> BrokerEndpoint:
    endpoint = proc.start()
    assert endpoint.admin_url
    wait_namespace(endpoint.admin_url)
    return endpoint


def _started(proc: MagnetarProcess) -> MagnetarProcess:
    proc.start()
    return proc


@pytest.fixture
def start_broker(request: pytest.FixtureRequest
                 ) -> Iterator[Callable[[list[str]], BrokerEndpoint]]:
    """start_broker([k=v, ...]) starts a broker of the chosen kind (--broker) with extra settings
    and returns its BrokerEndpoint; it is stopped after the test. Skips with --broker-url. The
    session's broker is not started for it."""
    if request.config.getoption("--broker-url", None):
        pytest.skip("needs a broker this suite starts (not --broker-url)")
    kind = request.config.getoption("--broker", "magnetar")
    yield from closed_after(lambda settings: broker_process(kind, settings), _serving)


@pytest.fixture
def magnetar() -> Iterator[Callable[..., MagnetarProcess]]:
    """magnetar(settings, **kwargs): a started MagnetarProcess(settings, **kwargs), closed (and
    checked for sanitizer reports) after the test."""
    yield from closed_after(MagnetarProcess, _started)


@pytest.fixture
def restartable(tmp_path: Path) -> Iterator[Callable[..., MagnetarProcess]]:
    """restartable(settings): restartable_magnetar(dir, settings) on a fresh directory under the
    test's tmp_path, not started (call start(), kill() and start() again); closed after the
    test."""
    yield from closed_after(
        lambda settings=(): restartable_magnetar(tempfile.mkdtemp(dir=tmp_path), settings),
        lambda proc: proc)
