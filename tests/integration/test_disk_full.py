"""A full disk, for real: the broker's data directory is a small tmpfs the test mounts in a user
and mount namespace of its own (`unshare --user --map-root-user --mount`, no root needed; skipped
where unprivileged user namespaces are off). The test reads the tmpfs through /proc/<pid>/root.

- The journal and metadata fill up: every pending send gets an error within seconds, the broker
  stays up, receipted messages stay readable, and publishing resumes once a topic is deleted.
- diskUsageThreshold refuses publishes before the disk is full; reads go on.
(A start on a full disk is a unit test, LifecycleTest.StartsOnAFullDiskAndServesReads: the tmpfs
does not outlive the broker process here.)
"""

import os
import shutil
import subprocess
import tempfile
import threading
import time

import pulsar
import pytest
import requests

from harness.broker import MagnetarProcess

TMPFS_MB = 48


def _userns_ok() -> bool:
    if not shutil.which("unshare"):
        return False
    r = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "true"],
                       capture_output=True)
    return r.returncode == 0


pytestmark = pytest.mark.skipif(not _userns_ok(), reason="no unprivileged user namespaces")


class TmpfsMagnetar(MagnetarProcess):
    """magnetar with journal and metadata on a TMPFS_MB tmpfs mounted at <workdir>/data."""

    def __init__(self, settings, workdir):
        super().__init__(settings, workdir=workdir, data_in_workdir=False)
        self.data = os.path.join(workdir, "data")
        os.makedirs(self.data, exist_ok=True)

    def command(self, port=0, extra=()):
        cmd = super().command(port, [f"journalDirectory={self.data}/journal",
                                     f"metadataStoreUrl=rocksdb:{self.data}/metadata",
                                     *extra])
        mount = f'mount -t tmpfs -o size={TMPFS_MB}m tmpfs "$0" && exec "$@"'
        return ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", mount,
                self.data, *cmd]

    def view(self) -> str:
        """The tmpfs as the broker sees it."""
        return f"/proc/{self.pid}/root{self.data}"

    def du_bytes(self) -> int:
        out = subprocess.run(["du", "-sb", self.view()], capture_output=True, text=True)
        return int(out.stdout.split()[0])


def _fill(producer, size, until_error_s=60.0):
    """Sends `size`-byte messages asynchronously until sends fail; returns (receipted payloads,
    seconds from the first failure to the last callback, number of failures)."""
    lock = threading.Lock()
    ok, failed, first_fail = [], [], []
    pending = [0]

    def cb(res, msg_id, payload):
        with lock:
            pending[0] -= 1
            if res == pulsar.Result.Ok:
                ok.append(payload)
            else:
                failed.append(res)
                if not first_fail:
                    first_fail.append(time.time())

    deadline = time.time() + until_error_s
    i = 0
    while time.time() < deadline:
        with lock:
            if failed or pending[0] > 64:
                stop = bool(failed)
            else:
                stop = None
        if stop:
            break
        if stop is None:
            payload = b"%08d" % i + os.urandom(size - 8)
            with lock:
                pending[0] += 1
            producer.send_async(payload, lambda r, m, p=payload: cb(r, m, p))
            i += 1
        else:
            time.sleep(0.001)
    assert failed, "the disk never filled"
    end = time.time() + 30
    while time.time() < end:
        with lock:
            if pending[0] == 0:
                break
        time.sleep(0.01)
    with lock:
        assert pending[0] == 0, f"{pending[0]} sends still pending 30 s after the disk filled"
        return list(ok), time.time() - first_fail[0], len(failed)


def _drain(client, topic, sub):
    consumer = client.subscribe(topic, sub, initial_position=pulsar.InitialPosition.Earliest)
    got = []
    while True:
        try:
            m = consumer.receive(timeout_millis=3000)
        except pulsar.Timeout:
            break
        got.append(m.data())
        consumer.acknowledge(m)
    consumer.close()
    return got


def test_full_disk_errors_promptly_and_resumes_after_a_delete():
    workdir = tempfile.mkdtemp(prefix="magnetar-diskfull-")
    broker = TmpfsMagnetar(["journalMaxSizeMB=4", "diskUsageThreshold=1", "diskCheckInterval=200",
                            "checkpointIntervalMs=500"], workdir)
    try:
        ep = broker.start()
        client = pulsar.Client(ep.service_url, operation_timeout_seconds=10)
        keep = "persistent://public/default/keep"
        filler = "persistent://public/default/filler"
        client.subscribe(keep, "s").close()
        kp = client.create_producer(keep, batching_enabled=False, send_timeout_millis=10000)
        kept = [b"keep-%d" % i for i in range(20)]
        for m in kept:
            kp.send(m)
        fp = client.create_producer(filler, batching_enabled=False, send_timeout_millis=10000,
                                    max_pending_messages=1000)
        ok, drain_s, failures = _fill(fp, 64 * 1024)
        print(f"disk full after {len(ok)} receipted 64 KB sends; every pending send answered "
              f"{drain_s:.2f} s after the first error ({failures} errors)")
        assert drain_s < 10
        assert broker.running()
        # Reads and the receipted data survive the full disk.
        assert _drain(client, keep, "s") == kept
        try:
            kp.send(b"refused")
            refused = False
        except pulsar.PulsarException:
            refused = True
        assert refused, "a publish on the full disk must fail"
        metrics = requests.get(f"{ep.admin_url}/metrics", timeout=10).text
        assert "magnetar_storage_journal_write_errors_total" in metrics
        # Deleting the filler frees its segments; publishing resumes without a restart.
        before = broker.du_bytes()
        fp.close()
        r = requests.delete(f"{ep.admin_url}/admin/v2/persistent/public/default/filler",
                            params={"force": "true"}, timeout=30)
        assert r.status_code == 204, r.text
        deadline = time.time() + 30
        sent = None
        while time.time() < deadline and sent is None:
            try:
                sent = kp.send(b"after-delete")
            except pulsar.PulsarException:
                time.sleep(0.5)
        assert sent is not None, "publishing did not resume after the delete"
        after = broker.du_bytes()
        print(f"du of the data tmpfs: {before} bytes full, {after} after deleting the filler")
        assert after < before - 8 * 1024 * 1024
        client.close()
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def test_watermark_refuses_before_full():
    workdir = tempfile.mkdtemp(prefix="magnetar-diskwm-")
    broker = TmpfsMagnetar(["journalMaxSizeMB=4", "diskUsageThreshold=0.5",
                            "diskUsageLwmThreshold=0.4", "diskCheckInterval=100"], workdir)
    try:
        ep = broker.start()
        client = pulsar.Client(ep.service_url, operation_timeout_seconds=10)
        topic = "persistent://public/default/wm"
        client.subscribe(topic, "s").close()
        p = client.create_producer(topic, batching_enabled=False, send_timeout_millis=10000,
                                   max_pending_messages=1000)
        ok, drain_s, _ = _fill(p, 64 * 1024)
        st = os.statvfs(broker.view())
        used = 1 - st.f_bavail / st.f_blocks
        print(f"watermark 0.5: publishes refused at {used:.2f} of the tmpfs, after {len(ok)} sends")
        assert used < 0.75, "refused before the disk is full"
        metrics = requests.get(f"{ep.admin_url}/metrics", timeout=10).text
        assert 'magnetar_storage_writable{cluster="standalone"} 0' in metrics
        # Reads are served above the watermark.
        assert len(_drain(client, topic, "s")) == len(ok)
        client.close()
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
