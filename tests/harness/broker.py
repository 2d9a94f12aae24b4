"""Starting and stopping brokers for tests and tools: Magnetar's binary or the reference Pulsar.

Both write a ports file with lines `brokerServicePort=N` and `webServicePort=M`, so callers see one
shape: a BrokerEndpoint with a pulsar:// service URL and an http:// admin URL. Standard library
only (tools/perf runs it with the system Python).
"""

from __future__ import annotations

import dataclasses
import os
import resource
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PULSAR_SCRIPT = os.path.join(REPO, "tools", "pulsar-reference", "pulsar-standalone.sh")
DEFAULT_MAGNETAR_BIN = os.path.join(REPO, "build", "src", "app", "magnetar")
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                     "WARNING: ThreadSanitizer")


class BrokerError(RuntimeError):
    """A broker did not start, or left a sanitizer report in its log."""


@dataclasses.dataclass
class BrokerEndpoint:
    kind: str  # "magnetar", "pulsar" or "external"
    service_url: str  # pulsar://host:port
    admin_url: str | None  # http://host:port, None when unknown
    log_path: str | None = None
    service_url_tls: str | None = None  # pulsar+ssl://localhost:port with brokerServicePortTls
    admin_url_tls: str | None = None  # https://localhost:port with webServicePortTls

    @property
    def port(self) -> int:
        """The binary-protocol port of service_url."""
        return int(self.service_url.rsplit(":", 1)[1])


def magnetar_bin() -> str:
    """$MAGNETAR_BIN (made absolute: the broker runs in its own directory), else
    build/src/app/magnetar under the repository."""
    return os.path.abspath(os.environ.get("MAGNETAR_BIN", DEFAULT_MAGNETAR_BIN))


def read_ports_file(path: str) -> dict[str, int]:
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


def tls_urls(ports: dict[str, int]) -> tuple[str | None, str | None]:
    """pulsar+ssl:// and https:// URLs (host localhost, the test certificates' name) of the TLS
    ports in a ports file, None for those absent."""
    b = ports.get("brokerServicePortTls")
    w = ports.get("webServicePortTls")
    return (f"pulsar+ssl://localhost:{b}" if b else None, f"https://localhost:{w}" if w else None)


