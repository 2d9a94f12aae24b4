"""Every send is answered when BookKeeper cannot take writes (issue 44): one `magnetar broker` on
this directory's ZooKeeper and bookies (E=Qw=Qa=2), a raw-wire producer (so every answer the
broker gives is seen, not hidden by a client's resends), and every bookie but one killed:
each SEND in flight and each one sent while too few bookies are up gets SEND_ERROR
(PersistenceError, Pulsar's answer to a failed add) or a receipt, promptly; nothing receipted is
lost; once the bookies are back, the same producer's next send is receipted."""

import glob
import os
import subprocess
import sys
import tempfile
import time
import uuid

import pulsar
import requests
from conftest import BOOKIES_SH, magnetar_bin
from test_topics import CLUSTER, Broker, zk_url

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import hostile_wire as wire  # noqa: E402

ANSWER_S = 30  # bound for each answer: the BookKeeper client's connect and ensemble-change time


def _answers(raw: wire.WireClient, want: set[int], timeout_s: float) -> dict[int, tuple]:
    """seq -> (command type, seconds from now) for the SENDs in `want`."""
    got: dict[int, tuple] = {}
    t0 = time.monotonic()
    raw.sock.settimeout(1.0)
    while want - set(got) and time.monotonic() < t0 + timeout_s:
        try:
            r = raw.recv_command()
        except OSError:
            continue
        assert r is not None, f"connection closed with {sorted(want - set(got))} unanswered"
        ctype, body = r
        if ctype == wire.PING:
            raw.send(wire.frame(wire.base_command(wire.PONG, b"")))
        elif ctype in (wire.SEND_RECEIPT, wire.SEND_ERROR):
            seq = body[2][0]
            err = wire.error_name(body, 3) if ctype == wire.SEND_ERROR else None
            got[seq] = (ctype, time.monotonic() - t0, err)
    return got


def test_every_send_is_answered_when_bookies_are_lost(bk_cluster):
    bookies = max(3, len(glob.glob(os.path.join(bk_cluster.dir, "bookie-*"))))
    subprocess.run(["bash", BOOKIES_SH, "start", "-n", str(bookies), "-d", bk_cluster.dir],
                   check=True, capture_output=True, timeout=180)
    init = subprocess.run(
        [magnetar_bin(), "initialize-cluster-metadata", "--cluster", CLUSTER, "--metadata-store",
         zk_url(bk_cluster.uri), "--web-service-url", "http://127.0.0.1:8080",
         "--broker-service-url", "pulsar://127.0.0.1:6650"],
        capture_output=True, text=True, timeout=60)
    assert init.returncode == 0, init.stdout + init.stderr
    base = tempfile.mkdtemp(prefix="magnetar-bk-writes-")
    broker = Broker(base, 0, bk_cluster.uri)
    raw = None
    try:
        broker.wait_registered()
        topic = f"persistent://public/default/bk-writes-{uuid.uuid4().hex[:8]}"
        r = requests.get(f"{broker.web}/lookup/v2/topic/{topic.replace('://', '/')}",
                         timeout=30)  # the broker takes the bundle
        assert r.status_code == 200 and r.json()["brokerUrl"] == broker.url, r.text
        # A subscription keeps every entry for the check at the end.
        r = requests.put(f"{broker.web}/admin/v2/persistent/{topic.split('://', 1)[1]}"
                         "/subscription/check", timeout=30)
        assert r.status_code == 204, r.text
        port = int(broker.url.rsplit(":", 1)[1])
        raw = wire.WireClient(port, timeout=10)
        raw.handshake()
        raw.send(wire.producer_frame(topic, 1, 1, name="bk-writes"))
        raw.expect(wire.PRODUCER_SUCCESS)
        for seq in range(5):
            raw.send(wire.send_frame(1, seq, wire.entry("bk-writes", seq, b"before-%d" % seq)))
        before = _answers(raw, set(range(5)), ANSWER_S)
        assert all(a[0] == wire.SEND_RECEIPT for a in before.values()), before

        # Every bookie but one (an earlier test may have added a fourth).
        for i in range(bookies - 1):
            subprocess.run(["bash", BOOKIES_SH, "kill9", "-d", bk_cluster.dir, str(i)],
                           check=True, capture_output=True, timeout=60)
        # Sends after the loss, a few at a time: every one answered within ANSWER_S.
        answers = {}
        seq = 5
        for _ in range(2):
            batch = set(range(seq, seq + 5))
            for s in sorted(batch):
                raw.send(wire.send_frame(1, s, wire.entry("bk-writes", s, b"during-%d" % s)))
            seq += 5
            answers.update(_answers(raw, batch, ANSWER_S))
            assert batch <= set(answers), f"unanswered within {ANSWER_S} s: " \
                f"{sorted(batch - set(answers))}"
        errors = {s: a for s, a in answers.items() if a[0] == wire.SEND_ERROR}
        assert errors, "with one bookie up (ensemble 2) some send must fail"
        assert {a[2] for a in errors.values()} == {"PersistenceError"}, errors
        slowest = max(a[1] for a in answers.values())
        receipted = sorted(s for s, a in answers.items() if a[0] == wire.SEND_RECEIPT)

        # The bookies come back: the same producer's next send is receipted.
        subprocess.run(["bash", BOOKIES_SH, "start", "-n", str(bookies), "-d", bk_cluster.dir],
                       check=True, capture_output=True, timeout=180)
        back_at = time.monotonic()
        resumed = None
        while resumed is None and time.monotonic() < back_at + 60:
            raw.send(wire.send_frame(1, seq, wire.entry("bk-writes", seq, b"after-%d" % seq)))
            a = _answers(raw, {seq}, ANSWER_S)
            if a.get(seq, (None,))[0] == wire.SEND_RECEIPT:
                resumed = time.monotonic() - back_at
            seq += 1
        assert resumed is not None, "no receipt within 60 s of the bookies coming back"
        print(f"\n{bookies - 1} of {bookies} bookies killed: {len(answers)} sends answered, "
              f"{len(errors)} with PersistenceError, {len(receipted)} receipted, "
              f"slowest answer {slowest:.1f} s; "
              f"receipts again {resumed:.1f} s after the bookies were back")
        # Nothing receipted is lost: the subscription reads every receipted message.
        client = pulsar.Client(broker.url, operation_timeout_seconds=30)
        try:
            consumer = client.subscribe(topic, "check")
            stored = set()
            while True:
                try:
                    stored.add(consumer.receive(timeout_millis=5000).data())
                except pulsar.Timeout:
                    break
        finally:
            client.close()
        want = {b"before-%d" % i for i in range(5)} | {b"during-%d" % i for i in receipted}
        assert want <= stored, sorted(want - stored)
    finally:
        if raw:
            raw.close()
        broker.stop()
        subprocess.run(["bash", BOOKIES_SH, "start", "-n", str(bookies), "-d", bk_cluster.dir],
                       capture_output=True, timeout=180)
