"""Brokers under test: Magnetar standalone (started here), Apache Pulsar standalone (through
tools/pulsar-reference/pulsar-standalone.sh), Magnetar in cluster mode on a BookKeeper cluster
started for the run (ZooKeeper + bookies, scripts/bookies.sh) or an external one (--broker-url)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from typing import Any

from . import procstat

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))))
# The process handling is the test harness's (standard library only), shared with tests/.
sys.path.insert(0, os.path.join(REPO, "tests"))
from harness.broker import (  # noqa: E402
    PULSAR_SCRIPT,
    BrokerEndpoint,
    BrokerError,
    MagnetarProcess,
    PulsarReferenceProcess,
    free_port,
)

GEN_TLS_CERTS = os.path.join(os.path.dirname(PULSAR_SCRIPT), "..", "..", "tests", "harness",
                             "gen_tls_certs.sh")


def _tls_settings(workdir: str, tls_port: int) -> tuple[dict[str, Any], str]:
    """broker.tls: certificates made now (tests/harness/gen_tls_certs.sh) in workdir/tls and the
    settings of a TLS listener on tls_port; returns (settings, CA file for the clients)."""
    d = os.path.join(workdir, "tls")
    subprocess.run(["bash", GEN_TLS_CERTS, d], check=True, stdout=subprocess.DEVNULL)
    return ({"brokerServicePortTls": tls_port,
             "tlsCertificateFilePath": os.path.join(d, "broker.pem"),
             "tlsKeyFilePath": os.path.join(d, "broker.key"),
             "tlsTrustCertsFilePath": os.path.join(d, "ca.pem")}, os.path.join(d, "ca.pem"))


def _tls_url(url: str | None) -> str:
    """The TLS URL as the clients dial it (127.0.0.1, the advertised address)."""
    assert url, "the broker has no TLS listener"
    return url.replace("://localhost:", "://127.0.0.1:")

__all__ = ["PULSAR_SCRIPT", "REPO", "BookKeeperCluster", "Broker", "BrokerError",
           "ExternalBroker", "MagnetarBkBroker", "MagnetarBroker", "PulsarBkBroker",
           "PulsarBroker"]

SCRIPTS = os.path.join(REPO, "scripts")
BK_CLUSTER_NAME = "magnetar-perf"


def wait_healthy(web_url: str, deadline: float) -> None:
    last = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(web_url + "/admin/v2/brokers/health", timeout=2) as r:
                if r.status == 200:
                    return
        except Exception as e:  # noqa: BLE001 - any failure means "not yet"
            last = e
        time.sleep(0.2)
    raise BrokerError("broker not healthy at %s: %s" % (web_url, last))


def wait_namespace(web_url: str, namespace: str, deadline: float) -> None:
    """Pulsar standalone answers its health check before it created public/default."""
    tenant = namespace.split("/")[0]
    last = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen("%s/admin/v2/namespaces/%s" % (web_url, tenant),
                                        timeout=2) as r:
                if namespace in json.loads(r.read().decode()):
                    return
        except Exception as e:  # noqa: BLE001 - not there yet
            last = e
        time.sleep(0.5)
    raise BrokerError("namespace %s not created at %s: %s" % (namespace, web_url, last))


class Broker:
    """Common interface: start(), stop(), pid (None when unknown), service_url, web_url."""
    kind = "external"
    pid: int | None = None
    service_url: str | None = None
    web_url: str | None = None
    mqtt_url: str | None = None  # mqtt://host:port of the first mqtt:// listener (mqttListeners)
    tls_trust_certs: str | None = None  # broker.tls: the CA file the clients trust
    description = ""
    cfg: dict[str, Any]  # the scenario's broker section (the brokers this tool starts)

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def log_paths(self) -> list[str]:
        return []

    def aux_pids(self) -> dict[str, list[int]]:
        """Processes the run started besides the broker, by group ("bookies", "zookeeper"): the
        sampler reports their CPU as their own measures, apart from the broker's."""
        return {}

    def _take_endpoint(self, endpoint: BrokerEndpoint, pid: int | None) -> str:
        """pid, service_url (the TLS one with broker.tls) and web_url of a started broker;
        returns web_url."""
        self.pid = pid
        self.service_url = endpoint.service_url
        if self.cfg.get("tls"):
            self.service_url = _tls_url(endpoint.service_url_tls)
        self.web_url = endpoint.admin_url
        assert self.web_url
        return self.web_url

    def _take_mqtt_port(self, ports: dict[str, int]) -> None:
        if ports.get("mqttPort"):
            self.mqtt_url = "mqtt://127.0.0.1:%d" % ports["mqttPort"]


