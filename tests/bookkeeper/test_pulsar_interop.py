"""A real Apache Pulsar 4.2.4 broker (tools/pulsar-reference/pulsar-broker.sh, cluster mode) and a
Magnetar broker in one cluster at the same time: one ZooKeeper (a chroot of this directory's),
the same 3 bookies, the same clusterName, metadata from `magnetar initialize-cluster-metadata`.

A topic written by either broker is unloaded by its owner and taken by the other (an
authoritative lookup there), which serves every message under the same message id (reader from
earliest, admin get-message-by-id), resumes the subscription at its cursor (acknowledged
messages, holes, batch indexes and whole batches not delivered again, the others in order) and
the producer's deduplication state. Both directions through unload, then Magnetar -> Pulsar
through a SIGTERM of the Magnetar broker, then Pulsar -> a new Magnetar broker through a kill -9
of the Pulsar broker (recovery of its open ledgers); one Pulsar start. Pulsar's
PulsarClusterMetadataSetup followed by a Magnetar broker is the second test. Skipped when Java is
missing or the Pulsar jars are absent and cannot be resolved (no Maven)."""

import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
import zlib

import pulsar
import pytest
import requests
from conftest import REPO, broker_urls, magnetar_bin, stop_process, wait_registered

PULSAR_BROKER_SH = os.path.join(REPO, "tools", "pulsar-reference", "pulsar-broker.sh")
PULSAR_LIB = os.path.join(REPO, "tools", "pulsar-reference", "lib", ".complete")
CLUSTER = "interop"
PULSAR_SESSION_TIMEOUT_MS = 5000
# Both brokers: ledgers of 2 bookies written to 2, rolled over every 50 entries, so that each
# side's topic spans several ledgers.
LEDGER_SETTINGS = (
    "managedLedgerDefaultEnsembleSize=2",
    "managedLedgerDefaultWriteQuorum=2",
    "managedLedgerDefaultAckQuorum=2",
    "managedLedgerMaxEntriesPerLedger=50",
    "managedLedgerMinLedgerRolloverTimeMinutes=0",
    "brokerDeduplicationEnabled=true",
    # A deduplication snapshot (the "pulsar.dedup" cursor's properties) every 25 entries.
    "brokerDeduplicationEntriesInterval=25",
    "acknowledgmentAtBatchIndexLevelEnabled=true",
    # Every broker here runs on this one host and reports its CPU: on a loaded machine all would
    # count as overloaded and placement would pick at random (docs/cluster-mode.md "Placement").
    "loadBalancerCPUResourceWeight=0",
)


def pulsar_available() -> str:
    """Why the Pulsar broker cannot run here, or "" when it can."""
    if shutil.which("java") is None:
        return "java not installed (scripts/install-test-deps.sh)"
    if not os.path.exists(PULSAR_LIB) and shutil.which("mvn") is None:
        return "Pulsar jars absent (tools/pulsar-reference/lib) and no mvn to resolve them"
    return ""


pytestmark = pytest.mark.skipif(bool(pulsar_available()), reason=pulsar_available() or "-")


def read_ports(path: str) -> dict:
    return dict(line.strip().split("=", 1) for line in open(path) if "=" in line)


