"""Fixtures of the admin tests: a real `magnetar standalone` (tests/harness), an HTTP helper, the
official Python client, and fresh tenants/namespaces.

Run: MAGNETAR_BIN=<build>/src/app/magnetar .venv/bin/python -m pytest tests/admin
(magnetar-admin is taken from MAGNETAR_ADMIN_BIN, else <build>/tools/admin/magnetar-admin next to
the broker's build directory.)
"""

import os
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness.broker import BrokerEndpoint  # noqa: E402
from harness.fixtures import client, magnetar, session_broker  # noqa: E402, F401 (fixtures)


@pytest.fixture(scope="session")
def broker(request: pytest.FixtureRequest) -> Iterator[BrokerEndpoint]:
    yield from session_broker(request.config, "magnetar")


@pytest.fixture(scope="session")
def admin_url(broker: BrokerEndpoint) -> str:
    assert broker.admin_url
    return broker.admin_url


class Http:
    """requests.Session bound to the admin URL: http("GET", "/admin/v2/clusters")."""

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
def http(admin_url: str) -> Iterator[Http]:
    h = Http(admin_url)
    yield h
    h.session.close()


@pytest.fixture
def tenant(http: Http) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:8]}"
    r = http("PUT", f"/admin/v2/tenants/{name}", json={"allowedClusters": ["standalone"],
                                                         "adminRoles": []})
    assert r.status_code == 204, r.text
    yield name
    for ns in http("GET", f"/admin/v2/namespaces/{name}").json():
        http("DELETE", f"/admin/v2/namespaces/{ns}?force=true")
    http("DELETE", f"/admin/v2/tenants/{name}")


@pytest.fixture
def namespace(http: Http, tenant: str) -> str:
    ns = f"{tenant}/ns"
    r = http("PUT", f"/admin/v2/namespaces/{ns}")
    assert r.status_code == 204, r.text
    return ns