class ExternalBroker(Broker):
    def __init__(self, service_url: str, web_url: str | None = None,
                 pid: int | None = None) -> None:
        self.service_url = service_url
        self.pid = pid
        if web_url is None:
            host = service_url.split("://", 1)[-1].split(",")[0].split(":")[0]
            web_url = "http://%s:8080" % host
        self.web_url = web_url
        self.description = "external broker %s" % service_url


def _settings(settings: dict[str, Any]) -> list[str]:
    """KEY=VALUE strings; booleans as Pulsar writes them (true/false)."""
    out = []
    for k, v in settings.items():
        if isinstance(v, bool):
            v = "true" if v else "false"
        out.append("%s=%s" % (k, v))
    return out


def _cpus(cfg: dict[str, Any]) -> set[int] | None:
    return procstat.parse_cpuset(cfg["cpuset"]) if cfg.get("cpuset") is not None else None


class MagnetarBroker(Broker):
    """`magnetar standalone` in a fresh working directory (its data/ is fresh each run)."""
    kind = "magnetar"

    def __init__(self, binary: str, workdir: str, broker_cfg: dict[str, Any]) -> None:
        self.binary = binary
        self.workdir = workdir
        self.cfg = broker_cfg
        self.process: MagnetarProcess | None = None
        self.tmpfs_dir: str | None = None
        self.exit_code: int | None = None
        self.cpus = _cpus(broker_cfg)

    def _process(self) -> MagnetarProcess:
        args = []
        procs = self.cfg.get("availableProcessors") or (len(self.cpus) if self.cpus else None)
        if procs:
            args = ["--available-processors", str(procs)]
        settings = dict(self.cfg.get("settings") or {})
        # The lookup answer must name the address the clients dial (127.0.0.1): with another name
        # (the default "localhost") a client opens a second connection per slot for the data.
        settings.setdefault("advertisedAddress", "127.0.0.1")
        if self.cfg.get("fsync") is False:
            settings.setdefault("journalSyncData", "false")
        if self.cfg.get("journalOnTmpfs") and self.tmpfs_dir is None:
            self.tmpfs_dir = tempfile.mkdtemp(prefix="magnetar-perf-", dir="/dev/shm")
        if self.tmpfs_dir:
            settings.setdefault("journalDirectory", os.path.join(self.tmpfs_dir, "journal"))
        if self.cfg.get("tls"):
            tls, self.tls_trust_certs = _tls_settings(self.workdir, 0)
            settings.update(tls)
        return MagnetarProcess(_settings(settings), workdir=self.workdir,
                               binary=self.binary, data_in_workdir=False, args=args,
                               cpus=self.cpus, log_name="broker.log")

    def command(self) -> list[str]:
        return self._process().command()

    @property
    def proc(self) -> Any:
        """The broker's subprocess.Popen, None before start()."""
        return self.process.proc if self.process else None

    def start(self) -> None:
        if not self.binary or not os.access(self.binary, os.X_OK):
            raise BrokerError("magnetar binary not found or not executable: %r (build target "
                              "`magnetar`, or pass --magnetar-bin / set MAGNETAR_BIN)"
                              % self.binary)
        os.makedirs(self.workdir, exist_ok=True)
        self.process = self._process()
        self.description = " ".join(self.process.command())
        timeout_s = float(self.cfg.get("startTimeoutSeconds", 120))
        deadline = time.monotonic() + timeout_s
        endpoint = self.process.start(timeout_s=timeout_s)
        wait_healthy(self._take_endpoint(endpoint, self.process.pid), deadline)
        self._take_mqtt_port(self.process.ports)

    def stop(self) -> None:
        self.exit_code = self.process.stop(timeout_s=30) if self.process else None
        shutil.rmtree(os.path.join(self.workdir, "data"), ignore_errors=True)  # logs stay
        if self.tmpfs_dir:
            shutil.rmtree(self.tmpfs_dir, ignore_errors=True)

    def log_paths(self) -> list[str]:
        return [os.path.join(self.workdir, "broker.log")]


