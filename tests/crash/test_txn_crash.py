"""The short form of the transactions crash test (txn_crash.py): `magnetar standalone` with
transactions, TXN_CRASH_KILLS (3) kill -9s at random moments or right after an END_TXN, seed
TXN_CRASH_SEED (7); every transaction wholly committed or wholly aborted afterwards. The BookKeeper
form is tests/bookkeeper/test_txn_crash.py. The figures are printed (pytest -s)."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from txn_crash import run_test  # noqa: E402

KILLS = int(os.environ.get("TXN_CRASH_KILLS", "3"))
SEED = int(os.environ.get("TXN_CRASH_SEED", "7"))


def test_transactions_survive_kill9_standalone():
    report = run_test("standalone", KILLS, SEED, inputs=2000)
    print(json.dumps(report["figures"]), report["rounds"])
    assert report["violations"] == [], report["violations"]
    fig = report["figures"]
    assert fig["committed"] > 0 and fig["aborted"] > 0 and fig["messages_checked"] > 0
