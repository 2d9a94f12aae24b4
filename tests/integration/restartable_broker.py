"""A magnetar standalone process in a fixed data directory, so a test can SIGKILL it and start it
again on the same data (and the same binary port, so clients reconnect)."""

import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "differential"))
from brokers import DEFAULT_MAGNETAR_BIN, read_ports_file, wait_tcp  # noqa: E402


class RestartableBroker:
    """settings: broker.conf KEY=VALUE pairs for every start (journalSyncData=true is always set;
    later ones win, so start(extra=...) overrides them)."""

    def __init__(self, workdir, settings=()):
        self.workdir = workdir
        self.settings = tuple(settings)
        self.binary = os.environ.get("MAGNETAR_BIN", DEFAULT_MAGNETAR_BIN)
        self.proc = None
        self.port = None
        self.web = None

    def start(self, port=0, extra=()):
        """Starts the broker (binary port `port`, 0 = any free one); returns its pulsar:// URL."""
        ports = os.path.join(self.workdir, "ports")
        if os.path.exists(ports):
            os.remove(ports)
        log = open(os.path.join(self.workdir, "magnetar.log"), "ab")
        settings = (f"brokerServicePort={port}", "webServicePort=0", "journalSyncData=true")
        self.proc = subprocess.Popen(
            [self.binary, "standalone", "--ports-file", ports]
            + [a for kv in settings + self.settings + tuple(extra) for a in ("--set", kv)],
            cwd=self.workdir, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.time() + 30
        while time.time() < deadline:
            p = read_ports_file(ports)
            if "brokerServicePort" in p and wait_tcp(p["brokerServicePort"], deadline):
                self.port = p["brokerServicePort"]
                self.web = f"http://127.0.0.1:{p['webServicePort']}"
                return f"pulsar://127.0.0.1:{self.port}"
            time.sleep(0.05)
        raise RuntimeError("broker did not start")

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=15)
