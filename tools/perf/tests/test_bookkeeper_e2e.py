"""End to end on BookKeeper: iot-telemetry-max-rate-small on broker.kind magnetar-bk (ZooKeeper,
3 bookies and a cluster-mode `magnetar broker` started and stopped by the run) is valid and
reports the bookies' CPU apart from the broker's. 30-45 s on the 2-core machine, so not in
CI: MAGNETAR_PERF_BK_E2E=1 runs it (needs Java 17, the BookKeeper jars of
scripts/install-test-deps.sh, `magnetar` and `magnetar-perf-worker` built or MAGNETAR_BIN and
MAGNETAR_PERF_WORKER set)."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from magnetar_perf import summary

PERF = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "magnetar-perf")


@pytest.mark.skipif(os.environ.get("MAGNETAR_PERF_BK_E2E") != "1",
                    reason="long (30-45 s): MAGNETAR_PERF_BK_E2E=1 runs it")
def test_max_rate_small_is_valid_on_magnetar_bk(tmp_path):
    if shutil.which("java") is None:
        pytest.skip("java not installed (scripts/install-test-deps.sh)")
    out = str(tmp_path / "run")
    env = dict(os.environ, MAGNETAR_PERF_SMALL_MESSAGES="200000")
    p = subprocess.run([sys.executable, PERF, "run", "iot-telemetry-max-rate-small",
                        "--set", "broker.kind=magnetar-bk", "--output", out],
                       capture_output=True, text=True, timeout=600, env=env)
    with open(os.path.join(out, "summary.json")) as f:
        s = json.load(f)
    assert summary.check(s) == [], p.stderr[-3000:]
    assert s["broker"] == "magnetar-bk"
    assert s["bookies_cpu_s_per_million"] > 0  # the bookies did the storing
    with open(os.path.join(out, "broker", "broker.log"), errors="replace") as f:
        log = f.read()
    assert "topics on BookKeeper at zk://127.0.0.1:" in log and "(E=2 Qw=2 Qa=2" in log
    # Everything the run started is gone.
    for name in ("bookie-0", "bookie-1", "bookie-2"):
        assert not os.path.exists(os.path.join(out, "broker", "bookkeeper", name, "pid"))
    assert not os.path.exists(os.path.join(out, "broker", "bookkeeper", "zk", "zookeeper.pid"))
