"""Brokers under test: Magnetar standalone (started here), Apache Pulsar standalone (through
tools/pulsar-reference/pulsar-standalone.sh) or an external one (--broker-url)."""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request

from . import procstat

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))))
PULSAR_SCRIPT = os.path.join(REPO, "tools", "pulsar-reference", "pulsar-standalone.sh")


class BrokerError(Exception):
    pass


def read_ports(path):
    ports = {}
    with open(path) as f:
        for line in f:
            k, _, v = line.strip().partition("=")
            if v:
                ports[k] = int(v)
    return ports


def wait_healthy(web_url, deadline):
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


def wait_namespace(web_url, namespace, deadline):
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
    pid = None
    service_url = None
    web_url = None
    description = ""

    def start(self):
        pass

    def stop(self):
        pass

    def log_paths(self):
        return []


class ExternalBroker(Broker):
    def __init__(self, service_url, web_url=None, pid=None):
        self.service_url = service_url
        self.pid = pid
        if web_url is None:
            host = service_url.split("://", 1)[-1].split(",")[0].split(":")[0]
            web_url = "http://%s:8080" % host
        self.web_url = web_url
        self.description = "external broker %s" % service_url


def _affinity(cpus):
    if not cpus:
        return None
    return lambda: os.sched_setaffinity(0, cpus)


class MagnetarBroker(Broker):
    """`magnetar standalone` in a fresh working directory (its data/ is fresh each run)."""
    kind = "magnetar"

    def __init__(self, binary, workdir, broker_cfg):
        self.binary = binary
        self.workdir = workdir
        self.cfg = broker_cfg
        self.proc = None
        self.tmpfs_dir = None
        self.cpus = procstat.parse_cpuset(broker_cfg["cpuset"]) \
            if broker_cfg.get("cpuset") is not None else None

    def command(self):
        cmd = [self.binary, "standalone", "--ports-file", os.path.join(self.workdir, "ports"),
               "--set", "brokerServicePort=0", "--set", "webServicePort=0"]
        procs = self.cfg.get("availableProcessors") or (len(self.cpus) if self.cpus else None)
        if procs:
            cmd += ["--available-processors", str(procs)]
        settings = dict(self.cfg.get("settings") or {})
        # The lookup answer must name the address the clients dial (127.0.0.1): with another name
        # (the default "localhost") a client opens a second connection per slot for the data.
        settings.setdefault("advertisedAddress", "127.0.0.1")
        if self.cfg.get("fsync") is False:
            settings.setdefault("journalSyncData", "false")
        if self.cfg.get("journalOnTmpfs"):
            self.tmpfs_dir = tempfile.mkdtemp(prefix="magnetar-perf-", dir="/dev/shm")
            settings.setdefault("journalDirectory", os.path.join(self.tmpfs_dir, "journal"))
        for k, v in settings.items():
            if isinstance(v, bool):
                v = "true" if v else "false"
            cmd += ["--set", "%s=%s" % (k, v)]
        return cmd

    def start(self):
        if not self.binary or not os.access(self.binary, os.X_OK):
            raise BrokerError("magnetar binary not found or not executable: %r (build target "
                              "`magnetar`, or pass --magnetar-bin / set MAGNETAR_BIN)"
                              % self.binary)
        os.makedirs(self.workdir, exist_ok=True)
        ports_file = os.path.join(self.workdir, "ports")
        if os.path.exists(ports_file):
            os.unlink(ports_file)
        cmd = self.command()
        self.description = " ".join(cmd)
        self.log = open(os.path.join(self.workdir, "broker.log"), "wb")
        self.proc = subprocess.Popen(cmd, cwd=self.workdir, stdout=self.log,
                                     stderr=subprocess.STDOUT, preexec_fn=_affinity(self.cpus))
        self.pid = self.proc.pid
        deadline = time.monotonic() + float(self.cfg.get("startTimeoutSeconds", 120))
        while not os.path.exists(ports_file):
            if self.proc.poll() is not None:
                raise BrokerError("magnetar exited with %s at start; see %s" %
                                  (self.proc.returncode, self.log.name))
            if time.monotonic() > deadline:
                self.stop()
                raise BrokerError("magnetar did not write its ports file in time")
            time.sleep(0.05)
        ports = read_ports(ports_file)
        self.service_url = "pulsar://127.0.0.1:%d" % ports["brokerServicePort"]
        self.web_url = "http://127.0.0.1:%d" % ports["webServicePort"]
        wait_healthy(self.web_url, deadline)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.exit_code = self.proc.returncode if self.proc else None
        data = os.path.join(self.workdir, "data")
        shutil.rmtree(data, ignore_errors=True)  # fresh per run; logs stay
        if self.tmpfs_dir:
            shutil.rmtree(self.tmpfs_dir, ignore_errors=True)

    def log_paths(self):
        return [os.path.join(self.workdir, "broker.log")]


