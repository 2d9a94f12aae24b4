"""scripts/bookies.sh and scripts/cluster.sh on clusters of their own (not conftest's), issue 22:

- bookies.sh start counts the bookies it started whether they registered writable or read-only
  (a read-only bookie: forceReadOnlyBookie here, a full disk in life), names the read-only ones,
  and status gives each bookie's state; with --port-base P its ZooKeeper is on P-1.
- cluster.sh --port-base P: every process listens on a port that follows P (ZooKeeper on P+99
  too), so two clusters with bases 200 apart run side by side."""

import os
import random
import shutil
import socket
import subprocess
import tempfile

import pulsar
import pytest
from conftest import BOOKIES_SH, REPO

CLUSTER_SH = os.path.join(REPO, "scripts", "cluster.sh")
QUIET = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)


def free_range(width: int) -> int:
    """A base P such that P-1 .. P+width-1 are free on 127.0.0.1 now."""
    for _ in range(200):
        base = random.randrange(20000, 60000 - width, 2)
        ok = True
        for port in range(base - 1, base + width):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise AssertionError("no free port range")


def listening_ports(pid: int) -> set[int]:
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, timeout=30).stdout
    return {int(line.split()[3].rsplit(":", 1)[1]) for line in out.splitlines()
            if f"pid={pid}," in line}


def bookies_sh(*args: str, timeout: float = 150) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", BOOKIES_SH, *args], capture_output=True, text=True,
                          timeout=timeout)


def test_bookies_sh_counts_read_only_bookies_and_says_which():
    if shutil.which("java") is None:
        pytest.skip("java not installed (scripts/install-test-deps.sh)")
    d = tempfile.mkdtemp(prefix="magnetar-bookies-ro-")
    base = free_range(3)
    try:
        p = bookies_sh("start", "-n", "1", "-d", d, "--port-base", str(base))
        assert p.returncode == 0, p.stderr[-3000:]
        # The ZooKeeper bookies.sh started follows the port base too.
        assert p.stdout.strip() == f"zk://127.0.0.1:{base - 1}/ledgers", p.stdout
        assert "read-only" not in p.stderr, p.stderr
        # A second bookie that comes up read-only: counted (start returns), and named.
        p = bookies_sh("start", "-n", "2", "-d", d, "--port-base", str(base),
                       "--conf", "forceReadOnlyBookie=true", timeout=90)
        assert p.returncode == 0, p.stderr[-3000:]
        assert p.stdout.strip() == f"zk://127.0.0.1:{base - 1}/ledgers", p.stdout
        assert f"bookie 1 (127.0.0.1:{base + 1}) is read-only" in p.stderr, p.stderr
        assert "bookie 0 " not in p.stderr, p.stderr
        st = bookies_sh("status", "-d", d, timeout=60)
        assert st.returncode == 0, st.stderr
        lines = {w[0]: w for w in (line.split() for line in st.stdout.splitlines())}
        assert lines["zookeeper"][2] == str(base - 1), st.stdout
        assert lines["bookie-0"][2:] == [str(base), "writable"], st.stdout
        assert lines["bookie-1"][2:] == [str(base + 1), "read-only"], st.stdout
    finally:
        bookies_sh("stop", "-d", d, timeout=60)
        shutil.rmtree(d, ignore_errors=True)


def test_two_clusters_side_by_side_every_port_follows_the_base():
    if shutil.which("java") is None:
        pytest.skip("java not installed (scripts/install-test-deps.sh)")
    base_a = free_range(400)
    bases = [base_a, base_a + 200]
    dirs = [tempfile.mkdtemp(prefix="magnetar-cluster-ports-") for _ in bases]
    try:
        outs = []
        for d, base in zip(dirs, bases):
            r = subprocess.run(
                ["bash", CLUSTER_SH, "start", "-d", d, "--brokers", "1", "--port-base", str(base),
                 "--session-timeout-ms", "4000", "--tick-ms", "500"],
                capture_output=True, text=True, timeout=180)
            assert r.returncode == 0, r.stderr[-3000:]
            outs.append(dict(line.split(" ", 1) for line in r.stdout.splitlines()))
        for d, base, out in zip(dirs, bases, outs):
            assert out["metadataStoreUrl"] == f"zk:127.0.0.1:{base + 99}", out
            assert out["serviceUrl"] == f"pulsar://127.0.0.1:{base}", out
            st = subprocess.run(["bash", CLUSTER_SH, "status", "-d", d], capture_output=True,
                                text=True, timeout=60)
            assert st.returncode == 0, st.stderr
            procs = [line.split() for line in st.stdout.splitlines()]
            assert sorted(w[0] for w in procs) == ["broker", "zookeeper"], st.stdout
            expected = {"zookeeper": {base + 99}, "broker": {base, base + 1}}
            for kind, pid, *_ in procs:
                assert listening_ports(int(pid)) == expected[kind], (kind, st.stdout)
            # Each cluster serves on its own ports.
            client = pulsar.Client(out["serviceUrl"], operation_timeout_seconds=30, logger=QUIET)
            try:
                topic = f"persistent://public/default/ports-{base}"
                consumer = client.subscribe(topic, "s")
                client.create_producer(topic).send(str(base).encode())
                assert consumer.receive(timeout_millis=10000).data() == str(base).encode()
            finally:
                client.close()
    finally:
        for d in dirs:
            subprocess.run(["bash", CLUSTER_SH, "stop", "-d", d], capture_output=True,
                           timeout=120)
            shutil.rmtree(d, ignore_errors=True)


def test_cluster_sh_checks_the_command_before_the_directory(tmp_path):
    """No command, --help and an unknown command answer the usage, not "no cluster in ..." (a
    first run's `cluster.sh` or `cluster.sh --help` named a directory the user never gave)."""
    d = tmp_path / "not-made"
    for args, rc in (([], 2), (["--help"], 0), (["bogus", "-d", str(d)], 2)):
        p = subprocess.run(["bash", CLUSTER_SH, *args], capture_output=True, text=True, timeout=30)
        usage = "usage: cluster.sh start|stop|status" in p.stdout + p.stderr
        assert p.returncode == rc and usage, (args, p.returncode, p.stderr)
        assert "no cluster in" not in p.stderr
    p = subprocess.run(["bash", CLUSTER_SH, "status", "-d", str(d)], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 1 and "no cluster in" in p.stderr
    assert not os.path.exists(d)
