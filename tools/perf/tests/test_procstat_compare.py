"""/proc parsing, thread CPU by name, cpusets and A/B aggregation."""
import os

from magnetar_perf import compare, procstat


def test_parse_stat_with_spaces_and_parens_in_comm():
    line = "1234 (pulsar-io (x) 1) S 1 2 3 4 5 6 7 8 9 10 111 222 0 0 20 0 3 0 100 1000 50"
    comm, ut, st = procstat.parse_stat(line)
    assert comm == "pulsar-io (x) 1"
    assert (ut, st) == (111, 222)


def test_own_process_cpu_and_threads():
    pid = os.getpid()
    assert procstat.process_cpu_seconds(pid) > 0
    threads = procstat.thread_cpu_ticks(pid)
    assert pid in threads
    mem = procstat.memory_kb(pid)
    assert mem["VmHWM"] >= mem["VmRSS"] > 0


def test_thread_cpu_by_name_sums_and_matches_by_tid():
    hz = procstat.CLK_TCK
    before = {1: ("pool", 0), 2: ("pool", hz), 3: ("gone", 5 * hz)}
    after = {1: ("pool", hz), 2: ("pool", 2 * hz), 4: ("new", hz // 2)}
    out = procstat.thread_cpu_by_name(before, after, 2.0)
    assert out == {"pool": 100.0, "new": 25.0}
    assert list(out) == ["pool", "new"]  # busiest first
    assert procstat.thread_cpu_by_name(before, after, 0) == {}


def test_parse_cpuset():
    assert procstat.parse_cpuset("0-1,4") == {0, 1, 4}
    assert procstat.parse_cpuset("3") == {3}


def test_vary_parsing_and_variant_sets():
    assert compare.parse_vary("numIOThreads=32,8") == ("numIOThreads", ["32", "8"])
    assert compare.variant_sets("numIOThreads", "8") == ["numIOThreads=8"]
    assert compare.variant_sets("broker", "pulsar") == ["broker.kind=pulsar"]
    sets = compare.variant_sets("broker", "/x/magnetar")
    assert sets == ["broker.kind=magnetar", "broker.binary=/x/magnetar"]


def test_aggregate_and_compare_exclude_invalid_runs():
    def s(valid, cpu, rate):
        return {"valid": valid, "invalid_reasons": [] if valid else ["violations"],
                "broker_cpu_s_per_million": cpu, "delivered_msgs_per_s": rate,
                "threads": {"pulsar-io-0": 50.0}}
    variants = [("numIOThreads=32", [("a1", s(True, 2.0, 100.0)), ("a2", s(True, 4.0, 120.0))]),
                ("numIOThreads=8", [("b1", s(True, 1.0, 150.0)), ("b2", s(False, 99.0, 1.0)),
                                    ("b3", s(True, 1.5, 160.0))])]
    agg = compare.aggregate(variants)
    a, b = agg
    assert a["measures"]["broker_cpu_s_per_million"] == {"mean": 3.0, "min": 2.0, "max": 4.0,
                                                         "n": 2}
    assert b["measures"]["broker_cpu_s_per_million"]["mean"] == 1.25  # b2 left out
    assert b["failed"] == [{"run": "b2", "reasons": ["violations"]}]
    rows = {r["measure"]: r for r in compare.compare_measures(a["measures"], b["measures"])}
    cpu = rows["broker_cpu_s_per_million"]
    assert round(cpu["change_pct"], 6) == round((1.25 - 3.0) / 3.0 * 100, 6)
    assert cpu["improved"] is True and cpu["ranges_overlap"] is False
    rate = rows["delivered_msgs_per_s"]
    assert rate["improved"] is True and rate["ranges_overlap"] is False


def test_magnetar_command_pins_and_derives_available_processors(tmp_path):
    from magnetar_perf import brokers
    cfg = {"cpuset": 0, "availableProcessors": None, "settings": {"numIOThreads": 8,
                                                                  "journalSyncData": True},
           "fsync": False, "journalOnTmpfs": False}
    b = brokers.MagnetarBroker("/bin/true", str(tmp_path), cfg)
    assert b.cpus == {0}  # a cpuset of 0 (YAML int) is CPU 0, not "no cpuset"
    cmd = b.command()
    assert cmd[cmd.index("--available-processors") + 1] == "1"
    assert "numIOThreads=8" in cmd
    assert "journalSyncData=True" not in cmd and "journalSyncData=true" in cmd  # explicit wins
    assert "advertisedAddress=127.0.0.1" in cmd
    cfg2 = dict(cfg, cpuset="0-1", availableProcessors=4, settings={})
    cmd2 = brokers.MagnetarBroker("/bin/true", str(tmp_path), cfg2).command()
    assert cmd2[cmd2.index("--available-processors") + 1] == "4"
    assert "journalSyncData=false" in cmd2


def test_passes_alternate_direction(monkeypatch, tmp_path):
    """Every other pass runs the values in reverse (A B C, C B A, A B C), so load drifting over
    the passes does not line up with the values' order; results stay in the values' order."""
    order = []
    monkeypatch.setattr(compare.scen, "resolve", lambda ref, sets: sets[-1])
    monkeypatch.setattr(compare, "variant_sets", lambda key, value: [value])

    def fake_run(sc, run_dir, **kw):
        order.append(sc)
        return {"valid": True, "invalid_reasons": [], "n": len(order)}

    monkeypatch.setattr(compare.runner, "run", fake_run)
    out = compare.run_variants("x", "numIOThreads", ["1", "2", "4"], 3, [], str(tmp_path), {},
                               quiet=True)
    assert order == ["1", "2", "4", "4", "2", "1", "1", "2", "4"]
    assert [label for label, _ in out] == ["numIOThreads=1", "numIOThreads=2", "numIOThreads=4"]
    assert [s["n"] for _, s in out[0][1]] == [1, 6, 7]
