"""The transactions crash test's checker (txn_crash.check) on made-up histories: a clean one
passes, each anomaly is found."""

import os
import random
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from txn_crash import OUTPUTS, Run, check  # noqa: E402

A, B = OUTPUTS[0], OUTPUTS[1]


def history() -> tuple[Run, dict[str, list[str]]]:
    """K=2: t1 committed on A and B with input (1,1), t2 aborted on A with input (1,2), t3 in
    doubt resolved committed on B, t4 open; (1,2) redelivered."""
    run = Run(random.Random(0), 2, 1000)
    run.txns = {
        "t1": {"topics": [A, B], "state": "committed", "input": [1, 1], "txn": [0, 1]},
        "t2": {"topics": [A], "state": "aborted", "input": [1, 2], "txn": [0, 2]},
        "t3": {"topics": [B], "state": "commit-sent", "input": None, "txn": [0, 3]},
        "t4": {"topics": [A], "state": "open", "input": None, "txn": [0, 4]},
    }
    stored = {A: ["t1:0", "t1:1"], B: ["t3:0", "t1:0", "t3:1", "t1:1"], OUTPUTS[2]: [],
              "__inputs__": ["1:2"]}
    return run, stored


def test_clean_history_passes():
    run, stored = history()
    report = check(run, stored)
    assert report["violations"] == []
    fig = report["figures"]
    assert (fig["committed"], fig["aborted"], fig["in_doubt_committed"], fig["open_aborted"],
            fig["messages_checked"], fig["inputs_checked"]) == (1, 1, 1, 1, 6, 2)


@pytest.mark.parametrize("change, found", [
    (lambda s: s[A].remove("t1:1"), "commit answered"),
    (lambda s: s[A].append("t2:0"), "aborted but"),
    (lambda s: s[A].append("t4:0"), "open but"),
    (lambda s: s[B].remove("t3:1"), "half-visible"),
    (lambda s: s[A].append("t1:1"), "duplicates"),
    (lambda s: s[A].reverse(), "out of order"),
    (lambda s: s[A].append("zz:0"), "of no transaction"),
    (lambda s: s["__inputs__"].append("1:1"), "input [1, 1] redelivered"),
    (lambda s: s["__inputs__"].clear(), "never redelivered"),
])
def test_anomaly_is_found(change, found):
    run, stored = history()
    change(stored)
    violations = check(run, stored)["violations"]
    assert any(found in v for v in violations), violations
