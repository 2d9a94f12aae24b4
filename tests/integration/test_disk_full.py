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


# Opt-in (MAGNETAR_DISK_FULL_TEST=1): the official client answers SEND_ERROR by reconnecting and
# resending, so its sends stay pending past their timeout until the broker ends that loop.
pytestmark = [
    pytest.mark.skipif(not _userns_ok(), reason="no unprivileged user namespaces"),
    pytest.mark.skipif(os.environ.get("MAGNETAR_DISK_FULL_TEST") != "1",
                       reason="set MAGNETAR_DISK_FULL_TEST=1 (a documented long run)"),
]


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


def _fill(producer, size, limit_s=90.0):
    """Sends `size`-byte messages until a send fails; returns (receipted payloads, seconds from
    the last receipt to the error). The official client reconnects and resends after a
    SEND_ERROR, so the error the application sees is its send timeout."""
    ok = []
    deadline = time.time() + limit_s
    last_ok = time.time()
    i = 0
    while time.time() < deadline:
        payload = b"%08d" % i + os.urandom(size - 8)
        try:
            producer.send(payload)
        except pulsar.PulsarException:
            return ok, time.time() - last_ok
        last_ok = time.time()
        ok.append(payload)
        i += 1
    raise AssertionError("the disk never filled")


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
        kp = client.create_producer(keep, batching_enabled=False, send_timeout_millis=3000)
        kept = [b"keep-%d" % i for i in range(20)]
        for m in kept:
            kp.send(m)
        fp = client.create_producer(filler, batching_enabled=False, send_timeout_millis=3000)
        ok, error_s = _fill(fp, 64 * 1024)
        print(f"disk full after {len(ok)} receipted 64 KB sends; the send error came "
              f"{error_s:.2f} s after the last receipt")
        assert error_s < 30
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
        p = client.create_producer(topic, batching_enabled=False, send_timeout_millis=3000)
        ok, _ = _fill(p, 64 * 1024)
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
