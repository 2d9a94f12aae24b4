"""summary.json: built from worker results and samples, and checked."""
import copy

from magnetar_perf import procstat, summary
from magnetar_perf import scenario as scen


class FakeSampler:
    def __init__(self):
        self.snapshots = {
            "measured_start": {"t": 100.0, "cpu_s": 10.0, "machine_busy_s": 1000.0,
                               "worker_cpu_s": 5.0,
                               "threads": {1: ("pulsar-io-0", 100), 2: ("ml-worker-0", 50)}},
            "measured_end": {"t": 104.0, "cpu_s": 12.0, "machine_busy_s": 1007.0,
                             "worker_cpu_s": 6.0,
                             "threads": {1: ("pulsar-io-0", 100 + 2 * procstat.CLK_TCK),
                                         2: ("ml-worker-0", 50 + procstat.CLK_TCK),
                                         3: ("journal", procstat.CLK_TCK // 2)}},
        }
        self.peak_hwm_kb = 204800
        self.stats_note = None


class FakeBroker:
    pid = 1234


LAT = {"p50": 1.0, "p90": 2.0, "p99": 3.0, "p999": 4.0, "max": 5.0, "mean": 1.2, "count": 10}


def worker_result(**over):
    w = {"errors": [], "measured_messages": 1000000, "warmup_messages": 100,
         "published_msgs_per_s": 250000.0, "delivered_msgs_per_s": 240000.0, "drain_s": 0.1,
         "loadgen_cpu_s": 3.0, "loadgen_cpu_s_per_million": 3.0, "publish_latency_ms": LAT,
         "e2e_latency_ms": LAT, "connect_s": 0.5, "send_errors": 0,
         "applications": [{"name": "iot-application-0", "join_s": 0, "unique": 1000100,
                           "duplicates": 0, "ordering_violations": 0, "invalid": 0,
                           "missing": 0, "catch_up_s": None, "e2e_latency_ms": LAT}]}
    w.update(over)
    return w


def build(worker, exit_code=0, problems=()):
    sc = scen.resolve("iot-telemetry-max-rate-small", env={})
    return summary.build(sc, worker, FakeSampler(), FakeBroker(), exit_code, list(problems))


def test_valid_summary_has_every_measure():
    s = build(worker_result())
    assert summary.check(s) == []
    assert s["valid"] is True
    assert s["broker_cpu_s_per_million"] == 2.0          # 2 CPU s over 1M messages
    assert s["broker_cpu_pct"] == 50.0                   # 2 s over 4 s
    assert s["broker_peak_rss_mb"] == 200.0
    assert s["other_processes_cpu_pct"] == 100.0  # 7 s busy - 2 broker - 1 worker over 4 s
    assert s["threads"] == {"pulsar-io-0": 50.0, "ml-worker-0": 25.0, "journal": 12.5}
    assert set(s["publish_latency_ms"]) == set(summary.PERCENTILES)
    for k in summary.REQUIRED:
        assert k in s


def test_worker_errors_make_the_run_invalid_and_check_says_so():
    s = build(worker_result(errors=["iot-application-0: 3 ordering violations"]))
    assert s["valid"] is False
    assert s["invalid_reasons"] == ["iot-application-0: 3 ordering violations"]
    problems = summary.check(s)
    assert any("invalid" in p for p in problems)
    assert summary.check(s, require_valid=False) == []


def test_missing_worker_results_and_launcher_problems():
    s = build(None, exit_code=2, problems=["broker exited"])
    assert not s["valid"]
    assert "broker exited" in s["invalid_reasons"]
    assert any("no results" in r for r in s["invalid_reasons"])


def test_check_finds_missing_and_broken_measures():
    good = build(worker_result())
    s = copy.deepcopy(good)
    del s["threads"]
    assert summary.check(s) == ["missing key threads"]
    s = copy.deepcopy(good)
    s["e2e_latency_ms"]["p99"] = None
    assert any("e2e_latency_ms.p99" in p for p in summary.check(s))
    s = copy.deepcopy(good)
    s["publish_latency_ms"]["p50"] = 10.0  # above p90
    assert any("not increasing" in p for p in summary.check(s))
    s = copy.deepcopy(good)
    s["applications"][0]["join_s"] = 20
    assert any("catch_up_s" in p for p in summary.check(s))
    s = copy.deepcopy(good)
    s["broker_cpu_s_per_million"] = 0
    assert any("broker_cpu_s_per_million is 0" in p for p in summary.check(s))


def test_measure_paths():
    s = build(worker_result())
    assert summary.measure(s, "e2e_latency_ms.p99") == 3.0
    assert summary.measure(s, "nope.p99") is None
    assert summary.measure(s, "valid") is None  # bools are not measures
