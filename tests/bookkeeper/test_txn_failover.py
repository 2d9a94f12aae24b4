"""Transactions across brokers and a coordinator failover on BookKeeper (issue 45): ZooKeeper + 3
bookies (conftest) + 3 `magnetar broker` processes with transactionCoordinatorEnabled, cluster
"bk-topics", the assign topic with 16 coordinators (initialize-cluster-metadata).

- `test_txn_failover`: WORKERS raw-frame transactional clients, each on its own coordinator
  (worker w uses coordinator w), each talking to the owner of every topic it touches (the input,
  the outputs, the coordinator's assign partition: a client's lookups): consume-transform-produce
  transactions as tests/crash/txn_crash.py's (its `Run` and checker). The output and input topics
  are picked so that at least two brokers own them, so an END_TXN fans out to other brokers
  (END_TXN_ON_PARTITION / END_TXN_ON_SUBSCRIPTION over a broker-to-broker connection). The owner
  of coordinator 0 is killed (-9) KILLS times (default 1; each time the killed broker is started
  again), half the time 0-3 ms after an END_TXN was sent. The workers carry on through the
  failover (looking the coordinator up again), another broker takes the assign partition's
  bundle and recovers the coordinator from its transaction log. After the TTL the checker reads
  everything: each transaction wholly committed or wholly aborted.
  Long form: `MAGNETAR_TXN_FAILOVER_KILLS=10 .venv/bin/python -m pytest -s
  tests/bookkeeper/test_txn_failover.py` (docs/transactions.md).
- `test_non_owner_refuses_tc_client_connect`: TC_CLIENT_CONNECT_REQUEST for a coordinator whose
  assign partition another broker owns answers ServiceNotReady with Pulsar 4.2's text
  (BrokerService.checkTopicNsOwnership, called by TransactionMetadataStoreService
  .handleTcClientConnect), and NEW_TXN there TransactionCoordinatorNotFound; the owner serves it.
  (Pulsar's standalone owns every bundle, so this is a cluster-only behaviour.)
"""

import json
import os
import random
import signal
import sys
import threading
import time
import uuid

import pytest
from conftest import cluster_brokers
from test_failover import SESSION_TIMEOUT_MS, Broker, Cluster  # noqa: F401

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crash"))
import txn_crash  # noqa: E402

from harness.broker import BrokerEndpoint  # noqa: E402
from harness.transactions import (  # noqa: E402
    NEW_TXN,
    NEW_TXN_RESPONSE,
    TC_ASSIGN,
    TC_CLIENT_CONNECT_REQUEST,
    TC_CLIENT_CONNECT_RESPONSE,
    TxnError,
    TxnWire,
)
from hostile_wire import MESSAGE, decode, fv  # noqa: E402

KILLS = int(os.environ.get("MAGNETAR_TXN_FAILOVER_KILLS", "1"))
SEED = int(os.environ.get("MAGNETAR_TXN_FAILOVER_SEED", "7"))
WORKERS = 4
TTL_MS = 5000
K = 3


@pytest.fixture(scope="module")
def txn_cluster(bk_cluster):
    def started(base: str, i: int) -> Broker:
        b = Broker(base, i, bk_cluster.uri, ("transactionCoordinatorEnabled=true",))
        b.start()
        return b
    with cluster_brokers(bk_cluster, "bk-topics", started, 3, "magnetar-bk-txn-") as brokers:
        yield Cluster(bk_cluster, brokers)


def endpoint(b: Broker) -> BrokerEndpoint:
    return BrokerEndpoint("magnetar", b.url, b.web)


class Routed:
    """A transactional client over several brokers, with TxnWire's interface as txn_crash.Run
    uses it: the coordinator `tc_id` on its owner's connection, each topic on its owner's."""

    def __init__(self, cl: Cluster, tc_id: int) -> None:
        self.cl = cl
        self.wires: dict[str, TxnWire] = {}
        self.owners: dict[str, str] = {}
        try:
            owner = cl.owner(f"{TC_ASSIGN}-partition-{tc_id}", timeout=20)
            self.tc = TxnWire(endpoint(owner), connect_tc=True, tc_id=tc_id)
            self.wires[owner.url] = self.tc
            self.input = self._wire(txn_crash.INPUT)
            self.input.subscribe(txn_crash.INPUT, txn_crash.SUB, 1)
        except BaseException:
            self.close()
            raise

    def _wire(self, topic: str) -> TxnWire:
        if topic not in self.owners:
            self.owners[topic] = self.cl.owner(topic, timeout=20).url
        url = self.owners[topic]
        if url not in self.wires:
            b = self.cl.by_url(url)
            self.wires[url] = TxnWire(endpoint(b), connect_tc=False)
        return self.wires[url]

    @property
    def messages(self) -> list:
        if not self.input.messages:  # MESSAGEs are read only while the input wire is waited on
            for ctype, body in self.input.wire.commands_within(0.05):
                if ctype == MESSAGE:
                    md_id = decode(body[2][0])
                    self.input.messages.append((body[1][0], md_id[1][0], md_id[2][0], b""))
        return self.input.messages

    def new_txn(self, ttl_ms: int) -> tuple[int, int]:
        return self.tc.new_txn(ttl_ms)

    def add_partition(self, txn, topic: str) -> None:
        self.tc.add_partition(txn, topic)

    def add_subscription(self, txn, topic: str, sub: str) -> None:
        self.tc.add_subscription(txn, topic, sub)

    def end(self, txn, action: int) -> None:
        self.tc.end(txn, action)

    def ack(self, consumer_id: int, ledger: int, entry: int, txn) -> None:
        self.input.ack(consumer_id, ledger, entry, txn)

    def send(self, topic: str, payload: bytes, txn) -> None:
        self._wire(topic).send(topic, payload, txn)

    def close(self) -> None:
        for w in self.wires.values():
            w.close()