class PulsarBroker(Broker):
    """Apache Pulsar standalone from tools/pulsar-reference (see its README)."""
    kind = "pulsar"

    def __init__(self, workdir: str, broker_cfg: dict[str, Any],
                 namespace: str = "public/default") -> None:
        self.workdir = workdir
        self.namespace = namespace
        self.cfg = broker_cfg
        self.tmpfs_dir: str | None = None
        self.process: PulsarReferenceProcess | None = None
        self.cpus = _cpus(broker_cfg)

    def start(self) -> None:
        if not os.path.exists(PULSAR_SCRIPT):
            raise BrokerError("reference broker script missing: %s" % PULSAR_SCRIPT)
        os.makedirs(self.workdir, exist_ok=True)
        timeout_s = float(self.cfg.get("startTimeoutSeconds", 240))
        settings = dict(self.cfg.get("settings") or {})
        if self.cfg.get("fsync") is False:
            settings.setdefault("journalSyncData", "false")
        if self.cfg.get("journalOnTmpfs"):
            self.tmpfs_dir = tempfile.mkdtemp(prefix="pulsar-perf-", dir="/dev/shm")
            settings.setdefault("journalDirectory", self.tmpfs_dir)
        if self.cfg.get("tls"):
            tls, self.tls_trust_certs = _tls_settings(self.workdir, free_port())
            settings.update(tls)
        java_opts = self.cfg.get("javaOpts") or ""
        procs = self.cfg.get("availableProcessors") or (len(self.cpus) if self.cpus else None)
        if procs:
            java_opts += " -XX:ActiveProcessorCount=%d" % procs
        self.process = PulsarReferenceProcess(
            _settings(settings), workdir=self.workdir, java_opts=java_opts,
            cpus=self.cpus, start_log=os.path.join(self.workdir, "start.log"))
        self.description = " ".join(self.process.command(timeout_s))
        endpoint = self.process.start(timeout_s)
        wait_namespace(self._take_endpoint(endpoint, self.process.pid), self.namespace,
                       time.monotonic() + timeout_s)

    def stop(self) -> None:
        if self.process:
            self.process.stop()
        shutil.rmtree(os.path.join(self.workdir, "data"), ignore_errors=True)
        if self.tmpfs_dir:
            shutil.rmtree(self.tmpfs_dir, ignore_errors=True)

    def log_paths(self) -> list[str]:
        return [os.path.join(self.workdir, "logs", "pulsar.log")]


