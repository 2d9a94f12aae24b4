"""Peak broker RSS under big messages: starts `magnetar standalone`, lets P producers (one client
connection each) send messages of about 4.9 MB as fast as they can for S seconds while one
consumer takes 100 ms per message, and reports the broker's peak RSS (VmHWM) against the bound
of docs/memory-limits.md:

    maxMessagePublishBufferSizeInMB + managedLedgerCacheSizeMB + base

Exits 1 when the peak is over the bound (or nothing was delivered). Full form (60 s, the default
limits 2048/819 MB, then small limits 256/128 MB), about 3 minutes:

  MAGNETAR_BIN=build/src/app/magnetar /work/main/.venv/bin/python \\
      tools/memory/big_messages.py --seconds 60 --limits 2048/819 256/128

CI runs a small form (scripts/test.sh), about 20 s: 50 producers for 15 s at 64/32 MB (bound
224 MB; measured 136 MB, and 346 MB before frames being read were charged).

Each producer sends synchronously (one message in flight: 50 connections each receiving a
4.9 MB frame at once, the case a partial frame's charge is for); the consumer's receiver queue is
4 messages so the client, not the broker, is what is slow.
"""

import argparse
import os
import sys
import threading
import time
import urllib.request

import pulsar

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests"))
from harness.broker import MagnetarProcess  # noqa: E402
from harness.util import proc_status_kb  # noqa: E402

# The clients log their reconnects after the broker is stopped: not worth showing.
QUIET = pulsar.FileLogger(pulsar.LoggerLevel.Error, os.devnull)

# docs/memory-limits.md, "The bound": what the broker holds besides the two limits (code, threads'
# stacks, RocksDB, one frame per I/O thread over its share, dispatch and outbound in flight).
BASE_MB = 128


def metric_sum(admin_url: str, name: str) -> float:
    text = urllib.request.urlopen(admin_url + "/metrics", timeout=10).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name + "{"))


def run(buffer_mb: int, cache_mb: int, producers: int, seconds: float, message_bytes: int,
        consume_ms: int, base_mb: float, settings: list[str]) -> dict:
    # diskUsageThreshold=1: a run writes GBs, and the broker's disk guard (used = 1 - bavail/blocks,
    # refused above 0.95 by default) would refuse producers on a shared disk that is nearly full,
    # failing a memory test for disk space. --set diskUsageThreshold=... overrides it.
    broker = MagnetarProcess([f"maxMessagePublishBufferSizeInMB={buffer_mb}",
                              f"managedLedgerCacheSizeMB={cache_mb}", "journalSyncData=false",
                              "diskUsageThreshold=1", *settings], prefix="magnetar-memory-")
    clients: list[pulsar.Client] = []
    stop = threading.Event()
    sent = [0] * producers
    errors: list[str] = []
    received = [0]
    try:
        endpoint = broker.start()
        pid = broker.pid
        assert pid
        time.sleep(1.0)
        idle_mb = proc_status_kb(pid, "VmRSS") / 1024
        topic = f"persistent://public/default/big-{int(time.time() * 1000)}"
        cclient = pulsar.Client(endpoint.service_url, operation_timeout_seconds=120,
                                    logger=QUIET)
        clients.append(cclient)
        consumer = cclient.subscribe(topic, "slow", receiver_queue_size=4)

        def consume() -> None:
            while not stop.is_set():
                try:
                    m = consumer.receive(500)
                except pulsar.Timeout:
                    continue
                except Exception as e:  # noqa: BLE001 (the broker may be gone at the end)
                    if not stop.is_set():
                        errors.append(f"receive: {e}")
                    return
                time.sleep(consume_ms / 1000)
                consumer.acknowledge(m)
                received[0] += 1

        payload = os.urandom(message_bytes)

        def produce(i: int) -> None:
            try:
                c = pulsar.Client(endpoint.service_url, operation_timeout_seconds=120,
                                    logger=QUIET)
                clients.append(c)
                p = c.create_producer(topic, producer_name=f"big-{i}", batching_enabled=False,
                                      send_timeout_millis=0, block_if_queue_full=True)
                while not stop.is_set():
                    p.send(payload)
                    sent[i] += 1
            except Exception as e:  # noqa: BLE001
                if not stop.is_set():
                    errors.append(f"producer {i}: {e}")

        threads = [threading.Thread(target=consume, daemon=True)]
        threads += [threading.Thread(target=produce, args=(i,), daemon=True)
                    for i in range(producers)]
        for t in threads:
            t.start()
        samples = []
        end = time.time() + seconds
        while time.time() < end:
            time.sleep(1.0)
            samples.append(proc_status_kb(pid, "VmRSS") / 1024)
        stop.set()
        peak_mb = proc_status_kb(pid, "VmHWM") / 1024
        pauses = metric_sum(endpoint.admin_url, "magnetar_io_thread_read_paused_total")
        threads[0].join(timeout=5)
    finally:
        stop.set()
        broker.kill()  # measured; the clients' pending sends need no answer
        for c in clients:
            try:
                c.close()
            except Exception:  # noqa: BLE001, S110 (the broker is gone)
                pass
        broker.close()
    bound = buffer_mb + cache_mb + base_mb
    return {"buffer_mb": buffer_mb, "cache_mb": cache_mb, "idle_mb": idle_mb,
            "peak_mb": peak_mb, "bound_mb": bound, "sent": sum(sent), "received": received[0],
            "pauses": pauses, "errors": errors, "median_mb": sorted(samples)[len(samples) // 2],
            "binary": broker.binary}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limits", nargs="+", default=["2048/819", "256/128"],
                    help="maxMessagePublishBufferSizeInMB/managedLedgerCacheSizeMB pairs")
    ap.add_argument("--producers", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--message-bytes", type=int, default=4_900_000)
    ap.add_argument("--consume-ms", type=int, default=100)
    ap.add_argument("--base-mb", type=float, default=BASE_MB)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="further broker settings")
    ap.add_argument("--report-only", action="store_true", help="exit 0 over the bound too")
    args = ap.parse_args()
    ok = True
    print("| maxMessagePublishBufferSizeInMB | managedLedgerCacheSizeMB | bound (MB) "
          "| idle RSS (MB) | median RSS (MB) | peak RSS (MB) | peak / bound | sent | received "
          "| read pauses |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for pair in args.limits:
        buffer_mb, cache_mb = (int(x) for x in pair.split("/"))
        r = run(buffer_mb, cache_mb, args.producers, args.seconds, args.message_bytes,
                args.consume_ms, args.base_mb, args.set)
        print(f"| {buffer_mb} | {cache_mb} | {r['bound_mb']:.0f} | {r['idle_mb']:.1f} | "
              f"{r['median_mb']:.0f} | {r['peak_mb']:.0f} | {r['peak_mb'] / r['bound_mb']:.2f} | "
              f"{r['sent']} | {r['received']} | {r['pauses']:.0f} |", flush=True)
        for e in r["errors"][:5]:
            print(f"  error: {e}")
        if r["peak_mb"] > r["bound_mb"]:
            print(f"FAIL: peak RSS {r['peak_mb']:.0f} MB > bound {r['bound_mb']:.0f} MB")
            ok = False
        if r["received"] == 0 or r["sent"] == 0 or r["errors"]:
            print("FAIL: nothing delivered, or errors")
            ok = False
    print(f"binary: {r['binary']}")
    return 0 if ok or args.report_only else 1


if __name__ == "__main__":
    sys.exit(main())
