"""Broker RSS under producer/consumer churn: starts `magnetar standalone`, then C clients (one
connection each, in threads, each on its own topic by default) each repeat "subscribe, create a
producer, send one message, receive and ack it, close both" until N cycles are done in all, and
report the broker's RSS every --report-every cycles. Exits 1 when RSS grew by more than
--max-growth-bytes-per-cycle between the first report (after warm-up) and the last.

--names same: each client reuses its producer name, subscription and consumer name every cycle
(what an application that reconnects does). --names distinct: the broker names every producer
(a new name each cycle, as for a client without producer_name) and every consumer gets a new
name; the subscription stays per client (a subscription is durable state by design).
--no-send: create and close only.

What to expect (docs/memory-limits.md, "Churn"): create/close holds RSS flat (about 1-2 bytes
per cycle, same or distinct names). Each message sent adds about 500 bytes while it is in the
current ledger: the location of every stored entry (the ledger's index and the journal's live
runs, plus RocksDB's memtable) stays until the ledger rolls over (managedLedgerMaxEntriesPerLedger)
and, once consumed, is deleted. With brokerDeduplicationEnabled each distinct producer name is
kept (its last sequence id) for brokerDeduplicationProducerInactivityTimeoutMinutes, as Pulsar.

Full form (100,000 cycles, RSS every 10,000), about 80 s each:

  MAGNETAR_BIN=build/src/app/magnetar /work/main/.venv/bin/python \\
      tools/memory/churn.py --cycles 100000 --names same
  MAGNETAR_BIN=build/src/app/magnetar /work/main/.venv/bin/python \\
      tools/memory/churn.py --cycles 100000 --names distinct --no-send

CI runs a small form (scripts/test.sh): 20,000 create/close cycles, at most 32 bytes per cycle.
"""

import argparse
import os
import sys
import threading
import time

import pulsar

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests"))
from harness.broker import MagnetarProcess  # noqa: E402
from harness.util import proc_status_kb  # noqa: E402

# The clients log their reconnects after the broker is stopped: not worth showing.
QUIET = pulsar.FileLogger(pulsar.LoggerLevel.Error, os.devnull)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cycles", type=int, default=100_000)
    ap.add_argument("--clients", type=int, default=40)
    ap.add_argument("--topics", type=int, default=40,
                    help="topics the clients are spread over (default: one per client)")
    ap.add_argument("--names", choices=["same", "distinct"], default="same")
    ap.add_argument("--report-every", type=int, default=10_000)
    ap.add_argument("--no-send", action="store_true",
                    help="only create and close (no message per cycle)")
    ap.add_argument("--max-growth-bytes-per-cycle", type=float, default=0,
                    help="fail above this growth from the first report to the last (0: report)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="further broker settings")
    args = ap.parse_args()

    broker = MagnetarProcess(args.set, prefix="magnetar-memory-")
    done = [0]
    lock = threading.Lock()
    errors: list[str] = []
    stop = threading.Event()
    reports: list[tuple[int, float, float]] = []  # (cycles, RSS MB, seconds)
    try:
        endpoint = broker.start()
        pid = broker.pid
        assert pid
        stamp = int(time.time() * 1000)
        topics = [f"persistent://public/default/churn-{stamp}-{t}" for t in range(args.topics)]

        def client_loop(i: int) -> None:
            client = pulsar.Client(endpoint.service_url, operation_timeout_seconds=60, logger=QUIET)
            topic = topics[i % len(topics)]
            n = 0
            try:
                while not stop.is_set():
                    with lock:
                        if done[0] >= args.cycles:
                            return
                    if args.names == "same":
                        pname, cname = f"churn-p-{i}", f"churn-c-{i}"
                    else:
                        pname, cname = None, f"churn-c-{i}-{n}"
                    kw = {"producer_name": pname} if pname else {}
                    consumer = client.subscribe(topic, f"churn-sub-{i}", consumer_name=cname,
                                                receiver_queue_size=10)
                    producer = client.create_producer(topic, batching_enabled=False, **kw)
                    if not args.no_send:
                        producer.send(b"churn %d %d" % (i, n))
                        consumer.acknowledge(consumer.receive(30_000))
                    producer.close()
                    consumer.close()
                    n += 1
                    with lock:
                        done[0] += 1
            except Exception as e:  # noqa: BLE001
                errors.append(f"client {i}: {e}")
                stop.set()
            finally:
                client.close()

        start = time.time()
        base = proc_status_kb(pid, "VmRSS") / 1024
        print(f"binary: {broker.binary}")
        print(f"start: RSS {base:.1f} MB; {args.clients} clients, {args.topics} topics, "
              f"names {args.names}")
        threads = [threading.Thread(target=client_loop, args=(i,)) for i in range(args.clients)]
        for t in threads:
            t.start()
        next_report = args.report_every
        while any(t.is_alive() for t in threads):
            time.sleep(0.2)
            with lock:
                d = done[0]
            if d >= next_report:
                mb = proc_status_kb(pid, "VmRSS") / 1024
                reports.append((d, mb, time.time() - start))
                print(f"{d} cycles: RSS {mb:.1f} MB ({time.time() - start:.0f} s)", flush=True)
                next_report += args.report_every
        for t in threads:
            t.join()
        time.sleep(6)  # the broker trims the heap every 5 s after churn
        after = proc_status_kb(pid, "VmRSS") / 1024
        print(f"end: {done[0]} cycles, RSS {after:.1f} MB 6 s after the last cycle")
    finally:
        stop.set()
        broker.close()
    if errors:
        print("FAIL:", *errors[:5], sep="\n  ")
        return 1
    if len(reports) >= 2:
        (c0, m0, _), (c1, m1, _) = reports[0], reports[-1]
        per = (m1 - m0) * 2**20 / (c1 - c0)
        print(f"growth from {c0} to {c1} cycles: {m1 - m0:+.2f} MB, {per:+.1f} bytes per cycle")
        if args.max_growth_bytes_per_cycle and per > args.max_growth_bytes_per_cycle:
            print(f"FAIL: {per:.1f} bytes per cycle > {args.max_growth_bytes_per_cycle}")
            return 1
    elif args.max_growth_bytes_per_cycle:
        print("FAIL: fewer than two reports; lower --report-every")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
