"""Issue 23's additions: the storm's analysis and REST calls, the memory bound, the sweep's
recommendation, the seed table's values and rows, and the scenario files."""
import glob
import http.server
import os
import threading
import time

import pytest

from magnetar_perf import recommend, seedtable, storm, summary
from magnetar_perf import scenario as scen


def timeline(*parts):
    """parts: (seconds, receipts per 10 ms)."""
    out = []
    for seconds, per_bucket in parts:
        out += [per_bucket] * int(round(seconds * 100))
    return out


def test_recovery_measures_the_dip_and_the_return():
    t = timeline((5, 100), (1.5, 0), (0.5, 300), (3, 100))
    r = storm.recovery(t, 10, 5.0)
    assert r["dipped"] is True
    assert r["pre_rate"] == pytest.approx(10000)
    assert r["dip_rate"] == 0
    # back at the first 200 ms window at >= 90 % of 10,000 msg/s after the 1.5 s outage
    assert 1.5 <= r["recovery_s"] <= 1.5 + storm.RECOVERY_WINDOW_S + 0.011


def test_recovery_without_a_dip_is_zero_and_never_back_is_none():
    flat = timeline((10, 100))
    assert storm.recovery(flat, 10, 5.0)["recovery_s"] == 0.0
    dead = timeline((5, 100), (5, 1))
    r = storm.recovery(dead, 10, 5.0)
    assert r["dipped"] is True and r["recovery_s"] is None


def test_memory_bound_is_checked_only_when_a_base_is_set():
    limits = {"maxMessagePublishBufferSizeInMB": 64.0, "managedLedgerCacheSizeMB": 32.0}
    mem, problem = summary.memory_summary(limits, 150.0, None)
    assert problem is None and mem["sum_mb"] == 96 and mem["peak_rss_over_limits_mb"] == 54
    mem, problem = summary.memory_summary(limits, 150.0, 128)
    assert problem is None and mem["bound_mb"] == 224
    mem, problem = summary.memory_summary(limits, 250.0, 128)
    assert problem and "250.0 MB above its bound 224.0 MB" in problem
    unbounded = dict(limits, maxMessagePublishBufferSizeInMB=-1.0)
    assert "bounded" in summary.memory_summary(unbounded, 10.0, 128)[1]
    assert summary.memory_summary(None, 10.0, 128) == (None, None)


def agg_row(value, delivered, published, io_pct, spread=0.02):
    st = {"mean": delivered, "min": delivered * (1 - spread), "max": delivered * (1 + spread),
          "n": 2}
    return {"label": "numIOThreads=%s" % value, "valid_runs": ["r1", "r2"], "failed": [],
            "runs": ["r1", "r2"],
            "measures": {"delivered_msgs_per_s": st,
                         "published_msgs_per_s": {"mean": published, "min": published,
                                                  "max": published, "n": 2},
                         "broker_cpu_s_per_million": {"mean": 1.0, "min": 1, "max": 1, "n": 2}},
            "threads": {"pulsar-io-0": io_pct, "ml-worker-0": 50.0}}


def test_recommendation_picks_the_best_that_keeps_up_and_checks_the_default():
    agg = [agg_row(1, 50000, 90000, 99.0),    # saturated and behind: the floor rule
           agg_row(2, 100000, 101000, 70.0),
           agg_row(4, 101000, 101500, 40.0),  # best, overlapping 2
           agg_row(32, 80000, 100000, 10.0)]  # does not keep up
    rec = recommend.recommend(agg, "numIOThreads", 2)
    assert rec["best"] == "4"
    assert rec["best_range"] == ["2", "4"]
    assert rec["floor_violations"] == ["1"]
    assert rec["default"] == 4 and rec["default_in_best_range"] is True
    assert "numIOThreads=4" in rec["text"] and "floor rule" in rec["text"]
    rec16 = recommend.recommend(agg, "numIOThreads", 16)  # default 8: not measured, outside 2-4
    assert rec16["default"] == 8 and rec16["default_in_best_range"] is False
    assert "OUTSIDE" in rec16["text"]


def test_recommendation_needs_a_setting_that_keeps_up():
    rec = recommend.recommend([agg_row(8, 10, 100, 99.0)], "numIOThreads", 2)
    assert rec["best"] is None and rec["text"].startswith("no recommendation")
    assert recommend.recommend([agg_row(8, 10, 10, 1.0)], "workload.gateways", 2)["best"] is None


