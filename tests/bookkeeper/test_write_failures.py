"""Every send is answered when BookKeeper cannot take writes (issue 44): one `magnetar broker` on
this directory's ZooKeeper and bookies (E=Qw=Qa=2) and a raw-wire producer (so every answer the
broker gives is seen, not hidden by a client's resends).

- Every bookie but one killed: each SEND in flight and each one sent while too few bookies are up
  gets SEND_ERROR (PersistenceError, Pulsar's answer to a failed add) or a receipt, promptly;
  a failed add closes the producer (Pulsar's PersistentTopic.addFailed fences the topic and
  disconnects its producers), which the client creates again; nothing receipted is lost; once the
  bookies are back, the producer's next send is receipted.
- Bookies turned read-only (BookKeeper's admin REST call, `bookies.sh readonly`): a bookie of the
  ledger's ensemble answers adds with EREADONLY and re-registers under
  /ledgers/available/readonly; the ensemble changes away from it (as BookKeeper's PendingAddOp
  and placement, which takes writable bookies only) and every send is receipted; with every
  bookie but one read-only each send gets PersistenceError; once the first is writable again it
  is chosen for the next ledger and sends are receipted; nothing receipted is lost."""

import glob
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid

import pulsar
import requests
from conftest import BOOKIES_SH
from test_topics import CLUSTER, Broker

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import hostile_wire as wire  # noqa: E402

ANSWER_S = 30  # bound for each answer: the BookKeeper client's connect and ensemble-change time


