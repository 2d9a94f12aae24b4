"""broker.kind magnetar-bk: scenario keys, the commands of ZooKeeper, bookies and the cluster-mode
broker, and the bookies' CPU apart from the broker's (no processes started)."""
import os

import pytest
from test_summary import FakeBroker, FakeSampler, worker_result

from magnetar_perf import brokers, compare, runner, summary
from magnetar_perf import scenario as scen


def bk_scenario(*sets):
    return scen.resolve("iot-telemetry-max-rate-small", ["broker.kind=magnetar-bk", *sets],
                        env={})


def test_vary_broker_selects_the_bookkeeper_kinds():
    assert compare.variant_sets("broker", "magnetar-bk") == ["broker.kind=magnetar-bk"]
    assert compare.variant_sets("broker", "pulsar-bk") == ["broker.kind=pulsar-bk"]
    assert bk_scenario().data["broker"]["kind"] == "magnetar-bk"


def test_bookkeeper_defaults_and_checks():
    bk = bk_scenario().data["broker"]["bookkeeper"]
    assert (bk["bookies"], bk["ensembleSize"], bk["writeQuorum"], bk["ackQuorum"]) == (3, 2, 2, 2)
    assert bk["journalSyncData"] is True and bk["portBase"] is None
    with pytest.raises(scen.ScenarioError, match="ensembleSize >= writeQuorum >= ackQuorum"):
        bk_scenario("broker.bookkeeper.ackQuorum=3")
    with pytest.raises(scen.ScenarioError, match="more than its 2 bookies"):
        bk_scenario("broker.bookkeeper.bookies=2", "broker.bookkeeper.ensembleSize=3",
                    "broker.bookkeeper.writeQuorum=3")
    with pytest.raises(scen.ScenarioError, match="portBase"):
        bk_scenario("broker.bookkeeper.portBase=80")
    with pytest.raises(scen.ScenarioError, match="unknown key broker.bookkeeper.quorum"):
        bk_scenario("broker.bookkeeper.quorum=2")
    with pytest.raises(scen.ScenarioError, match="broker.kind must be one of"):
        scen.resolve("iot-telemetry-max-rate-small", ["broker.kind=kafka"], env={})


def test_make_broker_builds_the_magnetar_bk_broker(tmp_path):
    b = runner.make_broker(bk_scenario(), str(tmp_path), magnetar_bin="/bin/true")
    assert isinstance(b, brokers.MagnetarBkBroker) and b.kind == "magnetar-bk"
    assert b.bk.dir == os.path.join(str(tmp_path), "broker", "bookkeeper")


def test_ports_skip_busy_ones(monkeypatch):
    busy = {34000, 34002, 34050, 34060}
    monkeypatch.setattr(brokers, "port_free", lambda p: p not in busy)
    assert brokers.first_free(34000, 34050, 3) == 34003  # 3 consecutive free ones
    assert brokers.first_free(34050, 34060, 1) == 34051
    with pytest.raises(brokers.BrokerError, match="no 3 free consecutive port"):
        brokers.first_free(34000, 34004, 3)
    c = brokers.BookKeeperCluster("/nonexistent", {"bookies": 3, "portBase": 34000})
    c.choose_ports()
    assert (c.bookie_base, c.zk_port) == (34003, 34051)
    b = brokers.MagnetarBkBroker("/bin/true", "/nonexistent",
                                 {"bookkeeper": {"portBase": 34000}, "cpuset": None})
    assert b._ports() == (34061, 34062)


def test_real_port_check():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert brokers.port_free(s.getsockname()[1]) is False


def test_bookie_and_zookeeper_commands(tmp_path, monkeypatch):
    monkeypatch.setattr(brokers, "port_free", lambda p: True)
    cfg = bk_scenario("broker.bookkeeper.portBase=34000").data["broker"]["bookkeeper"]
    c = brokers.BookKeeperCluster(str(tmp_path), cfg)
    c.choose_ports()
    cmd = c.bookies_command()
    assert cmd[1].endswith("scripts/bookies.sh") and cmd[2] == "start"
    assert cmd[cmd.index("-n") + 1] == "3" and cmd[cmd.index("-d") + 1] == str(tmp_path)
    assert cmd[cmd.index("--port-base") + 1] == "34000"
    assert "--no-sync" not in cmd  # journalSyncData on, as Pulsar's bookies
    assert c.zk_port == 34050
    zk = c.zk_command(c.zk_port)
    assert zk[1].endswith("scripts/zookeeper.sh") and zk[zk.index("-p") + 1] == "34050"
    assert zk[zk.index("-d") + 1] == os.path.join(str(tmp_path), "zk")
    c2 = brokers.BookKeeperCluster(str(tmp_path), dict(cfg, portBase=None, journalSyncData=False,
                                                       bookies=5))
    c2.choose_ports()
    cmd2 = c2.bookies_command()
    assert "--no-sync" in cmd2 and "--port-base" not in cmd2
    assert cmd2[cmd2.index("-n") + 1] == "5"