class BookKeeperCluster:
    """ZooKeeper (scripts/zookeeper.sh) and N bookies (scripts/bookies.sh) under directory, for
    one run; cfg is the scenario's broker.bookkeeper section. start() returns the
    bookkeeperMetadataServiceUri; stop() stops the bookies, then ZooKeeper (idempotent)."""

    def __init__(self, directory: str, cfg: dict[str, Any]) -> None:
        self.dir = directory
        self.cfg = cfg
        self.uri: str | None = None
        self.zk_port: int | None = None
        self.bookie_base: int | None = None  # bookie I on bookie_base + I (None: free ports)
        self.started = False

    def choose_ports(self) -> None:
        """With portBase P: the bookies on the first N consecutive ports from P that are free
        now, ZooKeeper on the first free one from P+50. The block P..P+99 lies in Linux's
        ephemeral range, where client sockets of the run before may hold a port for a while."""
        base = self.cfg.get("portBase")
        if base is None:
            self.bookie_base, self.zk_port = None, free_port()
            return
        n = int(self.cfg["bookies"])
        self.bookie_base = first_free(base, base + 50, n)
        self.zk_port = first_free(base + 50, base + 60, 1)

    def zk_command(self, port: int) -> list[str]:
        return ["bash", os.path.join(SCRIPTS, "zookeeper.sh"), "start", "-d",
                os.path.join(self.dir, "zk"), "-p", str(port)]

    def bookies_command(self) -> list[str]:
        cmd = ["bash", os.path.join(SCRIPTS, "bookies.sh"), "start", "-n",
               str(self.cfg["bookies"]), "-d", self.dir]
        if self.bookie_base is not None:
            cmd += ["--port-base", str(self.bookie_base)]
        if not self.cfg.get("journalSyncData", True):
            cmd.append("--no-sync")
        return cmd

    @property
    def metadata_store_url(self) -> str:
        """The brokers' metadataStoreUrl (Pulsar's zk:host:port form)."""
        assert self.zk_port, "the cluster is not started"
        return "zk:127.0.0.1:%d" % self.zk_port

    def start(self) -> str:
        if shutil.which("java") is None:
            raise BrokerError("java not found: the bookies need Java 17 "
                              "(scripts/install-test-deps.sh)")
        os.makedirs(self.dir, exist_ok=True)
        self.choose_ports()
        assert self.zk_port
        timeout_s = float(self.cfg.get("startTimeoutSeconds", 300))
        self.started = True
        log = os.path.join(self.dir, "start.log")
        with open(log, "ab") as f:
            # ZooKeeper first, on the chosen port: bookies.sh uses one running under DIR/zk.
            p = subprocess.run(self.zk_command(self.zk_port), stdout=f, stderr=f,
                               timeout=timeout_s)
            if p.returncode != 0:
                raise BrokerError("zookeeper.sh start failed (%d); see %s" % (p.returncode, log))
            p = subprocess.run(self.bookies_command(), stdout=subprocess.PIPE, stderr=f,
                               timeout=timeout_s)
        out = p.stdout.decode().strip().splitlines()
        if p.returncode != 0 or not out or not out[-1].startswith("zk://"):
            raise BrokerError("bookies.sh start failed (%d); see %s and %s/bookie-*/bookie.log"
                              % (p.returncode, log, self.dir))
        self.uri = out[-1]
        return self.uri

    def pids(self) -> dict[str, list[int]]:
        """{"bookies": [pid, ...], "zookeeper": [pid]} of the running processes."""
        out: dict[str, list[int]] = {"bookies": [], "zookeeper": []}
        for i in range(int(self.cfg["bookies"])):
            pid = _read_pid(os.path.join(self.dir, "bookie-%d" % i, "pid"))
            if pid:
                out["bookies"].append(pid)
        pid = _read_pid(os.path.join(self.dir, "zk", "zookeeper.pid"))
        if pid:
            out["zookeeper"].append(pid)
        return out

    def stop(self) -> None:
        if not self.started:
            return
        self.started = False
        with open(os.path.join(self.dir, "start.log"), "ab") as f:
            subprocess.run(["bash", os.path.join(SCRIPTS, "bookies.sh"), "stop", "-d", self.dir],
                           stdout=f, stderr=f, timeout=120)
            # bookies.sh stop also stops the ZooKeeper; this catches a start that failed before
            # any bookie started.
            subprocess.run(["bash", os.path.join(SCRIPTS, "zookeeper.sh"), "stop", "-d",
                            os.path.join(self.dir, "zk")], stdout=f, stderr=f, timeout=60)

    def remove_data(self) -> None:
        """The journals, ledgers and ZooKeeper data (logs stay)."""
        for name in os.listdir(self.dir) if os.path.isdir(self.dir) else []:
            d = os.path.join(self.dir, name)
            if name == "zk":
                shutil.rmtree(os.path.join(d, "data"), ignore_errors=True)
            elif name.startswith("bookie-"):
                for sub in ("journal", "ledgers"):
                    shutil.rmtree(os.path.join(d, sub), ignore_errors=True)


