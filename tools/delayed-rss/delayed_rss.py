"""Long run (not CI): N delayed messages on a Shared subscription; reports the broker's RSS before
and after, msgDelayed and delayedMessageIndexSizeInBytes (tracker bytes per message).

  MAGNETAR_BIN=build/src/app/magnetar /work/main/.venv/bin/python tools/delayed-rss/delayed_rss.py \
      --messages 10000000

Delays are random over an hour, so nothing falls due during the run.
"""

import argparse
import os
import random
import sys
import time
from datetime import timedelta

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests"))
import pulsar  # noqa: E402
import requests  # noqa: E402

from harness.broker import MagnetarProcess  # noqa: E402


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=10_000_000)
    args = ap.parse_args()
    with MagnetarProcess(["journalSyncData=false"]) as broker:
        ep = broker.start()
        client = pulsar.Client(ep.service_url)
        topic = "persistent://public/default/delayed-rss"
        consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
        producer = client.create_producer(topic, batching_enabled=False,
                                          max_pending_messages=5000,
                                          block_if_queue_full=True)
        base = rss_mb(broker.pid)
        t0 = time.time()
        for _ in range(args.messages):
            producer.send_async(b"x" * 16, None,
                                deliver_after=timedelta(seconds=120 + random.randrange(3600)))
        producer.flush()
        sent_s = time.time() - t0
        path = topic.replace("persistent://", "")
        deadline = time.time() + 600
        while time.time() < deadline:
            s = requests.get(f"{ep.admin_url}/admin/v2/persistent/{path}/stats",
                             timeout=30).json()["subscriptions"]["s"]
            if s["msgDelayed"] >= args.messages:
                break
            time.sleep(1)
        rss = rss_mb(broker.pid)
        tracker = s["delayedMessageIndexSizeInBytes"]
        print(f"messages={args.messages} sent_in={sent_s:.0f}s msgDelayed={s['msgDelayed']} "
              f"rss_before={base:.0f}MB rss_after={rss:.0f}MB "
              f"rss_per_msg={(rss - base) * 1048576 / args.messages:.1f}B "
              f"tracker_bytes={tracker} tracker_per_msg={tracker / args.messages:.2f}B")
        consumer.close()
        client.close()


if __name__ == "__main__":
    main()
