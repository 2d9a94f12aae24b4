"""End to end: the `magnetar` binary's configuration, I/O threads, HTTP routes and stop.

Runs the built binary (env MAGNETAR_BIN, default build/src/app/magnetar under the repository
root) on ports 0 in a temporary working directory. Standard library + pytest only.
"""

import json
import os
import pathlib
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from harness.broker import BrokerError, MagnetarProcess

REPO = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(os.environ.get("MAGNETAR_BIN", REPO / "build" / "src" / "app" / "magnetar"))
START_TIMEOUT = 15.0


def run_cli(*args, cwd=None):
    return subprocess.run([str(BIN), *args], cwd=cwd, capture_output=True, text=True, timeout=30)


class Broker(MagnetarProcess):
    """A `magnetar standalone` process started on ports 0 in its own directory."""

    def __init__(self, workdir: pathlib.Path, *args: str, mode: str = "standalone") -> None:
        super().__init__(["bindAddress=127.0.0.1"], workdir=str(workdir), binary=str(BIN),
                         mode=mode, data_in_workdir=False, args=args, ports_name="ports.txt")
        try:
            self.start(timeout_s=START_TIMEOUT, wait_serving=False)
        except BrokerError as e:
            pytest.fail(str(e))

    def log(self) -> str:
        return pathlib.Path(self.log_path).read_text()

    def url(self, path):
        return f"http://127.0.0.1:{self.ports['webServicePort']}{path}"

    def get(self, path):
        """Returns (status, content type, body) without raising on 4xx/5xx."""
        try:
            with urllib.request.urlopen(self.url(path), timeout=10) as r:
                return r.status, r.headers.get("Content-Type"), r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get("Content-Type"), e.read().decode()

    def thread_names(self):
        names = []
        for comm in pathlib.Path(f"/proc/{self.proc.pid}/task").glob("*/comm"):
            try:
                names.append(comm.read_text().strip())
            except FileNotFoundError:
                pass  # a thread that just exited
        return names

    def io_threads(self):
        """The pulsar-io thread names, once they are set and stable (the loops name themselves as
        they start, which a sanitized build can make later than the ports file)."""
        deadline = time.time() + 10
        last = None
        while True:
            names = sorted(n for n in self.thread_names() if n.startswith("pulsar-io-"))
            if (names and names == last) or time.time() > deadline:
                return names
            last = names
            time.sleep(0.1)



@pytest.fixture
def brokers():
    started = []
    yield lambda *a, **kw: started.append(Broker(*a, **kw)) or started[-1]
    for b in started:
        b.kill()


@pytest.fixture(autouse=True, scope="session")
def binary_exists():
    if not BIN.exists():
        pytest.fail(f"magnetar binary not found at {BIN}; build it or set MAGNETAR_BIN")


def test_config_show_prints_sorted_effective_configuration():
    r = run_cli("config", "show", "--available-processors", "16")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    keys = [l.split("=", 1)[0] for l in lines]
    assert keys == sorted(keys)
    values = dict(l.split("=", 1) for l in lines)
    assert values["numIOThreads"] == "8"
    assert values["brokerServicePort"] == "6650"
    assert values["webServicePort"] == "8080"

    r = run_cli("config", "show", "--available-processors", "16", "--set", "numIOThreads=12")
    assert r.returncode == 0, r.stderr
    assert "numIOThreads=12" in r.stdout.splitlines()

    r = run_cli("config", "show", "--available-processors", "128")
    assert "numIOThreads=64" in r.stdout.splitlines()


@pytest.mark.parametrize("value", ["abc", "-2", "99999"])
def test_config_show_rejects_bad_value_naming_the_key(value):
    r = run_cli("config", "show", "--set", f"numIOThreads={value}")
    assert r.returncode != 0
    assert "numIOThreads" in r.stderr
    assert f"'{value}'" in r.stderr
    assert r.stdout == ""


