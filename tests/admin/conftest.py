"""Fixtures of the admin tests: a real `magnetar standalone` (tests/harness), an HTTP helper, the
official Python client, and fresh tenants/namespaces.

Run: MAGNETAR_BIN=<build>/src/app/magnetar .venv/bin/python -m pytest tests/admin
(magnetar-admin is taken from MAGNETAR_ADMIN_BIN, else <build>/tools/admin/magnetar-admin next to
the broker's build directory.)
"""

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness.broker import BrokerEndpoint, magnetar_bin  # noqa: E402
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


def admin_binary() -> str:
    """$MAGNETAR_ADMIN_BIN, else <build>/tools/admin/magnetar-admin beside the broker's build."""
    explicit = os.environ.get("MAGNETAR_ADMIN_BIN")
    if explicit:
        return explicit
    broker_bin = magnetar_bin()
    build = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(broker_bin))))
    return os.path.join(build, "tools", "admin", "magnetar-admin")


@pytest.fixture(scope="module")
def cli(broker: BrokerEndpoint) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Runs magnetar-admin against the broker: cli(*args, expect=0, url=None) asserts the exit
    status and returns the CompletedProcess; cli.json(*args) parses its stdout."""
    binary = admin_binary()
    if not os.access(binary, os.X_OK):
        pytest.skip(f"magnetar-admin not built at {binary} (set MAGNETAR_ADMIN_BIN)")

    def run(*args: str, expect: int = 0, url: str | None = None,
            ) -> subprocess.CompletedProcess[str]:
        res = subprocess.run([binary, "--admin-url", url or broker.admin_url, *args],
                             capture_output=True, text=True, timeout=60)
        assert res.returncode == expect, (args, res.returncode, res.stdout, res.stderr)
        return res

    def run_json(*args: str) -> Any:
        return json.loads(run(*args).stdout)

    run.json = run_json  # type: ignore[attr-defined]
    return run
