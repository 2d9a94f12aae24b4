"""Fixtures of the admin tests: a real `magnetar standalone` (tests/harness), an HTTP helper, the
official Python client, and fresh tenants/namespaces.

Run: MAGNETAR_BIN=<build>/src/app/magnetar .venv/bin/python -m pytest tests/admin
(magnetar-admin is taken from MAGNETAR_ADMIN_BIN, else <build>/tools/admin/magnetar-admin next to
the broker's build directory.)
"""

import os
import sys
from collections.abc import Iterator

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness.broker import BrokerEndpoint  # noqa: E402
from harness.fixtures import (  # noqa: E402, F401 (fixtures)
    AdminHttp,
    admin_http,
    admin_url,
    client,
    magnetar,
    namespace,
    session_broker,
    tenant,
)


@pytest.fixture(scope="session")
def broker(request: pytest.FixtureRequest) -> Iterator[BrokerEndpoint]:
    yield from session_broker(request.config, "magnetar")


@pytest.fixture
def http(admin_http: AdminHttp) -> AdminHttp:  # noqa: F811 (the imported fixture)
    """The harness's admin_http (an HTTP session on the broker's admin URL), as these tests name
    it; tenant and namespace are the harness's too."""
    return admin_http