def spread_topics(cl: Cluster) -> None:
    """Fresh input and output names for this run (the bookies' ZooKeeper is shared), picked so
    that at least two brokers own them."""
    for _ in range(20):
        tag = uuid.uuid4().hex[:6]
        ns = txn_crash.NS
        inp, outs = f"{ns}/txfo-in-{tag}", [f"{ns}/txfo-out-{tag}-{i}" for i in range(3)]
        owners = {cl.owner(t).url for t in [inp, *outs]}
        if len(owners) >= 2:
            txn_crash.INPUT, txn_crash.OUTPUTS = inp, outs
            return
    pytest.fail("every topic lands on one broker")


def worker(cl: Cluster, run: "txn_crash.Run", w: int) -> None:
    n = 0
    while not run.stop.is_set():
        try:
            tx = Routed(cl, w)
        except Exception:  # noqa: BLE001 - the coordinator's owner dead, not taken over yet
            time.sleep(0.3)
            continue
        try:
            while not run.stop.is_set():
                n += 1
                run.one_txn(tx, f"w{w}t{n}")
        except Exception:  # noqa: BLE001 - a broker killed: look everything up again
            pass
        finally:
            tx.close()


def kill_owner_of_coordinator(cl: Cluster, run: "txn_crash.Run", rng: random.Random) -> dict:
    victim = cl.owner(f"{TC_ASSIGN}-partition-0")
    at_end = rng.random() < 0.5
    if at_end:
        run.end_sent.clear()
        run.end_sent.wait(10)
        time.sleep(rng.uniform(0, 0.003))
    victim.kill(signal.SIGKILL)
    return {"killed": victim.i, "kill": "after END_TXN" if at_end else "during the workload"}


def test_txn_failover(txn_cluster, bk_cluster):
    cl = txn_cluster
    rng = random.Random(SEED)
    spread_topics(cl)
    alive = [b for b in cl.brokers if b.alive()]
    txn_crash.produce_inputs(endpoint(alive[0]), 400)
    run = txn_crash.Run(rng, K, TTL_MS)
    threads = [threading.Thread(target=worker, args=(cl, run, w), daemon=True)
               for w in range(WORKERS)]
    rounds = []
    for t in threads:
        t.start()
    try:
        assert run.began.wait(60), "no transaction began"
        for _ in range(KILLS):
            time.sleep(rng.uniform(1.0, 3.0))
            rounds.append(kill_owner_of_coordinator(cl, run, rng))
            killed = cl.brokers[rounds[-1]["killed"]]
            # the session expires, another broker takes coordinator 0 and recovers it
            time.sleep(SESSION_TIMEOUT_MS / 1000 + 4)
            killed.start()
            killed.wait_registered()
        time.sleep(3)
    finally:
        run.stop.set()
        for t in threads:
            t.join(30)
    for w in range(WORKERS):  # every coordinator used is loaded somewhere
        Routed(cl, w).close()
    time.sleep(TTL_MS / 1000 * 1.5 + 2)  # open txns time out; fan-outs retried
    stored = txn_crash.read_outputs(
        BrokerEndpoint("magnetar", cl.service_url, cl.brokers[0].web))
    report = txn_crash.check(run, stored)
    print(json.dumps(report["figures"]), rounds)
    assert report["violations"] == [], report["violations"]
    assert report["figures"]["committed"] > 0


def test_non_owner_refuses_tc_client_connect(txn_cluster):
    cl = txn_cluster
    tc_id = 5
    partition = f"{TC_ASSIGN}-partition-{tc_id}"
    owner = cl.owner(partition)
    other = next(b for b in cl.brokers if b is not owner and b.alive())
    wire = TxnWire(endpoint(other), connect_tc=False)
    try:
        with pytest.raises(TxnError) as e:
            wire.request(TC_CLIENT_CONNECT_REQUEST, fv(2, tc_id), TC_CLIENT_CONNECT_RESPONSE, 2)
        assert e.value.error == "ServiceNotReady"
        broker_id = other.web.removeprefix("http://")
        assert e.value.message.startswith("Namespace bundle (pulsar/system/0x"), e.value.message
        assert e.value.message.endswith(
            f") for topic ({partition}) not served by this instance:{broker_id}. "
            "Please redo the lookup."), e.value.message
        with pytest.raises(TxnError) as e:
            wire.request(NEW_TXN, fv(2, 1000) + fv(3, tc_id), NEW_TXN_RESPONSE)
        assert e.value.error == "TransactionCoordinatorNotFound"
        assert e.value.message == f"Transaction coordinator with id {tc_id} not found!"
    finally:
        wire.close()
    served = TxnWire(endpoint(owner), tc_id=tc_id)  # the owner serves it
    try:
        assert served.new_txn(1000)[0] == tc_id
    finally:
        served.close()
