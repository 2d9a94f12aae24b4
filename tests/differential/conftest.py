"""Fixtures of the differential suite: the broker under test, a client, unique topic names, the
admin API's admin_http, tenant and namespace (tests/harness/fixtures.py).

Choose the broker with one of:
  --broker=magnetar   start $MAGNETAR_BIN (default build/src/app/magnetar) on free ports (default)
  --broker=pulsar     start the reference Apache Pulsar via tools/pulsar-reference/
  --broker-url=pulsar://host:port [--admin-url=http://host:port]   use a running broker
The environment variables DIFF_BROKER, BROKER_URL and ADMIN_URL set the same defaults.
"""

import os
import sys
from collections.abc import Iterator

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness.broker import BrokerEndpoint  # noqa: E402
from harness.fixtures import (  # noqa: E402, F401 (fixtures)
    add_broker_options,
    admin_http,
    admin_url,
    client,
    namespace,
    session_broker,
    start_broker,
    tenant,
    topic,
)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_broker_options(parser, "differential")


@pytest.fixture(scope="session")
def broker(request: pytest.FixtureRequest) -> Iterator[BrokerEndpoint]:
    """The broker under test for the whole session."""
    yield from session_broker(request.config)


@pytest.fixture(scope="session")
def broker_kind(broker: BrokerEndpoint) -> str:
    return broker.kind
