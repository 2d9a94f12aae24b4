"""The transactions crash test (tests/crash/txn_crash.py) on BookKeeper: one `magnetar broker`
with transactions over this directory's ZooKeeper and 3 bookies (topics, the transaction log and
the pending-ack logs on the bookies), TXN_CRASH_KILLS (2) kill -9s, each followed by a restart on
the same ports; every transaction wholly committed or wholly aborted afterwards (pytest -s prints
the figures)."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crash"))
from txn_crash import run_test  # noqa: E402

CLUSTER = "bk-topics"  # the one tests/bookkeeper/test_topics.py initialises in the shared ZooKeeper
KILLS = int(os.environ.get("TXN_CRASH_KILLS", "2"))
SEED = int(os.environ.get("TXN_CRASH_SEED", "7"))


def test_transactions_survive_kill9_on_bookkeeper(bk_cluster):
    bk_cluster.start_bookies()
    report = run_test("cluster", KILLS, SEED, inputs=2000, bk_uri=bk_cluster.uri,
                      cluster=CLUSTER)
    print(json.dumps(report["figures"]), report["rounds"])
    assert report["violations"] == [], report["violations"]
    assert report["figures"]["committed"] > 0 and report["figures"]["messages_checked"] > 0
