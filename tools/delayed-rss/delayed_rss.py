"""Long run (not CI): N delayed messages on a Shared subscription. Waits until the subscription's
msgDelayed reaches N (the dispatcher has read and tracked every one), then reports the broker's
RSS next to the entry cache limit (managedLedgerCacheSizeMB) and use, the tracker's bytes
(delayedMessageIndexSizeInBytes) and where the rest of the resident memory is. With --restart it
then restarts the broker, waits until the delayed entries are tracked again and reports the same.

  MAGNETAR_BIN=build/src/app/magnetar /work/main/.venv/bin/python tools/delayed-rss/delayed_rss.py \
      --messages 10000000 --cache-mb 128 --restart

Delays are random over an hour after --min-delay-s, so nothing falls due during the run. Exits 1
when msgDelayed does not reach N within --timeout-s or a message is delivered early (CI runs a
small form: scripts/test.sh).
"""

import argparse
import os
import random
import re
import sys
import time
from collections import defaultdict
from datetime import timedelta

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests"))
import pulsar  # noqa: E402
import requests  # noqa: E402

from harness.broker import MagnetarProcess  # noqa: E402

MB = 1048576


def status_kb(pid: int) -> dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key.startswith(("VmRSS", "RssAnon", "RssFile", "RssShmem", "VmHWM")):
                out[key] = int(rest.split()[0])
    return out


def rss_mb(pid: int) -> float:
    return status_kb(pid).get("VmRSS", 0) / 1024


def smaps_by_kind(pid: int) -> dict[str, int]:
    """Resident kB per kind of mapping: heap (brk), anonymous (malloc arenas, large
    allocations, thread stacks), the broker binary, other files."""
    kinds: dict[str, int] = defaultdict(int)
    kind = "anon"
    header = re.compile(r"^[0-9a-f]+-[0-9a-f]+ ")
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            if header.match(line):
                parts = line.split(None, 5)
                name = parts[5].strip() if len(parts) > 5 else ""
                if name == "[heap]":
                    kind = "heap"
                elif name.startswith("[stack"):
                    kind = "stack"
                elif name == "" or name.startswith("["):
                    kind = "anon"
                elif "magnetar" in os.path.basename(name):
                    kind = "binary"
                else:
                    kind = "files"
            elif line.startswith("Rss:"):
                kinds[kind] += int(line.split()[1])
    return kinds