def test_configured_io_threads_http_routes_and_sigterm(tmp_path, brokers):
    b = brokers(tmp_path, "--set", "numIOThreads=3")
    assert b.io_threads() == ["pulsar-io-0", "pulsar-io-1", "pulsar-io-2"]
    assert "pulsar-web" in b.thread_names()
    log = b.log()
    assert "Running 3 I/O threads (pulsar-io): 3, configured" in log
    assert (f"magnetar listening: brokerServicePort={b.ports['brokerServicePort']} "
            f"webServicePort={b.ports['webServicePort']}") in log

    status, ctype, body = b.get("/admin/v2/brokers/health")
    assert (status, body) == (200, "ok")
    assert ctype.startswith("text/plain")

    status, ctype, body = b.get("/admin/v2/brokers/configuration/runtime")
    assert status == 200 and ctype.startswith("application/json")
    runtime = json.loads(body)
    assert all(isinstance(v, str) for v in runtime.values())
    assert runtime["numIOThreads"] == "3"
    assert runtime["clusterName"] == "standalone"
    assert runtime["bindAddress"] == "127.0.0.1"
    shown = run_cli("config", "show", "--set", "numIOThreads=3", "--set", "brokerServicePort=0",
                    "--set", "webServicePort=0", "--set", "bindAddress=127.0.0.1")
    assert set(runtime) == {l.split("=", 1)[0] for l in shown.stdout.splitlines()}

    status, ctype, body = b.get("/admin/v2/no/such/route")
    assert status == 404
    assert ctype.startswith("application/json")
    assert "reason" in json.loads(body)

    # The binary-protocol port speaks the protocol: a frame that is not a command closes only
    # that connection, and the broker keeps serving.
    with socket.create_connection(("127.0.0.1", b.ports["brokerServicePort"]), timeout=5) as s:
        s.sendall(b"\x00\x00\x00\x08\x00\x00\x00\x04abcd")
        assert s.recv(1) == b""  # closed by the broker
    with socket.create_connection(("127.0.0.1", b.ports["brokerServicePort"]), timeout=5) as s:
        s.settimeout(0.3)
        with pytest.raises(socket.timeout):
            s.recv(1)  # a fresh connection is held open, waiting for CONNECT

    assert b.stop(signal.SIGTERM) == 0
    assert "Stopped" in b.log()


def test_default_io_threads_for_16_available_processors_and_sigint(tmp_path, brokers):
    b = brokers(tmp_path, "--available-processors", "16")
    assert len(b.io_threads()) == 8
    assert ("Running 8 I/O threads (pulsar-io): 8, the default for 16 available processors"
            in b.log())
    assert b.stop(signal.SIGINT) == 0


def test_standalone_reads_conf_standalone_conf_from_working_directory(tmp_path, brokers):
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "standalone.conf").write_text(
        "# local test config\n\nnumIOThreads=2\nclusterName=from-file\nfutureKey=1\n")
    b = brokers(tmp_path)
    assert b.io_threads() == ["pulsar-io-0", "pulsar-io-1"]
    assert "conf/standalone.conf:5: unknown key 'futureKey' (ignored)" in b.log()
    _, _, body = b.get("/admin/v2/brokers/configuration/runtime")
    assert json.loads(body)["clusterName"] == "from-file"
    assert b.stop() == 0


def test_set_overrides_config_file(tmp_path, brokers):
    cfg = tmp_path / "my.conf"
    cfg.write_text("numIOThreads=5\n")
    b = brokers(tmp_path, "--config", str(cfg), "--set", "numIOThreads=4")
    assert len(b.io_threads()) == 4
    assert b.stop() == 0


@pytest.mark.parametrize("line,reason", [
    ("numIOThreads=-2", "below the minimum 0"),
    ("numIOThreads=abc", "not an integer"),
    ("maxMessageSize=0", "below the minimum 1"),
])
def test_bad_config_value_exits_before_listening(tmp_path, line, reason):
    cfg = tmp_path / "bad.conf"
    cfg.write_text("# first line\n" + line + "\n")
    ports = tmp_path / "ports.txt"
    key, value = line.split("=", 1)
    r = subprocess.run([str(BIN), "standalone", "--config", str(cfg), "--ports-file", str(ports),
                        "--set", "brokerServicePort=0", "--set", "webServicePort=0"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=30)
    out = r.stdout + r.stderr
    assert r.returncode != 0
    assert f"invalid value '{value}' for {key} at {cfg}:2: {reason}" in out
    assert "listening" not in out
    assert not ports.exists()


def test_occupied_port_fails_with_nonzero_exit(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = subprocess.run([str(BIN), "standalone", "--set", f"brokerServicePort={port}",
                            "--set", "webServicePort=0", "--set", "bindAddress=127.0.0.1"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert "brokerServicePort" in r.stdout + r.stderr
