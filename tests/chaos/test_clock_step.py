"""A broker whose wall clock is stepped back (the chaos suite's clockjump, through faultshim.c)
still rolls its ledgers over by entry count when no minimum rollover time is set, as Pulsar's
ManagedLedgerImpl.currentLedgerIsFull does (it checks the ledger's age only for a minimum above
0). Found by the chaos suite: a step back of 240 s held the current ledger open (22, then 25
entries with managedLedgerMaxEntriesPerLedger=5) until the clock passed its creation time."""

import os
import shutil
import sys
import tempfile

import faultshim
import pulsar
import pytest
import requests

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness.broker import MagnetarProcess  # noqa: E402

pytestmark = pytest.mark.skipif(not shutil.which("cc"), reason="no C compiler (cc)")


class ShimmedBroker(MagnetarProcess):
    """magnetar standalone with faultshim preloaded."""

    def __init__(self, settings, workdir, so, ctl):
        super().__init__(settings, workdir=workdir)
        self.so, self.ctl = so, ctl

    def command(self, port=0, extra=()):
        return ["env", f"LD_PRELOAD={self.so}", f"MAGNETAR_FAULTSHIM_CTL={self.ctl}",
                *super().command(port, extra)]


def test_entry_count_rollover_survives_a_wall_clock_step_back():
    workdir = tempfile.mkdtemp(prefix="magnetar-clock-step-")
    so = faultshim.build(workdir)
    ctl = faultshim.Control(os.path.join(workdir, "ctl"))
    broker = ShimmedBroker(["managedLedgerMaxEntriesPerLedger=5",
                            "managedLedgerMinLedgerRolloverTimeMinutes=0"], workdir, so,
                           ctl.path)
    ep = broker.start(timeout_s=60)
    client = pulsar.Client(ep.service_url, operation_timeout_seconds=30)
    try:
        topic = "persistent://public/default/clock-step"
        producer = client.create_producer(topic, batching_enabled=False)

        def current() -> tuple[int, int]:
            """(current ledger id, its entries); consumed ledgers are trimmed (no cursor)."""
            r = requests.get(f"{ep.admin_url}/admin/v2/persistent/public/default/clock-step"
                             "/internalStats", timeout=30)
            assert r.status_code == 200, r.text
            s = r.json()
            return s["ledgers"][-1]["ledgerId"], s["currentLedgerEntries"]

        for _ in range(7):
            producer.send(b"before")
        before = current()
        ctl.set_clock_offset(-240)
        for _ in range(20):
            producer.send(b"stepped back")
        after = current()
        # 20 sends at 5 per ledger: at least 3 rollovers, the current ledger within its limit.
        assert after[0] >= before[0] + 3 and after[1] <= 5, (before, after)
    finally:
        ctl.set_clock_offset(0)
        client.close()
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
