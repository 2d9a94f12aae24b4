"""tools/alloc-count/alloc-per-message: the measured phase's counts per message, per thread."""
import importlib.machinery
import importlib.util
import json
import os
import signal

from magnetar_perf import runner

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "alloc-count", "alloc-per-message")


def load_tool():
    loader = importlib.machinery.SourceFileLoader("alloc_per_message", SCRIPT)
    spec = importlib.util.spec_from_loader("alloc_per_message", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def snap(n, reason, threads):
    return json.dumps({"pid": 7, "snapshot": n, "reason": reason, "threads": [
        {"tid": tid, "name": name, "allocs": a, "frees": f, "bytes": b}
        for tid, name, a, f, b in threads], "overflow": {"allocs": 0, "frees": 0}})


def write_run(tmp_path, broker_lines, measured=1000):
    (tmp_path / "alloc-count").mkdir()
    (tmp_path / "alloc-count" / "magnetar-7.jsonl").write_text("\n".join(broker_lines) + "\n")
    (tmp_path / "summary.json").write_text(json.dumps({"measured_messages": measured,
                                                       "valid": True}))


def test_difference_of_the_two_signal_snapshots_per_thread_and_group(tmp_path):
    write_run(tmp_path, [
        snap(0, "signal", [(1, "pulsar-io-0", 100, 90, 1000), (2, "ml-worker-0", 50, 50, 500)]),
        snap(1, "signal", [(1, "pulsar-io-0", 2100, 2090, 201000),
                           (2, "ml-worker-0", 550, 1550, 20500),
                           (3, "pulsar-io-1", 1000, 0, 8000)]),
        snap(2, "exit", [(1, "pulsar-io-0", 9999, 9999, 9999)]),  # after the phase: ignored
    ])
    result = load_tool().analyze(str(tmp_path))
    broker = result["processes"]["broker"]
    assert broker["total"]["allocs_per_msg"] == 3.5  # (2000 + 500 + 1000) / 1000
    threads = {t["name"]: t for t in broker["threads"]}
    assert threads["pulsar-io-0"]["allocs_per_msg"] == 2.0
    assert threads["ml-worker-0"]["frees_per_msg"] == 1.5
    assert threads["pulsar-io-1"]["bytes_per_msg"] == 8.0  # a thread new in the phase counts whole
    assert broker["groups"]["pulsar-io-*"]["threads"] == 2
    assert broker["groups"]["pulsar-io-*"]["allocs_per_msg"] == 3.0
    assert json.loads((tmp_path / "allocations.json").read_text())["measured_messages"] == 1000


def test_a_run_without_both_snapshots_gives_no_figures(tmp_path):
    write_run(tmp_path, [snap(0, "signal", [(1, "pulsar-io-0", 1, 1, 1)]),
                         snap(1, "exit", [(1, "pulsar-io-0", 5, 5, 5)])])
    assert load_tool().analyze(str(tmp_path))["processes"] == {}


def test_the_launcher_signals_only_under_alloc_count(monkeypatch):
    sent = []
    monkeypatch.setattr(os, "kill", lambda pid, sig: sent.append((pid, sig)))
    monkeypatch.delenv("ALLOC_COUNT_DIR", raising=False)
    runner._alloc_count_snapshot([11, 12])
    assert sent == []
    monkeypatch.setenv("ALLOC_COUNT_DIR", "/tmp/x")
    runner._alloc_count_snapshot([11, None, 12])
    assert sent == [(11, signal.SIGUSR2), (12, signal.SIGUSR2)]