def metric(admin_url: str, name: str) -> float:
    text = requests.get(f"{admin_url}/metrics", timeout=30).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(None, 1)[1])
    return total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=10_000_000)
    ap.add_argument("--cache-mb", type=int, default=128,
                    help="managedLedgerCacheSizeMB of the broker (default 128)")
    ap.add_argument("--timeout-s", type=float, default=3600,
                    help="how long to wait for msgDelayed to reach --messages after sending")
    ap.add_argument("--min-delay-s", type=int, default=7200,
                    help="smallest delay; delays are spread over the hour after it")
    ap.add_argument("--progress-s", type=float, default=15, help="seconds between progress lines")
    ap.add_argument("--restart", action="store_true",
                    help="then restart the broker and measure again once all are tracked anew")
    args = ap.parse_args()
    settings = ["journalSyncData=false", f"managedLedgerCacheSizeMB={args.cache_mb}"]
    with MagnetarProcess(settings) as broker:
        ep = broker.start()
        client = pulsar.Client(ep.service_url)
        topic = "persistent://public/default/delayed-rss"
        path = topic.replace("persistent://", "")
        consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
        producer = client.create_producer(topic, batching_enabled=False,
                                          max_pending_messages=5000,
                                          block_if_queue_full=True)

        def sub_stats() -> dict:
            return requests.get(f"{ep.admin_url}/admin/v2/persistent/{path}/stats",
                                timeout=30).json()["subscriptions"]["s"]

        def progress(phase: str, sent: int, t0: float) -> None:
            s = sub_stats()
            print(f"[{time.time() - t0:6.0f}s] {phase} sent={sent} msgDelayed={s['msgDelayed']} "
                  f"rss={rss_mb(broker.pid):.0f}MB "
                  f"cache={metric(ep.admin_url, 'pulsar_ml_cache_used_size') / MB:.0f}MB",
                  flush=True)

        base = rss_mb(broker.pid)
        t0 = time.time()
        next_progress = t0 + args.progress_s
        for i in range(args.messages):
            delay = args.min_delay_s + random.randrange(3600)
            producer.send_async(b"x" * 16, None, deliver_after=timedelta(seconds=delay))
            if (i & 0xFFF) == 0 and time.time() >= next_progress:
                progress("sending", i, t0)
                next_progress = time.time() + args.progress_s
        producer.flush()
        sent_s = time.time() - t0
        print(f"messages={args.messages} sent_in={sent_s:.0f}s")

        def wait_and_report(label: str, t0: float) -> bool:
            deadline = time.time() + args.timeout_s
            next_progress = time.time() + args.progress_s
            while True:
                s = sub_stats()
                if s["msgDelayed"] >= args.messages or time.time() >= deadline:
                    break
                if time.time() >= next_progress:
                    progress(f"{label} waiting", args.messages, t0)
                    next_progress = time.time() + args.progress_s
                time.sleep(1)
            tracked_s = time.time() - t0
            # Let consumed-entry eviction and the allocator settle before measuring.
            time.sleep(5)
            return report(label, tracked_s)

        def report(label: str, tracked_s: float) -> bool:
            s = sub_stats()
            st = status_kb(broker.pid)
            rss = st.get("VmRSS", 0) / 1024
            kinds = smaps_by_kind(broker.pid)
            cache = metric(ep.admin_url, "pulsar_ml_cache_used_size") / MB
            tracker = s["delayedMessageIndexSizeInBytes"]
            done = "" if s["msgDelayed"] >= args.messages else " (TIMED OUT)"
            print(f"{label}: all_tracked_in={tracked_s:.0f}s msgDelayed={s['msgDelayed']}{done}")
            peak = st.get("VmHWM", 0) / 1024
            print(f"{label}: rss_before={base:.0f}MB rss={rss:.0f}MB peak={peak:.0f}MB "
                  f"managedLedgerCacheSizeMB={args.cache_mb} cache_used={cache:.0f}MB "
                  f"tracker={tracker / MB:.1f}MB ({tracker / args.messages:.2f}B/msg)")
            other = rss - base - cache - tracker / MB
            print(f"{label}: rss - rss_before - cache_used - tracker = {other:.0f}MB "
                  f"({other * MB / args.messages:.1f}B/msg)")
            # pulsar_ml_cache_used_size counts entry bytes only; each cached entry also costs its
            # Buffer block header (16 B), its deque slot (Position + pointer, 24 B) and malloc's
            # chunk header and 16-byte rounding (~8-16 B). An estimate, from the mean entry size.
            internal = requests.get(f"{ep.admin_url}/admin/v2/persistent/{path}/internalStats",
                                    timeout=30).json()
            mean_entry = internal["totalSize"] / max(1, internal["numberOfEntries"])
            cached = cache * MB / mean_entry if mean_entry else 0
            per_entry = 16 + 24 + 8 + (-(16 + mean_entry + 8) % 16)
            print(f"{label}: mean_entry={mean_entry:.0f}B cached_entries~{cached / 1e6:.2f}M "
                  f"cache_overhead~{cached * per_entry / MB:.0f}MB ({per_entry:.0f}B/entry); "
                  f"unexplained~{other - cached * per_entry / MB:.0f}MB")
            by_kind = " ".join(f"{k}={v / 1024:.0f}MB"
                               for k, v in sorted(kinds.items(), key=lambda kv: -kv[1]))
            print(f"{label}: resident by mapping: {by_kind} "
                  f"(RssAnon={st.get('RssAnon', 0) / 1024:.0f}MB "
                  f"RssFile={st.get('RssFile', 0) / 1024:.0f}MB)", flush=True)
            return not done

        ok = wait_and_report("run", t0)
        if args.restart:
            # The tracker keeps nothing on disk: after the restart the dispatcher reads the
            # backlog again and tracks every entry anew; none may be delivered early.
            client.close()
            t1 = time.time()
            ep = broker.restart(port=broker.port)
            base = rss_mb(broker.pid)
            client = pulsar.Client(ep.service_url)
            consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
            ok = wait_and_report("restart", t1) and ok
            try:
                msg = consumer.receive(timeout_millis=2000)
                if time.time() - t0 < args.min_delay_s:
                    print(f"restart: FAILED: message {msg.message_id()} delivered early")
                    ok = False
            except pulsar.Timeout:
                print("restart: nothing delivered early")
        consumer.close()
        client.close()
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