class RawProducer:
    """A raw-wire producer that acts on CLOSE_PRODUCER as the official clients do: it creates the
    producer again (a new id; ServiceNotReady, Pulsar's answer while a topic is fenced after a
    failed write, is retried) and sends again what was not answered. Each answer is recorded once
    per sequence id: (command type, seconds from its send, error name or None)."""

    def __init__(self, raw: wire.WireClient, topic: str, name: str) -> None:
        self.raw, self.topic, self.name = raw, topic, name
        self.pid = 0
        self.req = 0
        self.recreated = 0
        self.pending: dict[int, tuple[bytes, float]] = {}  # seq -> (payload, sent at)
        self.answers: dict[int, tuple] = {}
        self._closed = False
        self._create(ANSWER_S)

    def _pump(self) -> tuple | None:
        """Handles one command (None after a 1 s timeout); returns it."""
        self.raw.sock.settimeout(1.0)
        try:
            r = self.raw.recv_command()
        except OSError:
            return None
        assert r is not None, f"connection closed with {sorted(self.pending)} unanswered"
        ctype, body = r
        if ctype == wire.PING:
            self.raw.send(wire.frame(wire.base_command(wire.PONG, b"")))
        elif ctype in (wire.SEND_RECEIPT, wire.SEND_ERROR):
            seq = body[2][0]
            if seq in self.pending and seq not in self.answers:
                err = wire.error_name(body, 3) if ctype == wire.SEND_ERROR else None
                self.answers[seq] = (ctype, time.monotonic() - self.pending.pop(seq)[1], err)
        elif ctype == wire.CLOSE_PRODUCER and body[1][0] == self.pid:
            self._closed = True
        return r

    def _create(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.pid += 1
            self.req += 1
            self.raw.send(wire.producer_frame(self.topic, self.pid, self.req, name=self.name))
            while time.monotonic() < deadline:
                r = self._pump()
                if r is None or r[1].get(1, [None])[0] != self.req:
                    continue
                if r[0] == wire.PRODUCER_SUCCESS:
                    self._closed = False
                    return
                if r[0] == wire.ERROR:
                    assert wire.error_name(r[1], 2) == "ServiceNotReady", r
                    time.sleep(0.1)
                    break
        raise AssertionError(f"producer not created again within {timeout_s} s")

    def send(self, seqs: range, tag: bytes) -> dict[int, tuple]:
        """SENDs seqs (payload TAG-SEQ) at once; their answers within ANSWER_S, each."""
        for s in seqs:
            payload = wire.entry(self.name, s, tag + b"-%d" % s)
            self.pending[s] = (payload, time.monotonic())
            self.raw.send(wire.send_frame(self.pid, s, payload))
        deadline = time.monotonic() + ANSWER_S
        while set(seqs) - set(self.answers) and time.monotonic() < deadline:
            self._pump()
            if self._closed:
                self.recreated += 1
                self._create(deadline - time.monotonic())
                for s, (payload, _) in sorted(self.pending.items()):
                    self.raw.send(wire.send_frame(self.pid, s, payload))
        missing = sorted(set(seqs) - set(self.answers))
        assert not missing, f"unanswered within {ANSWER_S} s: {missing}"
        return {s: self.answers[s] for s in seqs}


def _bookies(bk_cluster) -> int:
    """The session cluster's bookies, all started (test_faults.py may have added a fourth).
    bookie-N directories only: DIR/bookie-extra.conf matches bookie-* too."""
    n = max(3, len(glob.glob(os.path.join(bk_cluster.dir, "bookie-[0-9]*"))))
    bk_cluster.start_bookies(n)
    return n


def _open(bk_cluster, name: str) -> tuple[Broker, RawProducer, str]:
    """A broker on the cluster owning a new topic with a subscription `check` (which keeps every
    entry for the read-back) and a raw-wire producer on it: (broker, producer, topic). The
    caller stops the broker and closes producer.raw."""
    bk_cluster.init_cluster_metadata(CLUSTER)
    broker = Broker(tempfile.mkdtemp(prefix=f"magnetar-{name}-"), 0, bk_cluster.uri)
    try:
        broker.wait_registered()
        topic = f"persistent://public/default/{name}-{uuid.uuid4().hex[:8]}"
        r = requests.get(f"{broker.web}/lookup/v2/topic/{topic.replace('://', '/')}",
                         timeout=30)  # the broker takes the bundle
        assert r.status_code == 200 and r.json()["brokerUrl"] == broker.url, r.text
        r = requests.put(f"{broker.web}/admin/v2/persistent/{topic.split('://', 1)[1]}"
                         "/subscription/check", timeout=30)
        assert r.status_code == 204, r.text
        raw = wire.WireClient(int(broker.url.rsplit(":", 1)[1]), timeout=10)
        raw.handshake()
        producer = RawProducer(raw, topic, name)
    except BaseException:
        broker.stop()
        raise
    return broker, producer, topic


def _stored(broker: Broker, topic: str) -> set[bytes]:
    """Every message the subscription `check` reads."""
    client = pulsar.Client(broker.url, operation_timeout_seconds=30)
    try:
        consumer = client.subscribe(topic, "check")
        stored = set()
        while True:
            try:
                stored.add(consumer.receive(timeout_millis=5000).data())
            except pulsar.Timeout:
                return stored
    finally:
        client.close()


def _resumed_after(producer, seq: int, since: float) -> tuple[float | None, int]:
    """Sends "after-SEQ", one at a time, until one is receipted or 60 s from `since` passed:
    the seconds from `since` to that receipt (None: none came) and the next sequence id."""
    while time.monotonic() < since + 60:
        a = producer.send(range(seq, seq + 1), b"after")
        seq += 1
        if a[seq - 1][0] == wire.SEND_RECEIPT:
            return time.monotonic() - since, seq
    return None, seq


def _assert_stored(broker: Broker, topic: str, want: set[bytes]) -> None:
    """Nothing receipted is lost: the subscription `check` reads all of `want`."""
    stored = _stored(broker, topic)
    assert want <= stored, sorted(want - stored)


def _close(producer, broker: Broker | None) -> None:
    """The raw producer and the broker of _open(), those that exist."""
    if producer:
        producer.raw.close()
    if broker:
        broker.stop()


def test_every_send_is_answered_when_bookies_are_lost(bk_cluster):
    bookies = _bookies(bk_cluster)
    broker = producer = None
    try:
        broker, producer, topic = _open(bk_cluster, "bk-writes")
        before = producer.send(range(5), b"before")
        assert all(a[0] == wire.SEND_RECEIPT for a in before.values()), before

        # Every bookie but one (an earlier test may have added a fourth).
        for i in range(bookies - 1):
            subprocess.run(["bash", BOOKIES_SH, "kill9", "-d", bk_cluster.dir, str(i)],
                           check=True, capture_output=True, timeout=60)
        # Sends after the loss, a few at a time: every one answered within ANSWER_S.
        answers = {}
        answers.update(producer.send(range(5, 10), b"during"))
        answers.update(producer.send(range(10, 15), b"during"))
        seq = 15
        errors = {s: a for s, a in answers.items() if a[0] == wire.SEND_ERROR}
        assert errors, "with one bookie up (ensemble 2) some send must fail"
        assert {a[2] for a in errors.values()} == {"PersistenceError"}, errors
        slowest = max(a[1] for a in answers.values())
        receipted = sorted(s for s, a in answers.items() if a[0] == wire.SEND_RECEIPT)

        assert producer.recreated >= 1, "a failed add closes the producer (Pulsar's addFailed)"
        # The bookies come back: the producer's next send is receipted.
        bk_cluster.start_bookies(bookies)
        resumed, seq = _resumed_after(producer, seq, time.monotonic())
        assert resumed is not None, "no receipt within 60 s of the bookies coming back"
        print(f"\n{bookies - 1} of {bookies} bookies killed: {len(answers)} sends answered, "
              f"{len(errors)} with PersistenceError, {len(receipted)} receipted, "
              f"slowest answer {slowest:.1f} s, producer created again {producer.recreated} "
              f"times; "
              f"receipts again {resumed:.1f} s after the bookies were back")
        # Nothing receipted is lost: the subscription reads every receipted message.
        want = {b"before-%d" % i for i in range(5)} | {b"during-%d" % i for i in receipted}
        _assert_stored(broker, topic, want)
    finally:
        _close(producer, broker)
        subprocess.run(["bash", BOOKIES_SH, "start", "-n", str(bookies), "-d", bk_cluster.dir],
                       capture_output=True, timeout=180)


def _bookie_index(bk_cluster) -> dict[str, int]:
    """Bookie address (127.0.0.1:PORT) -> its index in bookies.sh."""
    out = {}
    for d in glob.glob(os.path.join(bk_cluster.dir, "bookie-[0-9]*")):
        with open(os.path.join(d, "port")) as f:
            out[f"127.0.0.1:{f.read().strip()}"] = int(d.rsplit("-", 1)[1])
    return out


def _set_read_only(bk_cluster, i: int, read_only: bool) -> None:
    p = subprocess.run(["bash", BOOKIES_SH, "readonly" if read_only else "writable", "-d",
                        bk_cluster.dir, str(i)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr


def _current_ensembles(bk_cluster, broker: Broker, topic: str) -> tuple[int, list[list[str]]]:
    """The topic's current (last) ledger and its ensembles, segment by segment, as its
    metadata in ZooKeeper says."""
    r = requests.get(f"{broker.web}/admin/v2/persistent/{topic.split('://', 1)[1]}/internalStats",
                     timeout=30)
    assert r.status_code == 200, r.text
    ledger = r.json()["ledgers"][-1]["ledgerId"]
    rc, out, err = bk_cluster.magnetar("ledgermetadata", "-ledgerid", str(ledger))
    assert rc == 0, err
    segments = re.findall(r"(\d+)=\[([^\]]*)\]", out)
    assert segments, out
    return ledger, [[b.strip() for b in bookies.split(",")] for _, bookies in segments]


def test_every_send_is_answered_when_bookies_turn_read_only(bk_cluster):
    bookies = _bookies(bk_cluster)
    index = _bookie_index(bk_cluster)
    read_only: set[int] = set()
    broker = producer = None
    name = "bk-readonly"
    try:
        broker, producer, topic = _open(bk_cluster, name)
        before = producer.send(range(5), b"before")
        assert all(a[0] == wire.SEND_RECEIPT for a in before.values()), before
        ledger, ensembles = _current_ensembles(bk_cluster, broker, topic)
        x = ensembles[-1][0]  # a bookie of the ensemble taking the next adds

        # x turns read-only: it answers the next adds with EREADONLY, the ensemble changes away
        # from it, and every send is receipted.
        _set_read_only(bk_cluster, index[x], True)
        read_only.add(index[x])
        answers = producer.send(range(5, 10), b"ro")
        answers.update(producer.send(range(10, 15), b"ro"))
        assert all(a[0] == wire.SEND_RECEIPT for a in answers.values()), answers
        slowest_change = max(a[1] for a in answers.values())
        ledger_after, ensembles_after = _current_ensembles(bk_cluster, broker, topic)
        assert x not in ensembles_after[-1], (x, ledger_after, ensembles_after)
        changed = ledger_after == ledger and len(ensembles_after) > len(ensembles)
        assert changed, ("no ensemble change in the ledger", ledger, ensembles, ledger_after,
                         ensembles_after)

        # Every bookie but one (z, of the current ensemble) read-only: no ensemble of 2 remains,
        # each send gets PersistenceError (or a receipt), promptly.
        z = ensembles_after[-1][0]
        for addr, i in sorted(index.items(), key=lambda kv: kv[1]):
            if addr != z and i not in read_only:
                _set_read_only(bk_cluster, i, True)
                read_only.add(i)
        failing = producer.send(range(15, 20), b"none")
        failing.update(producer.send(range(20, 25), b"none"))
        errors = {s: a for s, a in failing.items() if a[0] == wire.SEND_ERROR}
        assert errors, "with one writable bookie (ensemble 2) some send must fail"
        assert {a[2] for a in errors.values()} == {"PersistenceError"}, errors
        slowest_error = max(a[1] for a in failing.values())
        receipted = sorted(s for s, a in failing.items() if a[0] == wire.SEND_RECEIPT)

        # x writable again: with z, the only ensemble of 2, so the next ledger takes x again.
        _set_read_only(bk_cluster, index[x], False)
        read_only.discard(index[x])
        resumed, seq = _resumed_after(producer, 25, time.monotonic())
        assert resumed is not None, "no receipt within 60 s of the bookie turning writable"
        last_ledger, last_ensembles = _current_ensembles(bk_cluster, broker, topic)
        assert sorted(last_ensembles[-1]) == sorted([x, z]), (x, z, last_ledger, last_ensembles)
        print(f"\nbookie {x} of ledger {ledger}'s ensemble read-only: 10 of 10 sends "
              f"receipted, slowest {slowest_change:.2f} s, ensembles {ensembles} -> "
              f"{ensembles_after}; {bookies - 1} of {bookies} read-only: {len(errors)} of "
              f"{len(failing)} PersistenceError, slowest answer {slowest_error:.2f} s; "
              f"{x} writable again: receipts after {resumed:.1f} s, ledger {last_ledger} on "
              f"{last_ensembles[-1]}")

        # Nothing receipted is lost.
        want = ({b"before-%d" % i for i in range(5)} | {b"ro-%d" % i for i in range(5, 15)}
                | {b"none-%d" % i for i in receipted} | {b"after-%d" % (seq - 1)})
        _assert_stored(broker, topic, want)
    finally:
        _close(producer, broker)
        for i in sorted(read_only):  # later tests see every bookie writable
            subprocess.run(["bash", BOOKIES_SH, "writable", "-d", bk_cluster.dir, str(i)],
                           capture_output=True, timeout=120)