def port_free(port: int) -> bool:
    """Whether a server could bind 127.0.0.1:port now (no SO_REUSEADDR: a socket in TIME_WAIT
    counts as busy, as it does for a server without that option)."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def first_free(lo: int, hi: int, count: int) -> int:
    """The first p in [lo, hi) with p..p+count-1 all free (port_free); BrokerError if none."""
    for p in range(lo, hi - count + 1):
        if all(port_free(q) for q in range(p, p + count)):
            return p
    raise BrokerError("no %d free consecutive port(s) in %d-%d" % (count, lo, hi - 1))


def _read_pid(path: str) -> int | None:
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def topic_namespace(topic: str) -> str:
    """persistent://tenant/ns/name -> tenant/ns."""
    return "/".join(topic.split("://", 1)[-1].split("/")[:2])


def _http(method: str, url: str, body: dict[str, Any] | None = None,
          timeout: float = 30) -> tuple[int, bytes]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def create_namespace(web_url: str, ns: str, bundles: int) -> None:
    """PUT /admin/v2/namespaces/{ns} (with that many bundles when > 0); 409 (exists) is fine."""
    body = {"bundles": {"numBundles": bundles}} if bundles > 0 else None
    code, text = _http("PUT", "%s/admin/v2/namespaces/%s" % (web_url, ns), body)
    if code not in (204, 409):
        raise BrokerError("creating namespace %s failed: %d %s" % (ns, code, text[:200]))


def lookup(web_url: str, topic: str) -> str:
    """GET /lookup/v2/topic/...: the owner's brokerUrl (the leader places the bundle first)."""
    code, text = _http("GET", "%s/lookup/v2/topic/%s" % (web_url, topic.replace("://", "/", 1)))
    if code != 200:
        raise BrokerError("lookup of %s failed: %d %s" % (topic, code, text[:200]))
    return json.loads(text.decode()).get("brokerUrl", "")


def wait_registered(web_url: str, count: int, deadline: float) -> None:
    """Until GET /admin/v2/brokers/{cluster} lists count brokers."""
    got: list[str] = []
    while time.monotonic() < deadline:
        code, text = _http("GET", "%s/admin/v2/brokers/%s" % (web_url, BK_CLUSTER_NAME))
        if code == 200:
            got = json.loads(text.decode())
            if len(got) >= count:
                return
        time.sleep(0.3)
    raise BrokerError("%d brokers registered, expected %d: %s" % (len(got), count, got))


def bk_broker_settings(bk: dict[str, Any], metadata_store_url: str, bk_uri: str) -> dict[str, Any]:
    """The broker.conf keys of a broker of the run's BookKeeper cluster (Pulsar's names)."""
    return {"metadataStoreUrl": metadata_store_url,
            "clusterName": BK_CLUSTER_NAME,
            "bookkeeperMetadataServiceUri": bk_uri,
            "managedLedgerDefaultEnsembleSize": bk["ensembleSize"],
            "managedLedgerDefaultWriteQuorum": bk["writeQuorum"],
            "managedLedgerDefaultAckQuorum": bk["ackQuorum"]}