class MagnetarBroker:
    def __init__(self, base: str, meta: str, bk_uri: str, cluster: str, name="magnetar",
                 extra: tuple[str, ...] = ()) -> None:
        """extra: more settings (key=value)."""
        self.dir = os.path.join(base, name)
        os.makedirs(self.dir, exist_ok=True)
        self.ports_file = os.path.join(self.dir, "ports")
        self.log_path = os.path.join(self.dir, "broker.log")
        self.log = open(self.log_path, "w")
        settings = (
            f"metadataStoreUrl={meta}",
            f"clusterName={cluster}",
            "advertisedAddress=127.0.0.1",
            "bindAddress=127.0.0.1",
            "brokerServicePort=0",
            "webServicePort=0",
            f"journalDirectory={self.dir}/data/journal",
            f"bookkeeperMetadataServiceUri={bk_uri}",
            *LEDGER_SETTINGS,
            *extra,
        )
        self.proc = subprocess.Popen(
            [
                magnetar_bin(),
                "broker",
                "--ports-file",
                self.ports_file,
                *[a for kv in settings for a in ("--set", kv)],
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.url = self.web = ""

    def wait_registered(self) -> None:
        self.url, self.web = broker_urls(wait_registered(self.proc, self.log_path, self.ports_file))

    def stop(self) -> None:
        stop_process(self.proc)
        self.log.close()


class PulsarBroker:
    def __init__(self, base: str, meta: str, bk_uri: str, cluster: str = CLUSTER,
                 extra: tuple[str, ...] = ()) -> None:
        """extra: more settings (key=value) for its broker.conf."""
        self.dir = os.path.join(base, "pulsar")
        self.meta, self.bk_uri = meta, bk_uri
        self.cluster, self.extra = cluster, extra
        self.url = self.web = ""
        self.took = 0.0

    def start(self) -> None:
        sets = [
            *LEDGER_SETTINGS,
            # A closing cursor with acknowledgement holes writes them to its cursor ledger (not
            # into its znode), so Magnetar recovers Pulsar's PositionInfo from the ledger.
            "managedLedgerMaxUnackedRangesToPersistInMetadataStore=0",
            # Every acknowledgement written at once (Pulsar's default: at most one mark-delete a
            # second, the rest flushed within a minute), so a kill -9 loses none of them.
            "managedLedgerDefaultMarkDeleteRateLimit=0",
            f"metadataStoreSessionTimeoutMillis={PULSAR_SESSION_TIMEOUT_MS}",
            *self.extra,
        ]
        start = time.monotonic()
        p = subprocess.run(
            [
                "bash",
                PULSAR_BROKER_SH,
                "start",
                "-d",
                self.dir,
                "-m",
                self.meta,
                "-b",
                self.bk_uri,
                "-c",
                self.cluster,
                "--timeout",
                "180",
                *[a for kv in sets for a in ("--set", kv)],
            ],
            capture_output=True,
            text=True,
            timeout=900,  # the first run resolves the jars from Maven Central
        )
        self.took = time.monotonic() - start
        log = os.path.join(self.dir, "logs", "pulsar.log")
        tail = open(log).read()[-3000:] if os.path.exists(log) else ""
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:] + tail
        ports = read_ports(os.path.join(self.dir, "ports"))
        self.url = f"pulsar://127.0.0.1:{ports['brokerServicePort']}"
        self.web = f"http://127.0.0.1:{ports['webServicePort']}"

    def stop(self) -> None:
        subprocess.run(
            ["bash", PULSAR_BROKER_SH, "stop", "-d", self.dir], capture_output=True, timeout=60
        )

    def kill(self) -> None:
        """kill -9 of the broker's JVM; returns once it is gone."""
        pid_file = os.path.join(self.dir, "pulsar.pid")
        pid = int(open(pid_file).read())
        os.kill(pid, signal.SIGKILL)
        for _ in range(100):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        os.remove(pid_file)


def bundle_of(web: str, topic: str) -> str:
    """The bundle of `topic` in public/default: CRC32 of the name within the namespace's cut."""
    bounds = requests.get(f"{web}/admin/v2/namespaces/public/default/bundles", timeout=10).json()
    cut = [int(b, 16) for b in bounds["boundaries"]]
    h = zlib.crc32(topic.encode())
    i = max(k for k in range(len(cut) - 1) if cut[k] <= h)
    return bounds["boundaries"][i] + "_" + bounds["boundaries"][i + 1]


def lookup(web: str, topic: str, authoritative: bool) -> str:
    """The owner's broker URL, as `web` answers an HTTP lookup (redirects followed)."""
    flag = "true" if authoritative else "false"
    r = requests.get(
        f"{web}/lookup/v2/topic/{topic.replace('://', '/')}?authoritative={flag}", timeout=30
    )
    assert r.status_code == 200, (r.status_code, r.text)
    return r.json()["brokerUrl"]


def lookup_or_none(web: str, topic: str):
    """The owner's broker URL, or None while the lookup fails (a dead owner's znode not gone)."""
    try:
        r = requests.get(f"{web}/lookup/v2/topic/{topic.replace('://', '/')}", timeout=10)
    except requests.RequestException:
        return None
    return r.json().get("brokerUrl") if r.status_code == 200 else None


def topic_owned_by(broker, tag: str) -> str:
    """A new topic whose bundle `broker` takes (authoritative lookup there); names whose bundle
    the other broker owns already are skipped."""
    for i in range(64):
        topic = f"persistent://public/default/{tag}-{uuid.uuid4().hex[:6]}-{i}"
        if lookup(broker.web, topic, authoritative=True) == broker.url:
            return topic
    raise AssertionError(f"{broker.url} took none of 64 bundles")


def mid(m) -> tuple:
    return (m.ledger_id(), m.entry_id(), m.batch_index())


# 60 single messages, then 3 batches of 10; the subscription acknowledges m-0..m-19, m-30, m-31,
# m-40 (holes: ranges after the mark-delete position), m-65 and m-66 (two messages of a batch:
# batch-index acknowledgement, on in both brokers) and the whole batch m-70..m-79.
SINGLE, BATCHED = 60, 30
ACKED = set(range(20)) | {30, 31, 40, 65, 66} | set(range(70, 80))
# Subscription -> (batch-index acks on, messages acknowledged). Without batch-index acks the
# client holds back m-65/m-66 until their whole batch is acknowledged, so "holes" has no
# batch-index state: a clean close writes it into its znode, "sub" into its cursor ledger.
SUBSCRIPTIONS = {"sub": (True, ACKED), "holes": (False, ACKED - {65, 66})}


def write_on(src, topic: str) -> list:
    """Writes the messages through `src` (the owner), acknowledges on each of SUBSCRIPTIONS;
    returns the message ids the owner gave, in order."""
    client = pulsar.Client(src.url, operation_timeout_seconds=30)
    try:
        consumers = {
            name: client.subscribe(
                topic,
                name,
                initial_position=pulsar.InitialPosition.Earliest,
                batch_index_ack_enabled=batch_acks,
            )
            for name, (batch_acks, _) in SUBSCRIPTIONS.items()
        }
        producer = client.create_producer(
            topic, producer_name=f"{topic}-single", batching_enabled=False
        )
        ids = [mid(producer.send(f"m-{k}".encode())) for k in range(SINGLE)]
        assert producer.last_sequence_id() == SINGLE - 1
        batcher = client.create_producer(
            topic,
            batching_enabled=True,
            batching_max_messages=10,
            batching_max_publish_delay_ms=1000,
        )
        done = {}
        for k in range(SINGLE, SINGLE + BATCHED):
            batcher.send_async(f"m-{k}".encode(), lambda res, m, k=k: done.__setitem__(k, m))
        batcher.flush()
        deadline = time.monotonic() + 10  # the last callback may still wait for the GIL
        while len(done) < BATCHED and time.monotonic() < deadline:
            time.sleep(0.01)
        ids += [mid(done[k]) for k in range(SINGLE, SINGLE + BATCHED)]
        assert len({i[:2] for i in ids}) == SINGLE + BATCHED // 10, ids  # 63 entries
        for name, consumer in consumers.items():
            for k in range(SINGLE + BATCHED):
                m = consumer.receive(timeout_millis=10000)
                assert m.data() == f"m-{k}".encode()
                if k in SUBSCRIPTIONS[name][1]:
                    consumer.acknowledge(m)
        time.sleep(1)  # acknowledgements reach the broker (the client sends them on a timer)
    finally:
        client.close()
    assert len({i[0] for i in ids}) >= 2, ids  # rolled over: more than one ledger
    return ids


def unload(src, dst, topic: str) -> None:
    """Unloads the topic's bundle on `src` and has `dst` take it."""
    bundle = bundle_of(dst.web, topic)
    r = requests.put(f"{src.web}/admin/v2/namespaces/public/default/{bundle}/unload", timeout=60)
    assert r.status_code == 204, (r.status_code, r.text)
    assert lookup(dst.web, topic, authoritative=True) == dst.url


def check_served(dst, topic: str, ids: list) -> None:
    """What `dst` serves of a topic the other broker wrote (write_on)."""
    client = pulsar.Client(dst.url, operation_timeout_seconds=60)
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        seen = []
        while len(seen) < len(ids):
            m = reader.read_next(timeout_millis=30000)
            seen.append((m.data().decode(), mid(m.message_id())))
        assert seen == [(f"m-{k}", ids[k]) for k in range(len(ids))], seen[:5]
        assert not reader.has_message_available()

        # Admin get-message-by-id: the first message of each ledger holding single messages.
        local = topic.rsplit("/", 1)[1]
        for k in sorted({ids[k][0]: k for k in reversed(range(SINGLE))}.values()):
            ledger, entry, _ = ids[k]
            r = requests.get(
                f"{dst.web}/admin/v2/persistent/public/default/{local}/ledger/{ledger}/entry/{entry}",
                timeout=30,
            )
            assert r.status_code == 200 and r.content == f"m-{k}".encode(), (k, r.status_code)

        for name, (batch_acks, acked) in SUBSCRIPTIONS.items():
            consumer = client.subscribe(topic, name, batch_index_ack_enabled=batch_acks)
            want = [f"m-{k}" for k in range(len(ids)) if k not in acked]
            got = [consumer.receive(timeout_millis=30000).data().decode() for _ in want]
            assert got == want, (dst.url, name, got)
            with pytest.raises(pulsar.Timeout):
                consumer.receive(timeout_millis=1000)  # nothing acknowledged comes again

        if isinstance(dst, PulsarBroker):
            # Magnetar's deduplication snapshot, as Pulsar recovered it: the "pulsar.dedup"
            # cursor's properties name the producer and a sequence id it sent. (Magnetar's
            # internalStats lists subscriptions only, not this cursor.)
            r = requests.get(
                f"{dst.web}/admin/v2/persistent/public/default/{local}/internalStats", timeout=30
            )
            assert r.status_code == 200, r.text
            snapshot = r.json()["cursors"]["pulsar.dedup"]["properties"]
            assert 0 <= snapshot.get(f"{topic}-single", -1) < SINGLE, (dst.url, snapshot)

        # The new owner writes on, in a ledger of its own. Deduplication (on in both brokers)
        # knows the producer's last sequence id from what the old owner stored ("pulsar.dedup"
        # cursor and the entries after it) and drops a resend of it.
        producer = client.create_producer(
            topic, producer_name=f"{topic}-single", batching_enabled=False
        )
        assert producer.last_sequence_id() == SINGLE - 1
        producer.send(b"resent", sequence_id=SINGLE - 1)
        sent = producer.send(b"after")
        assert sent.ledger_id() > max(i[0] for i in ids)
        assert consumer.receive(timeout_millis=30000).data() == b"after"
    finally:
        client.close()


def test_magnetar_and_pulsar_brokers_share_a_cluster_and_hand_topics_over(bk_cluster):
    bk_cluster.start_bookies()  # earlier tests kill bookies
    meta = f"zk:{bk_cluster.zk}/interop-{uuid.uuid4().hex[:8]}"
    bk_cluster.init_cluster_metadata(CLUSTER, meta)
    base = tempfile.mkdtemp(prefix="magnetar-pulsar-interop-")
    magnetar = MagnetarBroker(base, meta, bk_cluster.uri, CLUSTER)
    pulsar_broker = PulsarBroker(base, meta, bk_cluster.uri)
    try:
        magnetar.wait_registered()
        pulsar_broker.start()  # Pulsar starts on the metadata Magnetar initialised
        # Both registered under /loadbalance/brokers, each seen by the other; one leader for both.
        ids = {b.web.removeprefix("http://") for b in (magnetar, pulsar_broker)}
        for b in (magnetar, pulsar_broker):
            r = requests.get(f"{b.web}/admin/v2/brokers/{CLUSTER}", timeout=10)
            assert r.status_code == 200 and set(r.json()) == ids, (b.web, r.text)
        leaders = [
            requests.get(f"{b.web}/admin/v2/brokers/leaderBroker", timeout=10).json()["brokerId"]
            for b in (magnetar, pulsar_broker)
        ]
        assert leaders[0] == leaders[1] and leaders[0] in ids, leaders
        leader = "Magnetar" if leaders[0] == magnetar.web.removeprefix("http://") else "Pulsar"
        # The Magnetar broker, started first, leads; the Pulsar broker follows it, redirects its
        # lookups there, and the Magnetar leader places new bundles on both kinds.
        assert leader == "Magnetar", leaders
        owners = {
            lookup(pulsar_broker.web, f"persistent://public/default/placed-{i}", False)
            for i in range(6)
        }
        assert owners == {magnetar.url, pulsar_broker.url}, owners

        start = time.monotonic()
        for src, dst, tag in ((magnetar, pulsar_broker, "m2p"), (pulsar_broker, magnetar, "p2m")):
            topic = topic_owned_by(src, tag)
            ids_given = write_on(src, topic)
            unload(src, dst, topic)
            check_served(dst, topic, ids_given)
        # Sequential handover: a Magnetar broker stopped with SIGTERM closes its topics (cursor
        # states into the cursor znode, or the cursor ledger with batch-index acks); the Pulsar
        # broker, alone now, serves them.
        topic = topic_owned_by(magnetar, "m2p-stop")
        ids_given = write_on(magnetar, topic)
        magnetar.stop()
        assert lookup(pulsar_broker.web, topic, authoritative=False) == pulsar_broker.url
        check_served(pulsar_broker, topic, ids_given)

        # Failover: the Pulsar broker killed (-9) while it owns a topic it wrote; a new Magnetar
        # broker takes it once Pulsar's session expired, recovering (fencing) the open data
        # ledger and the cursor ledger Pulsar was appending to.
        magnetar = MagnetarBroker(base, meta, bk_cluster.uri, CLUSTER, name="magnetar-2")
        magnetar.wait_registered()
        topic = topic_owned_by(pulsar_broker, "p2m-kill")
        ids_given = write_on(pulsar_broker, topic)
        pulsar_broker.kill()
        killed = time.monotonic()
        while lookup_or_none(magnetar.web, topic) != magnetar.url:
            assert time.monotonic() - killed < 60, "Pulsar's bundle not taken 60 s after the kill"
            time.sleep(0.5)
        took_over = time.monotonic() - killed
        check_served(magnetar, topic, ids_given)
        print(
            f"\nPulsar broker healthy {pulsar_broker.took:.0f} s after its start; after its kill "
            f"-9 Magnetar served its topic in {took_over:.1f} s (session timeout "
            f"{PULSAR_SESSION_TIMEOUT_MS / 1000:.0f} s); the four "
            f"handovers checked in {time.monotonic() - start:.1f} s"
        )
    finally:
        pulsar_broker.stop()
        magnetar.stop()
        shutil.rmtree(base, ignore_errors=True)


def test_pulsar_cluster_metadata_setup_then_magnetar_broker(bk_cluster):
    bk_cluster.start_bookies()  # earlier tests kill bookies
    meta = f"zk:{bk_cluster.zk}/pulsar-init-{uuid.uuid4().hex[:8]}"
    base = tempfile.mkdtemp(prefix="magnetar-pulsar-init-")
    p = subprocess.run(
        [
            "bash",
            PULSAR_BROKER_SH,
            "init-cluster",
            "-d",
            base,
            "-m",
            meta,
            "-b",
            bk_cluster.uri,
            "-c",
            "pulsar-init",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    magnetar = MagnetarBroker(base, meta, bk_cluster.uri, "pulsar-init")
    client = None
    try:
        magnetar.wait_registered()
        topic = f"persistent://public/default/after-pulsar-init-{uuid.uuid4().hex[:6]}"
        client = pulsar.Client(magnetar.url, operation_timeout_seconds=30)
        consumer = client.subscribe(topic, "s")
        client.create_producer(topic).send(b"hello")
        assert consumer.receive(timeout_millis=10000).data() == b"hello"
        r = requests.get(f"{magnetar.web}/admin/v2/namespaces/public", timeout=10)
        assert r.status_code == 200 and "public/default" in r.json(), r.text
    finally:
        if client:
            client.close()
        magnetar.stop()
        shutil.rmtree(base, ignore_errors=True)


# Compacted views: key -> values in the order sent; k3's last value is empty (deleted).
COMPACT_SENDS = [
    ("k0", "a"), ("k1", "a"), ("k2", "a"), ("k3", "a"), ("k0", "b"), ("k1", "b"),
    ("k3", "b"), ("k0", "c"), ("k3", ""), ("k4", "a"),
]  # fmt: skip
# Sent in one batch after the singles: k5 twice inside the batch, k1 once more.
COMPACT_BATCH = [("k5", "a"), ("k5", "b"), ("k1", "c"), ("k6", "a")]


def compact_expected() -> dict:
    latest = {}
    for k, v in COMPACT_SENDS + COMPACT_BATCH:
        latest[k] = v
    return {k: v for k, v in latest.items() if v}


def write_keys(src, topic: str) -> None:
    client = pulsar.Client(src.url, operation_timeout_seconds=30)
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        for k, v in COMPACT_SENDS:
            producer.send(v.encode(), partition_key=k)
        batcher = client.create_producer(
            topic, batching_enabled=True, batching_max_messages=len(COMPACT_BATCH),
            batching_max_publish_delay_ms=1000,
        )  # fmt: skip
        for k, v in COMPACT_BATCH:
            batcher.send_async(v.encode(), lambda res, m: None, partition_key=k)
        batcher.flush()
    finally:
        client.close()


def compact_on(owner, topic: str) -> None:
    """Compacts `topic` on its owner and waits for SUCCESS."""
    path = f"{owner.web}/admin/v2/persistent/public/default/{topic.rsplit('/', 1)[1]}/compaction"
    r = requests.put(path, timeout=30)
    assert r.status_code in (200, 204), (r.status_code, r.text)
    for _ in range(300):
        status = requests.get(path, timeout=10).json()
        if status.get("status") == "SUCCESS":
            return
        assert status.get("status") != "ERROR", status
        time.sleep(0.1)
    raise AssertionError(f"compaction of {topic} on {owner.url} did not end: {status}")


def read_compacted(dst, topic: str) -> list:
    """(key, value) of everything a read_compacted reader from earliest gets on `dst`."""
    client = pulsar.Client(dst.url, operation_timeout_seconds=60)
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
        got = []
        while True:
            try:
                m = reader.read_next(timeout_millis=5000)
            except pulsar.Timeout:
                return got
            if m.partition_key():  # not a compacted_out placeholder of a re-batched batch
                got.append((m.partition_key(), m.data().decode()))
    finally:
        client.close()


def test_compacted_views_are_shared_with_pulsar(bk_cluster):
    """Magnetar compacts, Pulsar serves the topic: a read_compacted reader on Pulsar gets the
    latest value per key (Pulsar reads Magnetar's compacted ledger); and the reverse."""
    bk_cluster.start_bookies()  # earlier tests kill bookies
    meta = f"zk:{bk_cluster.zk}/compact-{uuid.uuid4().hex[:8]}"
    bk_cluster.init_cluster_metadata(CLUSTER, meta)
    base = tempfile.mkdtemp(prefix="magnetar-pulsar-compact-")
    magnetar = MagnetarBroker(base, meta, bk_cluster.uri, CLUSTER)
    pulsar_broker = PulsarBroker(base, meta, bk_cluster.uri)
    want = compact_expected()
    try:
        magnetar.wait_registered()
        pulsar_broker.start()
        for src, dst, tag in ((magnetar, pulsar_broker, "cm2p"), (pulsar_broker, magnetar, "cp2m")):
            topic = topic_owned_by(src, tag)
            write_keys(src, topic)
            compact_on(src, topic)
            before = read_compacted(src, topic)
            assert dict(before) == want and len(before) == len(want), (src.url, before)
            unload(src, dst, topic)
            got = read_compacted(dst, topic)
            # Exactly the latest value of each live key: the view, not the uncompacted log.
            assert dict(got) == want and len(got) == len(want), (tag, dst.url, got)
            # The new owner compacts on after what it wrote: the view it writes now is its own
            # format, read by the first owner after a second handover.
            client = pulsar.Client(dst.url, operation_timeout_seconds=30)
            try:
                client.create_producer(topic, batching_enabled=False).send(b"z", partition_key="k0")
            finally:
                client.close()
            compact_on(dst, topic)
            unload(dst, src, topic)
            got = read_compacted(src, topic)
            assert dict(got) == {**want, "k0": "z"} and len(got) == len(want), (tag, src.url, got)
    finally:
        pulsar_broker.stop()
        magnetar.stop()
        shutil.rmtree(base, ignore_errors=True)
