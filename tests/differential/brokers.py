"""Starting and stopping the broker under test: Magnetar's binary or the reference Apache Pulsar.

Both write a ports file with lines `brokerServicePort=N` and `webServicePort=M`, so the rest of the
suite sees one shape: a BrokerEndpoint with a pulsar:// service URL and an http:// admin URL.
"""

import dataclasses
import os
import shutil
import socket
import subprocess
import tempfile
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PULSAR_SCRIPT = os.path.join(REPO, "tools", "pulsar-reference", "pulsar-standalone.sh")
DEFAULT_MAGNETAR_BIN = os.path.join(REPO, "build", "src", "app", "magnetar")


@dataclasses.dataclass
class BrokerEndpoint:
    kind: str  # "magnetar", "pulsar" or "external"
    service_url: str  # pulsar://host:port
    admin_url: str | None  # http://host:port, None when unknown
    log_path: str | None = None


def read_ports_file(path):
    """Returns {key: int} from a `key=value` ports file, {} while it is missing or partial."""
    ports = {}
    try:
        with open(path) as f:
            for line in f:
                key, sep, value = line.strip().partition("=")
                if sep and value.isdigit():
                    ports[key] = int(value)
    except FileNotFoundError:
        pass
    return ports


def wait_tcp(port, deadline):
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            time.sleep(0.1)
    return False


def tail(path, lines=40):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return "(no log)"


SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                     "WARNING: ThreadSanitizer")


def sanitizer_report(log_path, limit=12000):
    """The broker log from the first sanitizer report on, "" when there is none."""
    try:
        with open(log_path, errors="replace") as f:
            text = f.read()
    except OSError:
        return ""
    hits = [i for i in (text.find(m) for m in SANITIZER_MARKERS) if i >= 0]
    return text[min(hits):][:limit] if hits else ""


class MagnetarProcess:
    """`magnetar standalone` on free ports in a temporary working directory."""

    def __init__(self, binary=None, extra_settings=()):
        self.binary = binary or os.environ.get("MAGNETAR_BIN", DEFAULT_MAGNETAR_BIN)
        self.extra_settings = list(extra_settings)
        self.workdir = None
        self.proc = None

    def start(self, timeout_s=30):
        if not os.access(self.binary, os.X_OK):
            raise RuntimeError(
                f"magnetar binary not found at {self.binary}: build it or set MAGNETAR_BIN"
            )
        self.workdir = tempfile.mkdtemp(prefix="magnetar-diff-")
        ports_file = os.path.join(self.workdir, "ports")
        log_path = os.path.join(self.workdir, "magnetar.log")
        cmd = [
            self.binary, "standalone",
            "--set", "brokerServicePort=0",
            "--set", "webServicePort=0",
            "--ports-file", ports_file,
            "--set", f"journalDirectory={self.workdir}/journal",
            "--set", f"metadataStoreUrl=rocksdb:{self.workdir}/metadata",
        ]
        for kv in self.extra_settings:
            cmd += ["--set", kv]
        with open(log_path, "wb") as log:
            self.proc = subprocess.Popen(
                cmd, cwd=self.workdir, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"magnetar exited with {self.proc.returncode} during start:\n{tail(log_path)}"
                )
            ports = read_ports_file(ports_file)
            if "brokerServicePort" in ports and "webServicePort" in ports:
                if wait_tcp(ports["brokerServicePort"], deadline):
                    return BrokerEndpoint(
                        "magnetar",
                        f"pulsar://127.0.0.1:{ports['brokerServicePort']}",
                        f"http://127.0.0.1:{ports['webServicePort']}",
                        log_path,
                    )
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"magnetar did not serve within {timeout_s} s:\n{tail(log_path)}")

    def stop(self):
        """Stops the broker; raises if its log holds a sanitizer report (ASan/UBSan/TSan build)."""
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        report = sanitizer_report(os.path.join(self.workdir, "magnetar.log")) if self.workdir else ""
        if self.workdir and not os.environ.get("KEEP_BROKER_DIR"):
            shutil.rmtree(self.workdir, ignore_errors=True)
        if report:
            raise RuntimeError(f"sanitizer report in the broker's log:\n{report}")


class PulsarReferenceProcess:
    """Apache Pulsar standalone started by tools/pulsar-reference/pulsar-standalone.sh."""

    def __init__(self, extra_settings=()):
        self.extra_settings = list(extra_settings)
        self.run_dir = None

    def start(self, timeout_s=300):
        self.run_dir = tempfile.mkdtemp(prefix="pulsar-ref-diff-")
        cmd = [PULSAR_SCRIPT, "start", "-d", self.run_dir, "-p", "0", "-w", "0", "--wipe",
               "--timeout", str(timeout_s)]
        for kv in self.extra_settings:
            cmd += ["--set", kv]
        res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if res.returncode != 0:
            log = os.path.join(self.run_dir, "logs", "pulsar.log")
            raise RuntimeError(f"reference Pulsar failed to start:\n{res.stdout}\n{tail(log)}")
        ports = read_ports_file(os.path.join(self.run_dir, "ports"))
        return BrokerEndpoint(
            "pulsar",
            f"pulsar://127.0.0.1:{ports['brokerServicePort']}",
            f"http://127.0.0.1:{ports['webServicePort']}",
            os.path.join(self.run_dir, "logs", "pulsar.log"),
        )

    def stop(self):
        if self.run_dir:
            subprocess.run([PULSAR_SCRIPT, "stop", "-d", self.run_dir],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if not os.environ.get("KEEP_BROKER_DIR"):
                shutil.rmtree(self.run_dir, ignore_errors=True)
