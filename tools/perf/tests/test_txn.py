"""iot-telemetry-txn (issue 45): the scenario's keys, and the check of a transforming run's
output on crafted worker results (duplicated output, output of an aborted transaction)."""
import copy

import pytest
from test_summary import LAT, FakeBroker, FakeSampler, worker_result

from magnetar_perf import report, summary
from magnetar_perf import scenario as scen


def transform_result(**verifier):
    """A worker result of a valid transform run; verifier: overrides of the verifier's row."""
    app = {"name": "iot-application-0", "role": "transform", "join_s": 0, "unique": 1000100,
           "duplicates": 12, "ordering_violations": 0, "invalid": 0, "missing": 0,
           "catch_up_s": None, "e2e_latency_ms": LAT, "transactions": True,
           "batches_committed": 10001, "transactions_aborted": 100, "batch_latency_ms": LAT}
    check = {"name": "iot-output-check-0", "role": "verify", "join_s": 0, "unique": 1000100,
             "duplicates": 0, "ordering_violations": 0, "invalid": 0, "missing": 0,
             "catch_up_s": None, "e2e_latency_ms": LAT, "aborted_visible": 0,
             "not_derived": 0}
    check.update(verifier)
    return worker_result(applications=[app, check],
                         transform={"transactions": True, "batch": 100, "abort_fraction": 0.01,
                                    "batches_committed": 10001, "transactions_aborted": 100,
                                    "batch_latency_ms": LAT})


def build(worker):
    sc = scen.resolve("iot-telemetry-txn-small", env={})
    return summary.build(sc, worker, FakeSampler(), FakeBroker(), 0, [])


def test_txn_scenarios_resolve_with_transactions_on_and_batches_of_100():
    for name in ("iot-telemetry-txn", "iot-telemetry-txn-small"):
        wl = scen.resolve(name, env={}).data["workload"]
        assert wl["transform"] is True and wl["transactions"] is True
        assert wl["txnBatch"] == 100
        settings = scen.resolve(name, env={}).data["broker"]["settings"]
        assert settings["transactionCoordinatorEnabled"] is True
    small = scen.resolve("iot-telemetry-txn-small", env={}).data["workload"]
    assert 0 < small["txnAbortFraction"] < 1  # every CI run also aborts some
    plain = scen.resolve("iot-telemetry-txn", ["workload.transactions=false",
                                               "workload.txnBatch=10"], env={})
    cfg = plain.worker_config("pulsar://127.0.0.1:6650")["workload"]
    assert cfg["transactions"] is False and cfg["txnBatch"] == 10 and cfg["transform"] is True


@pytest.mark.parametrize("sets, error", [
    (["workload.txnBatch=0"], "txnBatch"),
    (["workload.txnAbortFraction=1.0"], "in [0, 1)"),
    (["workload.transactions=false"], "needs workload.transform and workload.transactions"),
    (["workload.joinSeconds=[5]"], "late applications"),
])
def test_bad_transform_settings_are_refused(sets, error):
    with pytest.raises(scen.ScenarioError, match=error.replace("[", r"\[").replace(")", r"\)")):
        scen.resolve("iot-telemetry-txn-small", sets, env={})


def test_a_clean_transform_run_passes_and_reports_its_transactions():
    s = build(transform_result())
    assert summary.check(s) == []
    assert [a["role"] for a in s["applications"]] == ["transform", "verify"]
    assert s["applications"][0]["transactions_aborted"] == 100
    assert s["transform"]["batch"] == 100
    rows = dict((r[0], r[1]) for r in report.summary_rows(s))
    assert rows["transform: transactions, batch"] == "on, 100"
    assert rows["transform: outputs of aborted transactions read"] == 0


@pytest.mark.parametrize("verifier, problem", [
    ({"duplicates": 3}, "duplicate outputs: 3"),
    ({"aborted_visible": 2}, "outputs of aborted transactions read: 2"),
    ({"missing": 5}, "inputs without output: 5"),
    ({"ordering_violations": 1}, "output ordering violations: 1"),
    ({"not_derived": 1}, "outputs not derived: 1"),
])
def test_the_check_fails_on_wrong_output_even_when_the_run_says_valid(verifier, problem):
    s = build(transform_result(**verifier))
    assert s["valid"] is True  # the crafted worker result claims no error
    problems = summary.check(s)
    assert any(problem in p for p in problems), problems


def test_input_duplicates_are_allowed_output_duplicates_are_not():
    w = transform_result()
    bad = copy.deepcopy(w)
    bad["applications"][1]["duplicates"] = 1
    assert summary.check(build(w)) == []  # 12 redelivered inputs, none transformed twice
    assert summary.check(build(bad)) != []
