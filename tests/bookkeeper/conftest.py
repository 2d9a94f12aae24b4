"""A real BookKeeper cluster for this directory's tests: one ZooKeeper and 3 bookies of BookKeeper
4.17 (scripts/bookies.sh, jars from Maven Central via tools/bookkeeper/pom.xml), started once per
test session on free loopback ports and stopped at the end. Its bookies queue at most
BOOKIE_ADD_QUEUE ADDs (maxPendingAddRequestsPerThread, 10,000 by default) and refuse more with
ETOOMANYREQUESTS, so that a burst of a few thousand adds meets that refusal for sure. They serve
BookKeeper's admin REST API (--http), so that a test can turn one read-only (`bookies.sh
readonly I`)."""

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BOOKIES_SH = os.path.join(REPO, "scripts", "bookies.sh")
BOOKIE_ADD_QUEUE = 100


def magnetar_bin() -> str:
    return os.path.abspath(
        os.environ.get("MAGNETAR_BIN", os.path.join(REPO, "build", "src", "app", "magnetar"))
    )


class Cluster:
    def __init__(self, directory: str, uri: str) -> None:
        self.dir = directory
        self.uri = uri

    def magnetar(self, *args: str, timeout: float = 60) -> tuple[int, str, str]:
        """`magnetar bookkeeper --metadata-service-uri URI ARGS`: (rc, stdout, stderr)."""
        p = subprocess.run(
            [
                magnetar_bin(),
                "--log-level",
                "warn",
                "bookkeeper",
                "--metadata-service-uri",
                self.uri,
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        return p.returncode, p.stdout, p.stderr

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
