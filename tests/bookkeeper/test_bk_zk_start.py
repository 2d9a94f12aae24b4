"""A broker on BookKeeper whose BookKeeper ZooKeeper (bookkeeperMetadataServiceUri) does not answer
at start (issue 22): it says at once which servers it waits for, keeps trying them for
metadataStoreSessionTimeoutMillis (Pulsar's zkTimeout of the broker's BookKeeper client), serves
once they answer, and exits 1 naming them when they never do.

The broker's own metadataStoreUrl is this directory's ZooKeeper; its BookKeeper ZooKeeper is
reached through a TCP relay on a port of its own that starts listening a few seconds after the
broker (a ZooKeeper that comes up late), or through a port where nothing listens."""

import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid

import pulsar
from conftest import magnetar_bin
from test_topics import CLUSTER, zk_url

QUIET = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LateRelay:
    """Listens on `port` only after `delay` seconds, then relays every connection to `target`."""

    def __init__(self, port: int, target: tuple[str, int], delay: float) -> None:
        self.port = port
        self.target = target
        self.stopped = threading.Event()
        self.listening = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(delay,), daemon=True)
        self.thread.start()

    def _pipe(self, a: socket.socket, b: socket.socket) -> None:
        try:
            while not self.stopped.is_set():
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _run(self, delay: float) -> None:
        if self.stopped.wait(delay):
            return
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("127.0.0.1", self.port))
        srv.listen(16)
        srv.settimeout(0.2)
        self.listening.set()
        while not self.stopped.is_set():
            try:
                client, _ = srv.accept()
            except socket.timeout:
                continue
            upstream = socket.create_connection(self.target)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()
        srv.close()

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=5)


def start_broker(d: str, metadata_uri: str, bk_uri: str, session_ms: int) -> subprocess.Popen:
    os.makedirs(d, exist_ok=True)
    settings = (
        f"metadataStoreUrl={zk_url(metadata_uri)}",
        f"clusterName={CLUSTER}",
        "advertisedAddress=127.0.0.1",
        "bindAddress=127.0.0.1",
        "brokerServicePort=0",
        "webServicePort=0",
        f"journalDirectory={d}/data/journal",
        f"metadataStoreSessionTimeoutMillis={session_ms}",
        f"bookkeeperMetadataServiceUri={bk_uri}",
        "managedLedgerDefaultEnsembleSize=2",
        "managedLedgerDefaultWriteQuorum=2",
        "managedLedgerDefaultAckQuorum=2",
    )
    with open(os.path.join(d, "broker.log"), "w") as log:
        return subprocess.Popen(
            [magnetar_bin(), "broker", "--ports-file", os.path.join(d, "ports"),
             *[a for kv in settings for a in ("--set", kv)]],
            stdout=log, stderr=subprocess.STDOUT)


def read_log(d: str) -> str:
    with open(os.path.join(d, "broker.log")) as f:
        return f.read()


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_bookkeeper_zookeeper_up_late_broker_waits_then_serves(bk_cluster):
    bk_cluster.init_cluster_metadata(CLUSTER)
    zk_port = int(zk_url(bk_cluster.uri).rsplit(":", 1)[1])
    port = free_port()
    relay = LateRelay(port, ("127.0.0.1", zk_port), delay=4)
    d = tempfile.mkdtemp(prefix="magnetar-bk-zk-late-")
    proc = start_broker(d, bk_cluster.uri, f"zk://127.0.0.1:{port}/ledgers", 15000)
    try:
        # Said at once (well before the relay listens), naming the server it waits for.
        waiting = f"waiting for BookKeeper's ZooKeeper at 127.0.0.1:{port}"
        deadline = time.monotonic() + 3.5
        while waiting not in read_log(d) and time.monotonic() < deadline:
            assert proc.poll() is None, read_log(d)[-3000:]
            time.sleep(0.1)
        assert waiting in read_log(d), read_log(d)[-3000:]
        assert not relay.listening.is_set()
        # Serves once it answers: a message through it is stored on the bookies.
        deadline = time.monotonic() + 30
        ports = {}
        while time.monotonic() < deadline:
            assert proc.poll() is None, read_log(d)[-3000:]
            p = os.path.join(d, "ports")
            if os.path.exists(p) and "Registered in the cluster" in read_log(d):
                ports = dict(line.strip().split("=", 1) for line in open(p) if "=" in line)
                break
            time.sleep(0.1)
        assert ports, read_log(d)[-3000:]
        assert relay.listening.is_set()
        topic = f"persistent://public/default/zk-late-{uuid.uuid4().hex[:8]}"
        client = pulsar.Client(f"pulsar://127.0.0.1:{ports['brokerServicePort']}",
                               operation_timeout_seconds=30, logger=QUIET)
        try:
            consumer = client.subscribe(topic, "s")
            client.create_producer(topic).send(b"late")
            assert consumer.receive(timeout_millis=10000).data() == b"late"
        finally:
            client.close()
        assert "topics on BookKeeper at" in read_log(d)
    finally:
        stop(proc)
        relay.stop()
        shutil.rmtree(d, ignore_errors=True)


def test_bookkeeper_zookeeper_never_up_broker_exits_naming_it(bk_cluster):
    bk_cluster.init_cluster_metadata(CLUSTER)
    port = free_port()  # nothing listens there
    d = tempfile.mkdtemp(prefix="magnetar-bk-zk-none-")
    t0 = time.monotonic()
    proc = start_broker(d, bk_cluster.uri, f"zk://127.0.0.1:{port}/ledgers", 3000)
    try:
        rc = proc.wait(timeout=25)
        took = time.monotonic() - t0
        log = read_log(d)
        assert rc == 1, log[-3000:]
        # Bounded by metadataStoreSessionTimeoutMillis (3 s) plus the broker's start-up.
        assert took < 15, (took, log[-3000:])
        assert f"waiting for BookKeeper's ZooKeeper at 127.0.0.1:{port}" in log, log[-3000:]
        assert (f"BookKeeper's ZooKeeper at 127.0.0.1:{port} (bookkeeperMetadataServiceUri="
                f"zk://127.0.0.1:{port}/ledgers) did not answer within 3000 ms") in log, log[-3000:]
    finally:
        stop(proc)
        shutil.rmtree(d, ignore_errors=True)
