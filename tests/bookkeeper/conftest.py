"""A real BookKeeper cluster for this directory's tests: one ZooKeeper and 3 bookies of BookKeeper
4.17 (scripts/bookies.sh, jars from Maven Central via tools/bookkeeper/pom.xml), started once per
test session on free loopback ports and stopped at the end. Its bookies queue at most
BOOKIE_ADD_QUEUE ADDs (maxPendingAddRequestsPerThread, 10,000 by default) and refuse more with
ETOOMANYREQUESTS, so that a burst of a few thousand adds meets that refusal for sure. They serve
BookKeeper's admin REST API (--http), so that a test can turn one read-only (`bookies.sh
readonly I`)."""

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BOOKIES_SH = os.path.join(REPO, "scripts", "bookies.sh")
BOOKIE_ADD_QUEUE = 100
# The quorums most tests write with: ensemble 3, write quorum 2, ack quorum 2 (bench, simpletest).
BENCH_QUORUMS = ("-e", "3", "-w", "2", "-a", "2")
SIMPLETEST_QUORUMS = ("-ensemble", "3", "-writeQuorum", "2", "-ackQuorum", "2")


def magnetar_bin() -> str:
    return os.path.abspath(
        os.environ.get("MAGNETAR_BIN", os.path.join(REPO, "build", "src", "app", "magnetar"))
    )


@contextlib.contextmanager
def cluster_brokers(bk_cluster: "Cluster", cluster: str, make: Callable[[str, int], Any], n: int,
                    prefix: str) -> Iterator[list[Any]]:
    """Every bookie up (earlier tests kill bookies), metadata of `cluster` initialised, then n
    brokers make(directory, i) (started) until each registered: yields them; they are stopped
    and their directory removed afterwards."""
    bk_cluster.start_bookies()
    bk_cluster.init_cluster_metadata(cluster)
    base = tempfile.mkdtemp(prefix=prefix)
    brokers: list[Any] = []
    try:
        brokers.extend(make(base, i) for i in range(n))
        for b in brokers:
            b.wait_registered()
        yield brokers
    finally:
        for b in brokers:
            b.stop()
        shutil.rmtree(base, ignore_errors=True)


def wait_registered(proc: subprocess.Popen, log_path: str, ports_file: str) -> dict[str, int]:
    """Until the `magnetar broker` process `proc` has written its ports file and logged
    "Registered in the cluster" (30 s): its ports (brokerServicePort, webServicePort, ...). Fails
    the test with the log's tail when it exits or does not join."""
    for _ in range(300):
        assert proc.poll() is None, open(log_path).read()[-3000:]
        if os.path.exists(ports_file) and "Registered in the cluster" in open(log_path).read():
            with open(ports_file) as f:
                return {k: int(v) for k, v in (line.strip().split("=", 1) for line in f
                                                if "=" in line)}
        time.sleep(0.1)
    raise AssertionError("broker did not join: " + open(log_path).read()[-3000:])


def broker_urls(ports: dict[str, int]) -> tuple[str, str]:
    """(pulsar://, http://) URLs on 127.0.0.1 of a broker's ports file."""
    return (f"pulsar://127.0.0.1:{ports['brokerServicePort']}",
            f"http://127.0.0.1:{ports['webServicePort']}")


