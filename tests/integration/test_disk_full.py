"""A full disk, for real: the broker's data directory is a small tmpfs the test mounts in a user
and mount namespace of its own (`unshare --user --map-root-user --mount`, no root needed; skipped
where unprivileged user namespaces are off). The test reads the tmpfs through /proc/<pid>/root.

- The journal and metadata fill up: every pending send gets an error within seconds, also with
  send timeout 0 (the broker answers SEND_ERROR PersistenceError for failed writes and
  NotAllowedError for publishes refused at once, then refuses the producer's re-creation with
  ProducerBlockedQuotaExceededException while the disk is full, on which the Java and C++ clients
  fail their pending sends instead of resending in a reconnect loop), the broker stays up,
  receipted messages stay readable, writes resume within 1 s of space coming back (a file
  removed), and publishing resumes, on the same producer, once a topic is deleted.
- diskUsageThreshold refuses publishes before the disk is full; reads go on.
(A start on a full disk is a unit test, LifecycleTest.StartsOnAFullDiskAndServesReads: the tmpfs
does not outlive the broker process here.)
"""

import os
import re
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
SEND_TIMEOUT_MS = 2000


def _userns_ok() -> tuple[bool, str]:
    if not shutil.which("unshare"):
        return False, "no unshare(1)"
    d = tempfile.mkdtemp(prefix="magnetar-userns-")
    try:
        r = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
                            'mount -t tmpfs -o size=1m tmpfs "$0"', d],
                           capture_output=True, text=True, timeout=30)
    finally:
        os.rmdir(d)
    if r.returncode != 0:
        return False, f"no unprivileged user+mount namespace with tmpfs: {r.stderr.strip()}"
    return True, ""


