"""Fixtures of the admin tests: a real `magnetar standalone` (tests/differential/brokers.py), an
HTTP helper, the official Python client, and fresh tenants/namespaces.

Run: MAGNETAR_BIN=<build>/src/app/magnetar .venv/bin/python -m pytest tests/admin
(magnetar-admin is taken from MAGNETAR_ADMIN_BIN, else <build>/tools/admin/magnetar-admin next to
the broker's build directory.)
"""

import os
import sys
import uuid

import pulsar
import pytest
import requests

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "differential"))
from brokers import MagnetarProcess  # noqa: E402


@pytest.fixture(scope="session")
def broker():
    proc = MagnetarProcess()
    endpoint = proc.start()
    try:
        yield endpoint
    finally:
        proc.stop()


@pytest.fixture(scope="session")
def admin_url(broker):
    return broker.admin_url


class Http:
    """requests.Session bound to the admin URL: http("GET", "/admin/v2/clusters")."""

    def __init__(self, base):
        self.base = base
        self.session = requests.Session()

    def __call__(self, method, path, json=None, data=None, headers=None):
        h = dict(headers or {})
        if json is not None or data is not None:
            h.setdefault("Content-Type", "application/json")
        return self.session.request(method, self.base + path, json=json, data=data, headers=h,
                                    timeout=30)


@pytest.fixture
def http(admin_url):
    h = Http(admin_url)
    yield h
    h.session.close()


@pytest.fixture
def client(broker):
    c = pulsar.Client(broker.service_url, operation_timeout_seconds=15,
                      logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    yield c
    c.close()


@pytest.fixture
def tenant(http):
    name = f"t-{uuid.uuid4().hex[:8]}"
    r = http("PUT", f"/admin/v2/tenants/{name}", json={"allowedClusters": ["standalone"],
                                                         "adminRoles": []})
    assert r.status_code == 204, r.text
    yield name
    for ns in http("GET", f"/admin/v2/namespaces/{name}").json():
        http("DELETE", f"/admin/v2/namespaces/{ns}?force=true")
    http("DELETE", f"/admin/v2/tenants/{name}")


@pytest.fixture
def namespace(http, tenant):
    ns = f"{tenant}/ns"
    r = http("PUT", f"/admin/v2/namespaces/{ns}")
    assert r.status_code == 204, r.text
    return ns