def test_default_formula_and_seed_values():
    assert [recommend.default_num_io_threads(n) for n in (1, 2, 4, 8, 16, 32, 64)] == \
        [2, 4, 8, 8, 8, 16, 32]
    assert seedtable.values_for(16) == (32, 8)
    with pytest.raises(scen.ScenarioError):
        seedtable.values_for(2)
    assert seedtable.scenario_names("small")[0] == "iot-telemetry-max-rate-small"
    for name in seedtable.scenario_names("small") + seedtable.scenario_names("full"):
        scen.resolve(name, env={})


def test_seed_table_rows_have_change_and_overlap():
    res = [{"kind": "magnetar", "scenario": "x", "agg": [agg_row(32, 100, 100, 1),
                                                       agg_row(8, 110, 110, 1)]}]
    rows = seedtable.table_rows(res)
    delivered = [r for r in rows if r[2].startswith("delivered")][0]
    assert delivered[5] == "+10.0 %" and delivered[6] == "no"


def test_every_scenario_resolves_and_has_a_small_form():
    names = [os.path.basename(p)[:-5] for p in glob.glob(os.path.join(scen.SCENARIO_DIR,
                                                                       "*.yaml"))]
    for n in names:
        scen.resolve(n, env={})
        if not n.endswith("-small"):
            assert n + "-small" in names, "%s has no -small form" % n


def test_new_scenarios_have_their_shape():
    tls = scen.resolve("iot-telemetry-max-rate-tls-small", env={}).data
    assert tls["broker"]["tls"] is True
    assert scen.resolve("iot-telemetry-high-rate-tls", env={}).data["broker"]["tls"] is True
    conc = scen.resolve("iot-telemetry-catch-up-concurrent-small", env={}).data["workload"]
    assert conc["connectMode"] == "concurrent" and conc["joinSeconds"] == [0, 4, 5, 6, 10]
    assert scen.resolve("iot-telemetry-many-connections", env={}).data["workload"][
        "gateways"] == 10000
    assert scen.resolve("iot-telemetry-many-topics", env={}).data["workload"]["topics"] == 1000
    big = scen.resolve("iot-telemetry-max-rate-128k", env={}).data
    assert big["workload"]["payloadBytes"] == 131072 and big["broker"]["rssBoundBaseMb"] > 0
    st = scen.resolve("iot-telemetry-reconnect-storm-small", env={})
    assert st.data["storm"]["atSeconds"] == 5
    assert st.worker_config("pulsar://x:1")["workload"]["receiptTimeline"] is True
    plain = scen.resolve("iot-telemetry-high-rate-small", env={})
    assert "receiptTimeline" not in plain.worker_config("pulsar://x:1")["workload"]


def test_bad_storm_settings_are_refused(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("extends: iot-telemetry-high-rate-small\nstorm: {atSeconds: 1, mode: shout}\n")
    with pytest.raises(scen.ScenarioError, match="storm.mode"):
        scen.resolve(str(p), env={})
    with pytest.raises(scen.ScenarioError, match="storm.atSeconds"):
        scen.resolve("iot-telemetry-high-rate-small", ["storm.atSeconds=-1"], env={})


class _Admin(http.server.BaseHTTPRequestHandler):
    seen: list = []

    def do_PUT(self):  # noqa: N802 - http.server's name
        _Admin.seen.append(self.path)
        code = 404 if "missing" in self.path else 204
        self.send_response(code)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_storm_unloads_every_topic_at_its_time_and_reports_failures():
    _Admin.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Admin)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        web = "http://127.0.0.1:%d" % server.server_address[1]
        topics = ["persistent://public/default/t-%d" % i for i in range(5)] + \
            ["persistent://public/default/missing"]
        s = storm.Storm({"atSeconds": 0.3, "mode": "unload"}, web, topics)
        start = time.monotonic_ns()
        s.start(start)
        s.join(10)
        assert sorted(_Admin.seen) == sorted(
            "/admin/v2/persistent/public/default/%s/unload" % t.rsplit("/", 1)[1] for t in topics)
        res = s.result(start)
        assert res["happened"] and 0.29 <= res["offset_s"] < 2.0
        assert len(s.errors) == 1 and "missing" in s.errors[0]
    finally:
        server.shutdown()