def free_port() -> int:
    """A TCP port free right now on 127.0.0.1 (for brokers that cannot bind port 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_tcp(port: int, deadline: float) -> bool:
    """True once 127.0.0.1:port accepts a connection, False at time.time() >= deadline."""
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            time.sleep(0.1)
    return False


def tail(path: str, lines: int = 40) -> str:
    """The last lines of a log file, "(no log)" when it cannot be read."""
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return "(no log)"


def sanitizer_report(log_path: str, limit: int = 12000) -> str:
    """The broker log from the first sanitizer report on, "" when there is none."""
    try:
        with open(log_path, errors="replace") as f:
            text = f.read()
    except OSError:
        return ""
    hits = [i for i in (text.find(m) for m in SANITIZER_MARKERS) if i >= 0]
    return text[min(hits):][:limit] if hits else ""


def _preexec(nofile: int | None, cpus: set[int] | None) -> Callable[[], None] | None:
    if not nofile and not cpus:
        return None

    def setup() -> None:
        if nofile:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        if cpus:
            os.sched_setaffinity(0, cpus)
    return setup


# Whether MagnetarProcess.close() requires its SIGTERM to end in exit code 0. The integration
# suite turns it on (tests/integration/conftest.py); suites that pause or cut a broker off from
# ZooKeeper on purpose leave it off.
check_clean_exit = False


class MagnetarProcess:
    """`magnetar standalone` (or another mode) writing its ports to a file, in a working directory
    that outlives one process, so a test can stop, SIGKILL and start it again on the same data.

    settings: broker.conf KEY=VALUE pairs given with --set on every start (later ones win, so
    start(extra=...) overrides them). workdir: the caller's directory (kept), else a fresh
    temporary one that close() removes (unless KEEP_BROKER_DIR is set). data_in_workdir: also
    set journalDirectory and metadataStoreUrl under the working directory. args: further command
    line arguments after the settings. nofile: RLIMIT_NOFILE of the broker; cpus: its CPU affinity.
    """

    def __init__(self, settings: Iterable[str] = (), *, workdir: str | None = None,
                 binary: str | None = None, mode: str = "standalone",
                 data_in_workdir: bool = True, args: Iterable[str] = (),
                 nofile: int | None = None, cpus: set[int] | None = None,
                 log_name: str = "magnetar.log", ports_name: str = "ports",
                 prefix: str = "magnetar-test-") -> None:
        self.binary = binary or magnetar_bin()
        self.settings = list(settings)
        self.mode = mode
        self.data_in_workdir = data_in_workdir
        self.args = list(args)
        self.nofile = nofile
        self.cpus = cpus
        self.owns_workdir = workdir is None
        self.workdir = workdir if workdir is not None else tempfile.mkdtemp(prefix=prefix)
        self.log_path = os.path.join(self.workdir, log_name)
        self.ports_file = os.path.join(self.workdir, ports_name)
        self.proc: subprocess.Popen[bytes] | None = None
        self.endpoint: BrokerEndpoint | None = None
        self.ports: dict[str, int] = {}

    def command(self, port: int = 0, extra: Iterable[str] = ()) -> list[str]:
        settings = [f"brokerServicePort={port}", "webServicePort=0"]
        if self.data_in_workdir:
            settings += [f"journalDirectory={self.workdir}/journal",
                         f"metadataStoreUrl=rocksdb:{self.workdir}/metadata"]
        settings += self.settings + list(extra)
        cmd = [self.binary, self.mode, "--ports-file", self.ports_file]
        for kv in settings:
            cmd += ["--set", kv]
        return cmd + self.args

    def start(self, port: int = 0, extra: Iterable[str] = (), timeout_s: float = 30.0,
              wait_serving: bool = True) -> BrokerEndpoint:
        """Starts the broker (binary port `port`, 0 = a free one) and returns its endpoint once
        the ports file is written and, with wait_serving, the binary port accepts connections.
        Raises BrokerError (with the log's tail) when it exits or does not serve in time."""
        if not os.access(self.binary, os.X_OK):
            raise BrokerError(
                f"magnetar binary not found at {self.binary}: build it or set MAGNETAR_BIN")
        if os.path.exists(self.ports_file):
            os.remove(self.ports_file)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.command(port, extra), cwd=self.workdir, stdout=log,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                preexec_fn=_preexec(self.nofile, self.cpus))
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise BrokerError(f"magnetar exited with {self.proc.returncode} during start:\n"
                                  f"{tail(self.log_path)}")
            ports = read_ports_file(self.ports_file)
            if "brokerServicePort" in ports and "webServicePort" in ports:
                if not wait_serving or wait_tcp(ports["brokerServicePort"], deadline):
                    self.ports = ports
                    self.endpoint = BrokerEndpoint(
                        "magnetar", f"pulsar://127.0.0.1:{ports['brokerServicePort']}",
                        f"http://127.0.0.1:{ports['webServicePort']}", self.log_path,
                        *tls_urls(ports))
                    return self.endpoint
            time.sleep(0.05)
        self.kill()
        raise BrokerError(f"magnetar did not serve within {timeout_s} s:\n{tail(self.log_path)}")

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    @property
    def port(self) -> int:
        assert self.endpoint, "not started"
        return self.endpoint.port

    @property
    def admin_url(self) -> str:
        assert self.endpoint and self.endpoint.admin_url, "not started"
        return self.endpoint.admin_url

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 15.0) -> int | None:
        """Sends sig and waits up to timeout_s for the exit; SIGKILL after that. Returns the exit
        status (negative: the signal), None when it was not started."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL (a crash: nothing is flushed) and reap."""
        if self.running():
            assert self.proc
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def restart(self, **start_args: object) -> BrokerEndpoint:
        self.stop()
        return self.start(**start_args)  # type: ignore[arg-type]

    def close(self) -> None:
        """Stops the broker with SIGTERM, removes a working directory made here; raises
        BrokerError if the log holds a sanitizer report (ASan/UBSan/TSan builds), or, with
        check_clean_exit, if that SIGTERM did not end in a clean exit 0 (every thread joined; a
        heap corrupted earlier in the run aborts at thread exit) within the stop timeout."""
        exit_code = None
        if self.running():
            exit_code = self.stop(timeout_s=60.0)
        report = sanitizer_report(self.log_path)
        log_tail = tail(self.log_path, 20) if exit_code not in (None, 0) else ""
        if self.owns_workdir and not os.environ.get("KEEP_BROKER_DIR"):
            shutil.rmtree(self.workdir, ignore_errors=True)
        if report:
            raise BrokerError(f"sanitizer report in the broker's log:\n{report}")
        if check_clean_exit and exit_code not in (None, 0):
            raise BrokerError(f"magnetar exited with {exit_code} on SIGTERM (0 expected):\n"
                              f"{log_tail}")

    def __enter__(self) -> MagnetarProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PulsarReferenceProcess:
    """Apache Pulsar standalone started by tools/pulsar-reference/pulsar-standalone.sh.

    workdir: the run directory (kept), else a fresh temporary one close() removes. java_opts: JVM
    options; cpus: the CPU affinity of the script and, once started, of all the JVM's threads.
    broker_port, web_port: fixed ports (0: free ones). health_token: the super-user token of the
    start script's health check when authorization is on and the broker's own client has none."""

    def __init__(self, settings: Iterable[str] = (), *, workdir: str | None = None,
                 java_opts: str = "", cpus: set[int] | None = None,
                 start_log: str | None = None, broker_port: int = 0, web_port: int = 0,
                 health_token: str | None = None) -> None:
        self.settings = list(settings)
        self.broker_port = broker_port
        self.web_port = web_port
        self.health_token = health_token
        self.java_opts = java_opts
        self.cpus = cpus
        self.owns_workdir = workdir is None
        self.workdir = workdir if workdir is not None else tempfile.mkdtemp(
            prefix="pulsar-ref-test-")
        self.start_log = start_log
        self.log_path = os.path.join(self.workdir, "logs", "pulsar.log")
        self.pid: int | None = None
        self.endpoint: BrokerEndpoint | None = None

    def command(self, timeout_s: float) -> list[str]:
        cmd = ["bash", PULSAR_SCRIPT, "start", "-d", self.workdir, "-p", str(self.broker_port),
               "-w", str(self.web_port), "--wipe", "--timeout", str(int(timeout_s))]
        if self.health_token:
            cmd += ["--health-token", self.health_token]
        for kv in self.settings:
            cmd += ["--set", kv]
        if self.java_opts.strip():
            cmd += ["--java-opts", self.java_opts.strip()]
        return cmd

    def start(self, timeout_s: float = 300.0) -> BrokerEndpoint:
        """Starts Pulsar (the script waits for it to serve); raises BrokerError on failure."""
        os.makedirs(self.workdir, exist_ok=True)
        out = subprocess.PIPE if self.start_log is None else open(self.start_log, "wb")
        try:
            res = subprocess.run(self.command(timeout_s), stdout=out, stderr=subprocess.STDOUT,
                                 preexec_fn=_preexec(None, self.cpus))
        finally:
            if self.start_log is not None:
                out.close()  # type: ignore[union-attr]
        if res.returncode != 0:
            shown = res.stdout.decode(errors="replace") if res.stdout else f"see {self.start_log}"
            raise BrokerError(f"reference Pulsar failed to start ({res.returncode}):\n{shown}\n"
                              f"{tail(self.log_path)}")
        try:
            with open(os.path.join(self.workdir, "pulsar.pid")) as f:
                self.pid = int(f.read().strip())
        except (OSError, ValueError):
            self.pid = None
        if self.cpus and self.pid:  # the JVM's threads were started by now: pin them all
            subprocess.call(["taskset", "-a", "-cp", ",".join(map(str, sorted(self.cpus))),
                             str(self.pid)], stdout=subprocess.DEVNULL)
        ports = read_ports_file(os.path.join(self.workdir, "ports"))
        for kv in self.settings:  # TLS ports are given, not picked, for Pulsar
            key, _, value = kv.partition("=")
            if key in ("brokerServicePortTls", "webServicePortTls") and value.isdigit():
                ports[key] = int(value)
        self.endpoint = BrokerEndpoint(
            "pulsar", f"pulsar://127.0.0.1:{ports['brokerServicePort']}",
            f"http://127.0.0.1:{ports['webServicePort']}", self.log_path, *tls_urls(ports))
        return self.endpoint

    def stop(self) -> None:
        subprocess.run(["bash", PULSAR_SCRIPT, "stop", "-d", self.workdir],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def close(self) -> None:
        self.stop()
        if self.owns_workdir and not os.environ.get("KEEP_BROKER_DIR"):
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> PulsarReferenceProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def broker_process(kind: str, settings: Iterable[str] = ()
                   ) -> MagnetarProcess | PulsarReferenceProcess:
    """A not yet started broker of kind "magnetar" or "pulsar" with the given settings."""
    if kind == "magnetar":
        return MagnetarProcess(settings, prefix="magnetar-diff-")
    if kind == "pulsar":
        return PulsarReferenceProcess(settings)
    raise ValueError(f"unknown broker kind {kind!r}")


def restartable_magnetar(workdir: str, settings: Iterable[str] = ()) -> MagnetarProcess:
    """A MagnetarProcess on the caller's data directory (the broker's default paths under it) with
    journalSyncData=true, for tests that SIGKILL it and start it again, on the same binary port
    with start(port=broker.port) so clients reconnect."""
    return MagnetarProcess(["journalSyncData=true", *settings], workdir=workdir,
                           data_in_workdir=False)