class PulsarBroker(Broker):
    """Apache Pulsar standalone from tools/pulsar-reference (see its README)."""
    kind = "pulsar"

    def __init__(self, workdir, broker_cfg, script=PULSAR_SCRIPT, namespace="public/default"):
        self.workdir = workdir
        self.namespace = namespace
        self.cfg = broker_cfg
        self.script = script
        self.cpus = procstat.parse_cpuset(broker_cfg["cpuset"]) \
            if broker_cfg.get("cpuset") is not None else None

    def start(self):
        if not os.path.exists(self.script):
            raise BrokerError("reference broker script missing: %s" % self.script)
        os.makedirs(self.workdir, exist_ok=True)
        cmd = ["bash", self.script, "start", "-d", self.workdir, "-p", "0", "-w", "0", "--wipe",
               "--timeout", str(int(self.cfg.get("startTimeoutSeconds", 240)))]
        settings = dict(self.cfg.get("settings") or {})
        if self.cfg.get("fsync") is False:
            settings.setdefault("journalSyncData", "false")
        if self.cfg.get("journalOnTmpfs"):
            self.tmpfs_dir = tempfile.mkdtemp(prefix="pulsar-perf-", dir="/dev/shm")
            settings.setdefault("journalDirectory", self.tmpfs_dir)
        for k, v in settings.items():
            if isinstance(v, bool):
                v = "true" if v else "false"
            cmd += ["--set", "%s=%s" % (k, v)]
        java_opts = self.cfg.get("javaOpts") or ""
        procs = self.cfg.get("availableProcessors") or (len(self.cpus) if self.cpus else None)
        if procs:
            java_opts += " -XX:ActiveProcessorCount=%d" % procs
        if java_opts.strip():
            cmd += ["--java-opts", java_opts.strip()]
        self.description = " ".join(cmd)
        with open(os.path.join(self.workdir, "start.log"), "wb") as log:
            rc = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT,
                                 preexec_fn=_affinity(self.cpus))
        if rc != 0:
            raise BrokerError("pulsar-standalone.sh start failed (%d); see %s/start.log and "
                              "%s/logs/pulsar.log" % (rc, self.workdir, self.workdir))
        with open(os.path.join(self.workdir, "pulsar.pid")) as f:
            self.pid = int(f.read().strip())
        if self.cpus:  # the JVM's threads were started by now: pin them all
            subprocess.call(["taskset", "-a", "-cp", ",".join(map(str, sorted(self.cpus))),
                             str(self.pid)], stdout=subprocess.DEVNULL)
        ports = read_ports(os.path.join(self.workdir, "ports"))
        self.service_url = "pulsar://127.0.0.1:%d" % ports["brokerServicePort"]
        self.web_url = "http://127.0.0.1:%d" % ports["webServicePort"]
        wait_namespace(self.web_url, self.namespace,
                       time.monotonic() + float(self.cfg.get("startTimeoutSeconds", 240)))

    def stop(self):
        subprocess.call(["bash", self.script, "stop", "-d", self.workdir],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(os.path.join(self.workdir, "data"), ignore_errors=True)
        if getattr(self, "tmpfs_dir", None):
            shutil.rmtree(self.tmpfs_dir, ignore_errors=True)

    def log_paths(self):
        return [os.path.join(self.workdir, "logs", "pulsar.log")]
