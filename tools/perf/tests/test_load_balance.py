"""The load-balance scenario (issue 48): its scenario keys, and the analysis of the per-broker
samples (moves, counters, the balance target, the p99 around moves, the stored check) on crafted
rows."""
import pytest

from magnetar_perf import loadbalance as lb
from magnetar_perf import scenario as scen

B1, B2, B3 = "public/lb/0x00000000_0x40000000", "public/lb/0x40000000_0x80000000", \
    "public/lb/0x80000000_0xc0000000"


def row(t, broker, rate, bundles, cpu_s=None, **metrics):
    r = {"t": t, "broker": broker, "msg_rate_in": rate / 2, "msg_rate_out": rate / 2,
         "bundles": bundles}
    if cpu_s is not None:
        r["cpu_s"] = cpu_s
    r.update(metrics)
    return r


def test_metric_sum_adds_the_labelled_samples_of_one_family_only():
    text = ("# TYPE pulsar_lb_unload_bundle_total gauge\n"
            'pulsar_lb_unload_bundle_total{cluster="c",metric="bundleUnloading"} 3\n'
            'pulsar_lb_unload_bundle_total_other{cluster="c"} 100\n'
            'pulsar_lb_unload_bundle_total{cluster="d"} 2.5\n')
    assert lb.metric_sum(text, "pulsar_lb_unload_bundle_total") == 5.5
    assert lb.metric_sum(text, "pulsar_lb_bundles_split_total") is None


def test_a_bundle_that_changes_owner_is_a_move_and_a_new_one_is_not():
    rows = [row(0, "b1", 300, [B1, B2]), row(0, "b2", 0, []),
            row(1, "b1", 150, [B1]), row(1, "b2", 0, []),             # B2 released
            row(2, "b1", 150, [B1]), row(2, "b2", 150, [B2, B3])]     # placed; B3 is new
    moves = lb.bundle_moves(rows)
    assert moves == [{"t": 1, "placed_t": 2, "bundle": B2, "from": "b1", "to": "b2"}]


def test_a_bundle_placed_back_on_its_owner_is_no_move():
    rows = [row(0, "b1", 300, [B1, B2]), row(1, "b1", 150, [B1]), row(2, "b1", 300, [B1, B2])]
    assert lb.bundle_moves(rows) == []


def test_counter_events_follow_the_sum_over_brokers():
    rows = [row(0, "b1", 0, [], pulsar_lb_unload_bundle_total=0), row(0, "b2", 0, []),
            row(1, "b1", 0, [], pulsar_lb_unload_bundle_total=2),
            row(2, "b1", 0, [], pulsar_lb_unload_bundle_total=2),
            row(3, "b2", 0, [], pulsar_lb_unload_bundle_total=1)]  # a new leader's counter
    assert lb.counter_events(rows, "pulsar_lb_unload_bundle_total") == [(1, 2), (3, 1)]


def test_broker_series_computes_cpu_from_consecutive_samples():
    s = lb.broker_series([row(0, "b1", 10, [B1], cpu_s=1.0), row(2, "b1", 10, [B1], cpu_s=2.0)])
    assert s["b1"][0]["cpu_pct"] is None and s["b1"][1]["cpu_pct"] == pytest.approx(50)
    assert s["b1"][1]["msg_rate"] == 10 and s["b1"][1]["bundles"] == 1


def three_brokers(balanced_from):
    """Rows of 3 brokers, 1 per second for 40 s: all 900 msg/s on b1 until balanced_from, then
    300 each (load from t=1)."""
    rows = []
    for t in range(0, 41):
        total = 0 if t == 0 else 900
        even = t >= balanced_from
        for i, b in enumerate(("b1", "b2", "b3")):
            rate = total / 3 if even else (total if i == 0 else 0)
            rows.append(row(t, b, rate, []))
    return lb.broker_series(rows)


def test_balance_met_when_even_within_the_intervals():
    r = lb.balance(three_brokers(20), 5.0, 5, 25.0, 3.0, 40)
    assert r["load_start_s"] == 1 and r["check_at_s"] == 26
    assert r["ratio_at_start"] == pytest.approx(3.0)
    assert r["ratio_at_check"] == pytest.approx(1.0) and r["target_met"] is True
    assert r["within_target_from_s"] == 22  # the 3 s span is all even from t=22
    assert r["ratio_at_end"] == pytest.approx(1.0)


def test_balance_not_met_when_still_skewed_at_the_check():
    r = lb.balance(three_brokers(30), 5.0, 5, 25.0, 3.0, 40)
    assert r["ratio_at_check"] == pytest.approx(3.0) and r["target_met"] is False
    assert r["within_target_from_s"] == 32


def test_balance_without_load_or_before_the_check_is_not_met():
    idle = lb.broker_series([row(t, b, 0, []) for t in range(10) for b in ("b1", "b2")])
    assert lb.balance(idle, 5.0, 5, 25.0, 3.0, 9)["target_met"] is False
    short = lb.balance(three_brokers(5), 5.0, 5, 25.0, 3.0, 20)  # run ends before t=26
    assert short["ratio_at_check"] is None and short["target_met"] is False


def series(p99_by_second):
    return [{"t": float(t), "applications": {"a": {"e2e_p99_ms": v}, "b": {"e2e_p99_ms": v / 2}}}
            for t, v in p99_by_second]