_OK, _WHY = _userns_ok()
pytestmark = pytest.mark.skipif(not _OK, reason=_WHY)


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
    the last receipt to the error, the error). The official C++ client closes its connection on
    SEND_ERROR; the broker then refuses the producer's re-creation with
    ProducerBlockedQuotaExceededException, which fails the pending send."""
    ok = []
    deadline = time.time() + limit_s
    last_ok = time.time()
    i = 0
    while time.time() < deadline:
        payload = b"%08d" % i + os.urandom(size - 8)
        try:
            producer.send(payload)
        except pulsar.PulsarException as e:
            return ok, time.time() - last_ok, e
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


class _Sends:
    """send_async bookkeeping: per payload, when send_async returned (the message is queued:
    with block_if_queue_full it blocks while the producer's queue is full) and
    (result, completion time)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.sent = {}
        self.done = {}
        self.first_error = threading.Event()

    def send(self, producer, payload):
        def cb(res, _msg_id, p=payload):
            with self.lock:
                self.done[p] = (res, time.monotonic())
            if res != pulsar.Result.Ok:
                self.first_error.set()
        producer.send_async(payload, cb)
        with self.lock:
            self.sent[payload] = time.monotonic()

    def receipted(self):
        with self.lock:
            return [p for p in self.sent if self.done.get(p, (None,))[0] == pulsar.Result.Ok]

    def pending(self):
        with self.lock:
            return [p for p in self.sent if p not in self.done]

    def errors(self):
        with self.lock:
            return {p: d for p, d in self.done.items() if d[0] != pulsar.Result.Ok}


def _wait(cond, timeout_s):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def _publish_failure_lines(log_path, topic):
    with open(log_path, errors="replace") as f:
        return [ln for ln in f if re.search(rf"publish to {re.escape(topic)} failed", ln)]


def test_full_disk_errors_promptly_and_resumes_after_a_delete():
    workdir = tempfile.mkdtemp(prefix="magnetar-diskfull-")
    broker = TmpfsMagnetar(["journalMaxSizeMB=4", "diskUsageThreshold=1", "diskCheckInterval=200"],
                           workdir)
    try:
        ep = broker.start()
        # Space to give back later without the broker's help.
        with open(os.path.join(broker.view(), "ballast"), "wb") as f:
            f.write(b"\0" * (8 << 20))
        # 120 s: the C++ client's creation timer (operation timeout) is not cancelled when a
        # producer is created on the caller's thread, and when it fires it cancels the
        # producer's pending reconnection for good (HandlerBase::start), so the refused `keep`
        # producer never came back within a 10 s timeout (2 runs in 22).
        client = pulsar.Client(ep.service_url, operation_timeout_seconds=120)
        keep = "persistent://public/default/keep"
        filler = "persistent://public/default/filler"
        client.subscribe(keep, "s").close()
        client.subscribe(filler, "s").close()
        kp = client.create_producer(keep, batching_enabled=False,
                                    send_timeout_millis=SEND_TIMEOUT_MS)
        kept = [b"keep-%d" % i for i in range(20)]
        for m in kept:
            kp.send(m)
        # No send timeout: every answer must come from the broker's errors.
        fp = client.create_producer(filler, batching_enabled=False, send_timeout_millis=0,
                                    max_pending_messages=32, block_if_queue_full=True)
        # Fill with up to 32 sends in flight, so that many are pending when the disk fills.
        sends = _Sends()
        i = 0
        deadline = time.monotonic() + 90
        while not sends.first_error.is_set():
            assert time.monotonic() < deadline, "the disk never filled"
            sends.send(fp, b"%08d" % i + os.urandom(64 * 1024 - 8))
            i += 1
        # More sends while the disk is full: each must fail too, none may stay pending.
        burst_at = time.monotonic()
        for j in range(50):
            sends.send(fp, b"late-%04d" % j)
        assert _wait(lambda: not sends.pending(), 5), \
            f"{len(sends.pending())} sends still pending 5 s after the disk filled"
        errors = sends.errors()
        assert pulsar.Result.ProducerBlockedQuotaExceededException in \
            {r for r, _ in errors.values()}, "the application sees why"
        late = [p for p in sends.sent if p.startswith(b"late-")]
        assert all(p in errors for p in late), "a send on the full disk was receipted"
        receipted = sends.receipted()
        # The disk filled while the first failed send was pending: time from its send to the
        # first error the application saw, and the slowest error.
        first_failed_sent = min(sends.sent[p] for p in errors)
        first_error_at = min(t for _, t in errors.values())
        slowest = max(max(0.0, t - sends.sent[p]) for p, (_, t) in errors.items())
        # The figure: the disk filled at the latest when the first failed send was
        # made; every send (before and after that moment) was answered within 5 s of it.
        all_answered = max(t for _, t in sends.done.values()) - first_failed_sent
        print(f"disk full after {len(receipted)} receipted 64 KB sends; {len(errors)} sends failed "
              f"({set(r for r, _ in errors.values())}); first error "
              f"{first_error_at - first_failed_sent:.2f} s after the first failed send; every "
              f"failed send had its error within {slowest:.2f} s; the 50 late sends were all "
              f"answered {max(sends.done[p][1] for p in late) - burst_at:.2f} s after the burst; "
              f"every send answered {all_answered:.2f} s after the disk filled")
        assert first_error_at - first_failed_sent < 5
        assert slowest < 5
        assert all_answered <= 5, \
            f"the last send was answered {all_answered:.2f} s after the disk filled"
        assert broker.running()
        # A new producer is refused too, with an error, not a hang (the client retries the
        # refusal until its operation timeout).
        short = pulsar.Client(ep.service_url, operation_timeout_seconds=2)
        t0 = time.monotonic()
        with pytest.raises(pulsar.PulsarException):
            short.create_producer(keep, send_timeout_millis=SEND_TIMEOUT_MS)
        assert time.monotonic() - t0 < 10
        short.close()
        # Reads and the receipted data survive the full disk.
        consumer = client.subscribe(filler, "s")
        got = []
        while len(got) < len(receipted):
            try:
                got.append(consumer.receive(timeout_millis=5000).data())
            except pulsar.Timeout:
                break
        consumer.close()
        assert [p for p in got if p in set(receipted)] == receipted, "a receipted message was lost"
        assert _drain(client, keep, "s") == kept
        with pytest.raises(pulsar.PulsarException):
            kp.send(b"refused")
        metrics = requests.get(f"{ep.admin_url}/metrics", timeout=10).text
        assert "magnetar_storage_journal_write_errors_total" in metrics
        assert 'magnetar_storage_writable{cluster="standalone"} 0' in metrics
        # The failed publishes were logged once per topic per 10 s, not once each.
        lines = _publish_failure_lines(broker.log_path, filler)
        assert 1 <= len(lines) <= 3, \
            f"{len(lines)} publish-failure lines for {len(errors)} failures"
        # Space comes back (the ballast removed): a new producer publishes within 1 s.
        probe = pulsar.Client(ep.service_url, operation_timeout_seconds=2)
        os.remove(os.path.join(broker.view(), "ballast"))
        freed_at = time.monotonic()
        resumed = None
        while resumed is None and time.monotonic() < freed_at + 30:
            try:
                p = probe.create_producer(keep, batching_enabled=False, send_timeout_millis=2000)
                p.send(b"after-space")
                resumed = time.monotonic() - freed_at
                p.close()
            except pulsar.PulsarException:
                time.sleep(0.02)
        probe.close()
        print(f"writes resumed {resumed:.3f} s after the ballast was removed"
              if resumed is not None else "writes did not resume within 30 s")
        assert resumed is not None and resumed < 1.0, f"writes resumed after {resumed} s"
        # Deleting the filler frees its segments; publishing resumes without a restart, on the
        # producer that was refused.
        before = broker.du_bytes()
        fp.close()
        r = requests.delete(f"{ep.admin_url}/admin/v2/persistent/public/default/filler",
                            params={"force": "true"}, timeout=30)
        assert r.status_code == 204, r.text
        freed_at = time.monotonic()
        sent = None
        # The refused producer comes back on its client's reconnect backoff, which doubles up to
        # 60 s (the C++ client's HandlerBase): the longer the disk stayed full (a loaded machine),
        # the later its next attempt.
        while time.monotonic() < freed_at + 90 and sent is None:
            try:
                sent = kp.send(b"after-delete")
            except pulsar.PulsarException:
                pass
        writable = [line for line in requests.get(f"{ep.admin_url}/metrics", timeout=10)
                    .text.splitlines() if line.startswith("magnetar_storage_writable")]
        assert sent is not None, f"publishing did not resume after the delete ({writable})"
        after = broker.du_bytes()
        print(f"du of the data tmpfs: {before} bytes full, {after} after deleting the filler; "
              f"the refused producer published again {time.monotonic() - freed_at:.1f} s after "
              f"the delete")
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
        p = client.create_producer(topic, batching_enabled=False, send_timeout_millis=0)
        ok, took, error = _fill(p, 64 * 1024)
        # Refused at once with an error the application sees (no send timeout to fall back on).
        assert isinstance(error, pulsar.ProducerBlockedQuotaExceededException), repr(error)
        assert took < 5, f"the refused send failed {took:.1f} s after the last receipt"
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