class MagnetarBkBroker(MagnetarBroker):
    """ZooKeeper + bookies (BookKeeperCluster), `magnetar initialize-cluster-metadata`, then one
    `magnetar broker` in cluster mode storing its topics on the bookies. stop() stops all of it."""
    kind = "magnetar-bk"

    def __init__(self, binary: str, workdir: str, broker_cfg: dict[str, Any],
                 cluster_cfg: dict[str, Any] | None = None, topics: list[str] = ()) -> None:
        super().__init__(binary, workdir, broker_cfg)
        self.bk = BookKeeperCluster(os.path.join(workdir, "bookkeeper"),
                                    broker_cfg["bookkeeper"])
        self.ports_chosen: tuple[int, int] | None = None
        # cluster.brokers > 1: brokers 2..N (MagnetarProcess, each in workdir/broker-I) and
        # their endpoints; broker 1 is this object's own process.
        self.cluster_cfg = cluster_cfg or {"brokers": 1}
        self.topics = list(topics)
        self.others: list[MagnetarProcess] = []
        self.endpoints: list[BrokerEndpoint] = []

    def _ports(self) -> tuple[int, int]:
        """(binary, web) ports: with portBase P two free ones from P+60, else 0 (free)."""
        if self.ports_chosen is None:
            base = self.cfg["bookkeeper"].get("portBase")
            if base is None:
                self.ports_chosen = (0, 0)
            else:
                binary = first_free(base + 60, base + 100, 1)
                self.ports_chosen = (binary, first_free(binary + 1, base + 100, 1))
        return self.ports_chosen

    def _process(self) -> MagnetarProcess:
        settings = dict(self.cfg.get("settings") or {})
        if self.bk.uri:
            for k, v in bk_broker_settings(self.cfg["bookkeeper"], self.bk.metadata_store_url,
                                           self.bk.uri).items():
                settings.setdefault(k, v)
        settings.setdefault("advertisedAddress", "127.0.0.1")
        settings.setdefault("bindAddress", "127.0.0.1")
        settings.setdefault("webServicePort", self._ports()[1])
        if self.cfg.get("tls"):
            tls, self.tls_trust_certs = _tls_settings(self.workdir, 0)
            settings.update(tls)
        procs = self.cfg.get("availableProcessors") or (len(self.cpus) if self.cpus else None)
        args = ["--available-processors", str(procs)] if procs else []
        return MagnetarProcess(_settings(settings), workdir=self.workdir, binary=self.binary,
                               mode="broker", data_in_workdir=False, args=args, cpus=self.cpus,
                               log_name="broker.log")

    def command(self) -> list[str]:
        return self._process().command(self._ports()[0])

    def init_command(self) -> list[str]:
        return [self.binary, "initialize-cluster-metadata", "--cluster", BK_CLUSTER_NAME,
                "--metadata-store", self.bk.metadata_store_url,
                "--web-service-url", "http://127.0.0.1:8080",
                "--broker-service-url", "pulsar://127.0.0.1:6650"]

    def start(self) -> None:
        if not self.binary or not os.access(self.binary, os.X_OK):
            raise BrokerError("magnetar binary not found or not executable: %r" % self.binary)
        os.makedirs(self.workdir, exist_ok=True)
        self.bk.start()
        log = os.path.join(self.workdir, "initialize-cluster-metadata.log")
        with open(log, "wb") as f:
            p = subprocess.run(self.init_command(), stdout=f, stderr=subprocess.STDOUT,
                               timeout=120)
        if p.returncode != 0:
            raise BrokerError("initialize-cluster-metadata failed (%d); see %s"
                              % (p.returncode, log))
        self.process = self._process()
        self.description = " ".join(self.process.command(self._ports()[0]))
        timeout_s = float(self.cfg.get("startTimeoutSeconds", 120))
        deadline = time.monotonic() + timeout_s
        endpoint = self.process.start(port=self._ports()[0], timeout_s=timeout_s)
        wait_healthy(self._take_endpoint(endpoint, self.process.pid), deadline)
        self.endpoints = [endpoint]
        if int(self.cluster_cfg.get("brokers", 1)) > 1:
            self._start_cluster(deadline)

    def _start_cluster(self, deadline: float) -> None:
        """The topics' namespace (with cluster.namespaceBundles), with placeOnFirstBroker their
        bundles owned by broker 1 (an HTTP lookup of each topic while it is the only broker: the
        leader places a bundle on a registered broker), then brokers 2..N, each registered."""
        assert self.web_url
        namespaces = sorted({topic_namespace(t) for t in self.topics})
        for ns in namespaces:
            create_namespace(self.web_url, ns, int(self.cluster_cfg.get("namespaceBundles", 0)))
        if self.cluster_cfg.get("placeOnFirstBroker"):
            for t in self.topics:
                lookup(self.web_url, t)
        base = self.process.settings if self.process else []
        for i in range(2, int(self.cluster_cfg["brokers"]) + 1):
            d = os.path.join(self.workdir, "broker-%d" % i)
            os.makedirs(d, exist_ok=True)
            p = MagnetarProcess([kv for kv in base if not kv.startswith("webServicePort=")],
                                workdir=d, binary=self.binary, mode="broker",
                                data_in_workdir=False, args=self.process.args if self.process
                                else [], cpus=self.cpus, log_name="broker.log")
            self.others.append(p)
            ep = p.start(timeout_s=max(5.0, deadline - time.monotonic()))
            wait_healthy(ep.admin_url, deadline)
            self.endpoints.append(ep)
        wait_registered(self.web_url, len(self.endpoints), deadline)
        self.description += " (+%d brokers alike)" % len(self.others)

    def cluster_brokers(self) -> list[tuple[str, int | None, str]]:
        """(name, pid, web URL) of every broker of the run, broker 1 first."""
        out = [("broker-1", self.pid, self.web_url or "")]
        for i, (p, ep) in enumerate(zip(self.others, self.endpoints[1:]), start=2):
            out.append(("broker-%d" % i, p.pid, ep.admin_url or ""))
        return out

    def stop(self) -> None:
        try:
            for p in self.others:
                p.stop(timeout_s=30)
                shutil.rmtree(os.path.join(p.workdir, "data"), ignore_errors=True)  # logs stay
            super().stop()
        finally:
            self.bk.stop()
            self.bk.remove_data()

    def aux_pids(self) -> dict[str, list[int]]:
        pids = self.bk.pids()
        if self.others:
            pids["other_brokers"] = [p.pid for p in self.others if p.pid]
        return pids

    def log_paths(self) -> list[str]:
        return super().log_paths() + [
            os.path.join(self.bk.dir, "bookie-%d" % i, "bookie.log")
            for i in range(int(self.cfg["bookkeeper"]["bookies"]))]



