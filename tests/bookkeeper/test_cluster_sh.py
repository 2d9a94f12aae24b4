"""`scripts/cluster.sh start --bookies 3`: ZooKeeper, 3 bookies and 2 brokers whose topics are on
the bookies (bookkeeperMetadataServiceUri); `status` lists `bookie pid port -`; `stop` ends every
process; the brokers' storage metrics are not zero on BookKeeper. A cluster of its own (not
conftest's), ports from MAGNETAR_CLUSTER_SH_PORT_BASE (default: free ones)."""

import base64
import os
import re
import shutil
import subprocess
import tempfile
import time
import uuid

import pulsar
import pytest
import requests
from conftest import REPO, magnetar_bin

CLUSTER_SH = os.path.join(REPO, "scripts", "cluster.sh")
PORT_BASE = os.environ.get("MAGNETAR_CLUSTER_SH_PORT_BASE", "")


def cluster_sh(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", CLUSTER_SH, *args], capture_output=True, text=True,
                          timeout=timeout)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return not re.search(r"^State:\s*Z", f.read(), re.M)
    except FileNotFoundError:
        return False


def test_cluster_sh_starts_bookies_and_brokers_store_topics_on_them():
    if shutil.which("java") is None:
        pytest.skip("java not installed (scripts/install-test-deps.sh)")
    d = tempfile.mkdtemp(prefix="magnetar-cluster-sh-")
    ports = ["--port-base", PORT_BASE] if PORT_BASE else []
    started = False
    try:
        r = cluster_sh("start", "-d", d, "--bookies", "3", "--brokers", "2",
                       "--session-timeout-ms", "4000", "--tick-ms", "500", *ports)
        started = True
        assert r.returncode == 0, r.stderr[-3000:]
        out = dict(line.split(" ", 1) for line in r.stdout.splitlines())
        bk_uri = out["bookkeeperMetadataServiceUri"]
        assert re.fullmatch(r"zk://127\.0\.0\.1:\d+/ledgers", bk_uri), bk_uri

        st = cluster_sh("status", "-d", d)
        assert st.returncode == 0, st.stderr
        lines = [line.split() for line in st.stdout.splitlines()]
        kinds = [w[0] for w in lines]
        assert kinds.count("zookeeper") == 1 and kinds.count("broker") == 2, st.stdout
        bookies = [w for w in lines if w[0] == "bookie"]
        assert len(bookies) == 3, st.stdout
        for w in bookies:
            assert len(w) == 4 and w[3] == "-" and alive(int(w[1])), w
        if PORT_BASE:
            assert sorted(int(w[2]) for w in bookies) == [int(PORT_BASE) + 100 + i
                                                           for i in range(3)]
        pids = [int(w[1]) for w in lines]

        # A topic written through the brokers lives in a BookKeeper ledger with Pulsar's metadata.
        name = f"csh-{uuid.uuid4().hex[:8]}"
        topic = f"persistent://public/default/{name}"
        client = pulsar.Client(out["serviceUrl"], operation_timeout_seconds=30,
                               logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
        try:
            consumer = client.subscribe(topic, "s")
            client.create_producer(topic).send(b"on-bookies")
            assert consumer.receive(timeout_millis=10000).data() == b"on-bookies"  # not acked
            web = out["webServiceUrls"].split()[0]
            owner = requests.get(f"{web}/lookup/v2/topic/persistent/public/default/{name}",
                                 timeout=10).json()["httpUrl"]
            # The storage metrics of a broker on BookKeeper: the entry cache holds the unacked
            # entry, the topic's stored bytes are counted.
            metrics = requests.get(f"{owner}/metrics", timeout=10).text
            cache = re.search(r"^pulsar_ml_cache_used_size\{[^}]*\} (\S+)$", metrics, re.M)
            assert cache and float(cache.group(1)) > 0, metrics[-2000:]
            size = re.search(rf'^pulsar_storage_size\{{[^}}]*topic="{topic}"[^}}]*\}} (\S+)$',
                             metrics, re.M)
            assert size and float(size.group(1)) > 0, [m for m in metrics.splitlines()
                                                       if "pulsar_storage_size" in m]
            # Acks go to the cursor's own ledger after the first (Pulsar's flow), which
            # internalStats names with its last entry, and which carries Pulsar's metadata.
            producer = client.create_producer(topic, batching_enabled=False)
            internal = f"{owner}/admin/v2/persistent/public/default/{name}/internalStats"
            deadline = time.monotonic() + 20
            cursor = {}
            while time.monotonic() < deadline:
                producer.send(b"acked")
                consumer.acknowledge(consumer.receive(timeout_millis=10000))
                cursor = requests.get(internal, timeout=10).json()["cursors"]["s"]
                if cursor["cursorLedger"] >= 0:
                    break
                time.sleep(0.2)
            assert cursor["cursorLedger"] >= 0 and cursor["cursorLedgerLastEntry"] >= 0, cursor
            p = subprocess.run([magnetar_bin(), "--log-level", "warn", "bookkeeper",
                                "--metadata-service-uri", bk_uri, "ledgermetadata", "-ledgerid",
                                str(cursor["cursorLedger"])],
                               capture_output=True, text=True, timeout=60)
            assert p.returncode == 0 and "pulsar/cursor=" in p.stdout, p.stdout + p.stderr
        finally:
            client.close()
        stats = requests.get(f"{owner}/admin/v2/persistent/public/default/{name}/internalStats",
                             timeout=10).json()
        ledger = stats["ledgers"][-1]["ledgerId"]
        p = subprocess.run([magnetar_bin(), "--log-level", "warn", "bookkeeper",
                            "--metadata-service-uri", bk_uri, "ledgermetadata", "-ledgerid",
                            str(ledger)], capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        encoded = base64.b64encode(f"public/default/persistent/{name}".encode()).decode()
        assert f"pulsar/managed-ledger=base64:{encoded}" in p.stdout, p.stdout
        assert "ensembleSize=2, writeQuorumSize=2, ackQuorumSize=2" in p.stdout, p.stdout

        assert cluster_sh("stop", "-d", d).returncode == 0
        started = False
        assert cluster_sh("status", "-d", d).returncode == 1
        assert not [pid for pid in pids if alive(pid)]
    finally:
        if started:
            cluster_sh("stop", "-d", d)
        shutil.rmtree(d, ignore_errors=True)