def test_cluster_mode_broker_command(tmp_path, monkeypatch):
    monkeypatch.setattr(brokers, "port_free", lambda p: True)
    data = bk_scenario("broker.bookkeeper.portBase=34000", "broker.bookkeeper.ensembleSize=3",
                       "broker.bookkeeper.writeQuorum=3",
                       "broker.settings.numIOThreads=4").data["broker"]
    b = brokers.MagnetarBkBroker("/bin/true", str(tmp_path), data)
    b.bk.zk_port = 34050
    b.bk.uri = "zk://127.0.0.1:34050/ledgers"
    cmd = b.command()
    assert cmd[1] == "broker"  # cluster mode, not standalone
    sets = {cmd[i + 1].split("=", 1)[0]: cmd[i + 1].split("=", 1)[1]
            for i, a in enumerate(cmd) if a == "--set"}
    assert sets["metadataStoreUrl"] == "zk:127.0.0.1:34050"
    assert sets["bookkeeperMetadataServiceUri"] == "zk://127.0.0.1:34050/ledgers"
    assert (sets["managedLedgerDefaultEnsembleSize"], sets["managedLedgerDefaultWriteQuorum"],
            sets["managedLedgerDefaultAckQuorum"]) == ("3", "3", "2")
    assert sets["clusterName"] == brokers.BK_CLUSTER_NAME
    assert (sets["brokerServicePort"], sets["webServicePort"]) == ("34060", "34061")
    assert sets["numIOThreads"] == "4" and sets["advertisedAddress"] == "127.0.0.1"
    assert "journalSyncData" not in sets  # broker.fsync is the embedded journal's, not used
    init = b.init_command()
    assert init[1] == "initialize-cluster-metadata"
    assert init[init.index("--metadata-store") + 1] == "zk:127.0.0.1:34050"
    assert init[init.index("--cluster") + 1] == brokers.BK_CLUSTER_NAME


def test_cluster_pids_from_the_scripts_pid_files(tmp_path):
    c = brokers.BookKeeperCluster(str(tmp_path), {"bookies": 3})
    for i, pid in ((0, 101), (2, 103)):
        os.makedirs(tmp_path / ("bookie-%d" % i))
        (tmp_path / ("bookie-%d" % i) / "pid").write_text("%d\n" % pid)
    os.makedirs(tmp_path / "zk")
    (tmp_path / "zk" / "zookeeper.pid").write_text("99\n")
    assert c.pids() == {"bookies": [101, 103], "zookeeper": [99]}


class BkSampler(FakeSampler):
    def __init__(self):
        super().__init__()
        self.snapshots["measured_start"]["aux_cpu_s"] = {"bookies": 20.0, "zookeeper": 1.0}
        self.snapshots["measured_end"]["aux_cpu_s"] = {"bookies": 23.0, "zookeeper": 1.5}


def test_bookie_cpu_is_its_own_measure():
    sc = bk_scenario()
    s = summary.build(sc, worker_result(), BkSampler(), FakeBroker(), 0, [])
    assert summary.check(s) == []
    assert s["broker"] == "magnetar-bk"
    assert s["broker_cpu_s_per_million"] == 2.0       # the broker's alone
    assert s["bookies_cpu_s_per_million"] == 3.0      # 3 s over 1M messages
    assert s["bookies_cpu_pct"] == 75.0               # 3 s over 4 s
    assert s["zookeeper_cpu_s_per_million"] == 0.5
    # 7 s busy - 2 broker - 1 worker - 3 bookies - 0.5 ZooKeeper, over 4 s
    assert s["other_processes_cpu_pct"] == 12.5
    paths = [m[0] for m in summary.MEASURES]
    assert "bookies_cpu_s_per_million" in paths and "zookeeper_cpu_s_per_million" in paths
    plain = summary.build(sc, worker_result(), FakeSampler(), FakeBroker(), 0, [])
    assert "bookies_cpu_s_per_million" not in plain



def test_pulsar_bk_commands(tmp_path, monkeypatch):
    monkeypatch.setattr(brokers, "port_free", lambda p: True)
    sc = scen.resolve("iot-telemetry-max-rate-small",
                      ["broker.kind=pulsar-bk", "broker.bookkeeper.portBase=34000",
                       "broker.bookkeeper.ackQuorum=1"], env={})
    b = runner.make_broker(sc, str(tmp_path))
    assert isinstance(b, brokers.PulsarBkBroker) and b.namespace == "public/default"
    b.bk.zk_port = 34050
    b.bk.uri = "zk://127.0.0.1:34050/ledgers"
    init = b.init_command()
    assert init[1].endswith("tools/pulsar-reference/pulsar-broker.sh") and init[2] == "init-cluster"
    assert init[init.index("-m") + 1] == "zk:127.0.0.1:34050"
    assert init[init.index("-b") + 1] == "zk://127.0.0.1:34050/ledgers"
    cmd = b.start_command(b._ports())
    assert cmd[2] == "start" and cmd[cmd.index("-c") + 1] == brokers.BK_CLUSTER_NAME
    assert (cmd[cmd.index("-p") + 1], cmd[cmd.index("-w") + 1]) == ("34060", "34061")
    sets = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--set"]
    assert "managedLedgerDefaultEnsembleSize=2" in sets
    assert "managedLedgerDefaultAckQuorum=1" in sets
    assert "brokerDeduplicationEnabled=true" in sets  # the scenario's broker.settings
    # broker.conf.base and -m/-b/-c set these: not repeated
    assert not any(kv.startswith(("metadataStoreUrl=", "clusterName=")) for kv in sets)
    b.stop()  # nothing started: nothing to stop, no error