def test_latency_windows_take_the_worst_second_around_each_move():
    ts = series([(t, 10.0) for t in range(1, 21)])
    ts[11]["applications"]["a"]["e2e_p99_ms"] = 900.0   # t=12, in the 5 s after t=10
    ts[8]["applications"]["a"]["e2e_p99_ms"] = 40.0     # t=9, before it
    w = lb.latency_windows(ts, [{"t": 10.0, "bundle": B1, "from": "b1", "to": "b2"}], 5.0)
    m = w["moves"][0]
    assert m["p99_before_ms"] == 40.0 and m["p99_after_ms"] == 900.0
    assert w["p99_worst_after_move_ms"] == 900.0
    assert w["p99_baseline_ms"] == 10.0   # the seconds more than 5 s from the move


def test_latency_windows_without_moves():
    w = lb.latency_windows(series([(1, 5.0), (2, 7.0), (3, 9.0)]), [], 5.0)
    assert w["moves"] == [] and w["p99_worst_after_move_ms"] is None
    assert w["p99_baseline_ms"] == 7.0


def test_shedding_interval_prefers_the_testing_setting():
    assert lb.shedding_interval_s({"loadBalancerSheddingIntervalMillisForTesting": 5000}) == 5
    assert lb.shedding_interval_s({"loadBalancerSheddingIntervalMinutes": 2}) == 120
    assert lb.shedding_interval_s({}) == 60


def test_summarize_flags_a_stored_count_other_than_the_acknowledged():
    rows = [dict(r, t=r["t"] + 100) for r in
            [row(t, b, 900 if b == "b1" else 0, [B1] if b == "b1" else []) for t in range(5)
             for b in ("b1", "b2")]]
    worker = {"total_published": 1000, "timeseries": series([(1, 5.0), (4, 5.0)])}
    cluster = {"targetIntervals": 5, "targetPercent": 25, "windowSeconds": 5}
    settings = {"loadBalancerSheddingIntervalMillisForTesting": 1000}
    doc, problems = lb.summarize(rows, worker, cluster, settings, 100.0, 1000)
    assert problems == [] and doc["stored_messages"] == doc["acknowledged_messages"] == 1000
    assert doc["bundle_moves"] == 0 and doc["shedding_interval_s"] == 1
    assert lb.summarize(rows, worker, cluster, settings, 100.0, 1001)[1] == [
        "1001 messages stored, 1000 acknowledged (duplicates stored)"]
    assert "messages lost" in lb.summarize(rows, worker, cluster, settings, 100.0, 999)[1][0]
    assert lb.summarize(rows, worker, cluster, settings, 100.0, None)[1] == [
        "the stored message count could not be read"]


def test_load_balance_scenarios_resolve():
    full = scen.resolve("iot-telemetry-load-balance", env={}).data
    small = scen.resolve("iot-telemetry-load-balance-small", env={}).data
    for d in (full, small):
        assert d["broker"]["kind"] == "magnetar-bk" and d["cluster"]["brokers"] == 3
        assert d["cluster"]["placeOnFirstBroker"] is True
        assert d["broker"]["settings"]["brokerDeduplicationEnabled"] is True
    assert small["workload"]["measuredMessages"] < full["workload"]["measuredMessages"]


@pytest.mark.parametrize("sets, message", [
    (["cluster.brokers=3"], "needs broker.kind magnetar-bk"),
    (["broker.kind=magnetar-bk", "cluster.placeOnFirstBroker=true"], "needs cluster.brokers"),
    (["broker.kind=magnetar-bk", "cluster.brokers=0"], "cluster.brokers must be >= 1"),
    (["broker.kind=magnetar-bk", "cluster.brokers=2", "cluster.targetIntervals=0"],
     "targetIntervals >= 1"),
])
def test_cluster_keys_are_checked(sets, message):
    with pytest.raises(scen.ScenarioError, match=message):
        scen.resolve("iot-telemetry-high-rate-small", sets=sets, env={})


def test_summary_check_of_the_load_balance_document():
    from magnetar_perf import summary
    good = {"bundle_moves": 3, "unloads": 4.0, "splits": 0, "ratio_at_start": 3.0,
            "shedding_interval_s": 5.0, "target_met": False, "stored_messages": 10,
            "acknowledged_messages": 10}
    assert summary.check_load_balance(None) == []
    assert summary.check_load_balance(good) == []
    assert summary.check_load_balance(dict(good, stored_messages=11)) == [
        "load_balance: 11 messages stored, 10 acknowledged"]
    assert summary.check_load_balance(dict(good, ratio_at_start=None)) == [
        "load_balance.ratio_at_start is not a non-negative number: None"]


def test_balance_target_required_only_when_asked():
    from magnetar_perf import summary
    met = {"target_met": True, "ratio_at_check": 1.1, "target_pct": 25}
    assert summary.check_balance_target(met) == []
    assert summary.check_balance_target(dict(met, target_met=False, ratio_at_check=1.6)) == [
        "load_balance: target not met: busiest/mean 1.6 at the check (limit 25 %)"]
    assert summary.check_balance_target(None) == [
        "no load_balance section (a run with cluster.brokers > 1 has one)"]
