"""Our C++ client's transactions (src/client/transaction.h) against the broker's coordinator,
transaction buffer and pending acks: src/client/tests/client_txn_integration_test (commit and
abort visibility, a partitioned topic, acks taking effect at commit only, a conflicting ack, a
timed-out transaction) run on a `magnetar standalone` with transactionCoordinatorEnabled=true,
which then stops cleanly (a subscription's pending-ack log closed on its own executor)."""

from __future__ import annotations

import os
import subprocess

import pytest

from harness.broker import magnetar_bin
from hostile_wire import HostileBroker


def integration_binary() -> str:
    build = os.path.dirname(os.path.dirname(os.path.dirname(magnetar_bin())))
    return os.path.join(build, "src", "client", "client_txn_integration_test")


def test_cpp_client_transactions_pass_on_the_broker():
    exe = integration_binary()
    if not os.path.exists(exe):
        pytest.skip(f"{exe} not built (MAGNETAR_BUILD_TESTS off or a partial build)")
    with HostileBroker(["transactionCoordinatorEnabled=true"]) as b:
        ep = b.start()
        env = dict(os.environ, BROKER_URL=ep.service_url)
        res = subprocess.run([exe, "--gtest_brief=1"], env=env, capture_output=True, text=True,
                             timeout=240)
        assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
        assert "6 tests" in res.stdout and "PASSED" in res.stdout, res.stdout[-2000:]