class PulsarBkBroker(Broker):
    """Apache Pulsar's broker in cluster mode (tools/pulsar-reference/pulsar-broker.sh) on a
    ZooKeeper + bookies started for the run (BookKeeperCluster), the cluster metadata written by
    Pulsar's PulsarClusterMetadataSetup (`pulsar-broker.sh init-cluster`). stop() stops all of
    it."""
    kind = "pulsar-bk"
    SCRIPT = os.path.join(os.path.dirname(PULSAR_SCRIPT), "pulsar-broker.sh")

    def __init__(self, workdir: str, broker_cfg: dict[str, Any],
                 namespace: str = "public/default") -> None:
        self.workdir = workdir
        self.cfg = broker_cfg
        self.namespace = namespace
        self.run_dir = os.path.join(workdir, "pulsar")
        self.bk = BookKeeperCluster(os.path.join(workdir, "bookkeeper"),
                                    broker_cfg["bookkeeper"])
        self.started = False

    def _ports(self) -> tuple[int, int]:
        base = self.cfg["bookkeeper"].get("portBase")
        if base is None:
            return (0, 0)  # the script picks free ones
        binary = first_free(base + 60, base + 100, 1)
        return (binary, first_free(binary + 1, base + 100, 1))

    def init_command(self) -> list[str]:
        return ["bash", self.SCRIPT, "init-cluster", "-m", self.bk.metadata_store_url,
                "-c", BK_CLUSTER_NAME, "-b", self.bk.uri or "", "-d", self.run_dir]

    def start_command(self, ports: tuple[int, int]) -> list[str]:
        settings = dict(self.cfg.get("settings") or {})
        for k, v in bk_broker_settings(self.cfg["bookkeeper"], self.bk.metadata_store_url,
                                       self.bk.uri or "").items():
            if k.startswith("managedLedger"):
                settings.setdefault(k, v)
        cmd = ["bash", self.SCRIPT, "start", "-m", self.bk.metadata_store_url,
               "-c", BK_CLUSTER_NAME, "-b", self.bk.uri or "", "-d", self.run_dir,
               "-p", str(ports[0]), "-w", str(ports[1]),
               "--timeout", str(int(self.cfg.get("startTimeoutSeconds", 240)))]
        for kv in _settings(settings):
            cmd += ["--set", kv]
        java_opts = self.cfg.get("javaOpts") or ""
        if self.cfg.get("availableProcessors"):
            java_opts += " -XX:ActiveProcessorCount=%d" % self.cfg["availableProcessors"]
        if java_opts.strip():
            cmd += ["--java-opts", java_opts.strip()]
        return cmd

    def start(self) -> None:
        if not os.path.exists(self.SCRIPT):
            raise BrokerError("reference broker script missing: %s" % self.SCRIPT)
        if self.cfg.get("tls") or self.cfg.get("cpuset") is not None:
            raise BrokerError("broker.kind pulsar-bk does not support broker.tls or "
                              "broker.cpuset yet")
        os.makedirs(self.run_dir, exist_ok=True)
        self.bk.start()
        self.started = True
        log = os.path.join(self.workdir, "pulsar-broker.log")
        timeout_s = float(self.cfg.get("startTimeoutSeconds", 240)) + 60
        with open(log, "ab") as f:
            p = subprocess.run(self.init_command(), stdout=f, stderr=subprocess.STDOUT,
                               timeout=timeout_s)
            if p.returncode != 0:
                raise BrokerError("pulsar-broker.sh init-cluster failed (%d); see %s and %s"
                                  % (p.returncode, log, os.path.join(self.run_dir, "logs")))
            cmd = self.start_command(self._ports())
            self.description = " ".join(cmd)
            p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout_s)
        if p.returncode != 0:
            raise BrokerError("pulsar-broker.sh start failed (%d); see %s and %s"
                              % (p.returncode, log, os.path.join(self.run_dir, "logs")))
        ports = {}
        with open(os.path.join(self.run_dir, "ports")) as f:
            for line in f:
                k, _, v = line.strip().partition("=")
                ports[k] = int(v)
        self.pid = _read_pid(os.path.join(self.run_dir, "pulsar.pid"))
        self.service_url = "pulsar://127.0.0.1:%d" % ports["brokerServicePort"]
        self.web_url = "http://127.0.0.1:%d" % ports["webServicePort"]
        wait_namespace(self.web_url, self.namespace, time.monotonic() + timeout_s)

    def stop(self) -> None:
        try:
            if self.started and os.path.isdir(self.run_dir):
                with open(os.path.join(self.workdir, "pulsar-broker.log"), "ab") as f:
                    subprocess.run(["bash", self.SCRIPT, "stop", "-d", self.run_dir], stdout=f,
                                   stderr=subprocess.STDOUT, timeout=120)
        finally:
            self.started = False
            self.bk.stop()
            self.bk.remove_data()

    def aux_pids(self) -> dict[str, list[int]]:
        return self.bk.pids()

    def log_paths(self) -> list[str]:
        return [os.path.join(self.run_dir, "logs", "pulsar.log")]