def stop_process(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 20) -> None:
    """Sends `sig` unless proc has exited; SIGKILL after `timeout` seconds."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Cluster:
    def __init__(self, directory: str, uri: str) -> None:
        self.dir = directory
        self.uri = uri

    @property
    def zk(self) -> str:
        """The ZooKeeper of the bookies' metadata, HOST:PORT (from zk://HOST:PORT/ledgers)."""
        return self.uri.removeprefix("zk://").split("/", 1)[0]

    def command(self, *args: str) -> list[str]:
        """The command line `magnetar bookkeeper --metadata-service-uri URI ARGS` (warn logs)."""
        return [magnetar_bin(), "--log-level", "warn", "bookkeeper",
                "--metadata-service-uri", self.uri, *args]

    def magnetar(self, *args: str, timeout: float = 60) -> tuple[int, str, str]:
        """`magnetar bookkeeper --metadata-service-uri URI ARGS`: (rc, stdout, stderr)."""
        p = subprocess.run(self.command(*args), capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr

    def simpletest(self, entries: int, *args: str) -> tuple[int, str, str]:
        """`simpletest` of `entries` entries with ensemble 3, write and ack quorum 2 (ARGS:
        more flags): (rc, stdout, stderr)."""
        return self.magnetar("simpletest", *SIMPLETEST_QUORUMS, "-numEntries", str(entries),
                             *args)

    def start_bookies(self, n: int = 3) -> None:
        """`bookies.sh start -n N`: bookies 0..N-1 up (running ones stay, stopped or killed ones
        start again; tests kill bookies, later ones start them first)."""
        p = subprocess.run(["bash", BOOKIES_SH, "start", "-n", str(n), "-d", self.dir],
                           capture_output=True, text=True, timeout=180)
        assert p.returncode == 0, p.stderr[-2000:]

    def init_cluster_metadata(self, cluster: str, metadata_store: str | None = None) -> None:
        """`magnetar initialize-cluster-metadata` of `cluster` on metadata_store (default this
        ZooKeeper, zk:HOST:PORT) with placeholder service URLs; fails the test when refused."""
        init = subprocess.run(
            [magnetar_bin(), "initialize-cluster-metadata", "--cluster", cluster,
             "--metadata-store", metadata_store or f"zk:{self.zk}",
             "--web-service-url", "http://127.0.0.1:8080",
             "--broker-service-url", "pulsar://127.0.0.1:6650"],
            capture_output=True, text=True, timeout=60)
        assert init.returncode == 0, init.stdout + init.stderr

    def shell(self, *args: str, timeout: float = 120) -> tuple[int, str]:
        """BookKeeper's own `bookkeeper shell ARGS` (bookies.sh shows its INFO logs, where it
        prints, by default): (rc, output)."""
        env = {k: v for k, v in os.environ.items() if k != "BK_LOGLEVEL"}
        p = subprocess.run(
            ["bash", BOOKIES_SH, "shell", "-d", self.dir, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
            env=env,
        )
        return p.returncode, p.stdout

    def java_write_ledger(
        self, ensemble: int, write_quorum: int, ack_quorum: int, entries: int, timeout: float = 120
    ) -> int:
        """tools/bookkeeper/src/WriteLedger.java (BookKeeper's Java client): the ledger id."""
        cp_file = os.path.join(REPO, "tools", "bookkeeper", "target", "bk.classpath")
        with open(cp_file) as f:
            cp = f.read().strip()
        p = subprocess.run(
            [
                "java",
                "-Xmx256m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                f"-Dlog4j2.configurationFile={self.dir}/log4j2.properties",
                "-cp",
                cp,
                os.path.join(REPO, "tools", "bookkeeper", "src", "WriteLedger.java"),
                self.uri,
                str(ensemble),
                str(write_quorum),
                str(ack_quorum),
                str(entries),
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert p.returncode == 0, p.stderr[-2000:]
        words = p.stdout.split()
        assert words[0] == "ledger", p.stdout
        return int(words[1])


@pytest.fixture(scope="session")
def bk_cluster() -> Iterator[Cluster]:
    if shutil.which("java") is None:
        pytest.skip("java not installed (scripts/install-test-deps.sh)")
    directory = tempfile.mkdtemp(prefix="magnetar-bk-")
    p = subprocess.run(
        [
            "bash",
            BOOKIES_SH,
            "start",
            "-n",
            "3",
            "-d",
            directory,
            "--conf",
            f"maxPendingAddRequestsPerThread={BOOKIE_ADD_QUEUE}",
            "--http",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    try:
        assert p.returncode == 0, p.stderr[-3000:]
        uri = p.stdout.strip().splitlines()[-1]
        assert uri.startswith("zk://127.0.0.1:") and uri.endswith("/ledgers"), uri
        yield Cluster(directory, uri)
    finally:
        subprocess.run(
            ["bash", BOOKIES_SH, "stop", "-d", directory], capture_output=True, timeout=60
        )
        shutil.rmtree(directory, ignore_errors=True)
