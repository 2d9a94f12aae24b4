#!/usr/bin/env python3
"""Storage crash test: SIGKILL the writer at random moments and check nothing acknowledged is lost.

Runs src/storage/tests/storage_crash_tool (built with the unit tests) against one data directory:
each round starts the tool, which first verifies everything stored (every topic holds sequence
numbers 0..M in order, byte for byte, no torn entries) and then appends with journalSyncData=true,
printing "ACK <topic> <seq>" from each add callback and "CURSOR <topic> <ledger> <entry>" once a
mark-delete is persisted. After a random time (or a random number of acks) the tool gets SIGKILL.
The next round's verification must show every acked sequence number stored (M >= last ack) and
every cursor at or past its last persisted position. A final --verify-only run checks the end state.

--compact adds a churn topic (consumed and trimmed as it is written) and runs journal compaction
every second, so the kills also land while live records are copied forward and segments deleted.

--mode broker runs the same idea end to end against `magnetar standalone` with the official
Python client (see broker_crash.py); it needs the app to use the durable storage.

Usage: crash_test.py [--mode storage|broker] [--kills N] [--tool PATH] [--topics N] [--seed S]
                     [--keep] [--compact]
"""

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_TOOL_PATHS = [
    os.path.join(REPO, "build", "src", "storage", "tests", "storage_crash_tool"),
    "/work/build-storage/src/storage/tests/storage_crash_tool",
]


class Failure(Exception):
    pass


def find_tool(explicit):
    if explicit:
        candidates = [explicit]
    else:
        candidates = [os.environ.get("STORAGE_CRASH_TOOL")] + DEFAULT_TOOL_PATHS
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return c
    raise Failure(
        f"storage_crash_tool not found (tried {candidates}); build target storage_crash_tool"
    )


def read_lines(proc, sink, stop_after_acks=None, on_enough=None):
    """Collects stdout lines into sink (thread target)."""
    acks = 0
    for raw in proc.stdout:
        line = raw.decode(errors="replace").strip()
        if line:
            sink.append(line)
            if line.startswith("ACK "):
                acks += 1
                if stop_after_acks is not None and acks == stop_after_acks and on_enough:
                    on_enough()


def check_verified(lines, acked, cursors, topics, round_no):
    verified = {}
    for line in lines:
        parts = line.split()
        if parts[0] == "VERIFIED":
            verified[int(parts[1])] = (int(parts[2]), (int(parts[3]), int(parts[4])))
    if len(verified) != topics:
        raise Failure(
            f"round {round_no}: tool verified {len(verified)} of {topics} topics: {lines[:5]}"
        )
    for t in range(topics):
        stored, mark = verified[t]
        if acked.get(t, -1) >= stored:
            raise Failure(
                f"round {round_no}: topic {t} lost acknowledged entries: acked up to seq "
                f"{acked[t]}, stored only 0..{stored - 1}"
            )
        if t in cursors and mark < cursors[t]:
            raise Failure(
                f"round {round_no}: topic {t} cursor went back: persisted {cursors[t]}, "
                f"recovered {mark}"
            )
    return verified


def run_round(tool, data_dir, topics, rng, acked, cursors, round_no, kill, compact=False):
    lines = []
    stderr_path = os.path.join(data_dir, f"round{round_no}.stderr")
    with open(stderr_path, "wb") as err:
        proc = subprocess.Popen(
            [tool, "--dir", data_dir, "--topics", str(topics)]
            + ([] if kill else ["--verify-only"])
            + (["--compact"] if compact else []),
            stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
        )
    killed = threading.Event()

    def kill_now():
        if not killed.is_set():
            killed.set()
            proc.send_signal(signal.SIGKILL)

    # Kill either after a random number of acks or after a random time, whichever comes first.
    reader = threading.Thread(
        target=read_lines, args=(proc, lines, rng.randint(1, 4000), kill_now if kill else None),
        daemon=True,
    )
    reader.start()
    deadline = time.time() + 60
    while "READY" not in lines:
        if proc.poll() is not None and "READY" not in lines:
            reader.join(timeout=5)
            break
        if time.time() > deadline:
            proc.kill()
            raise Failure(f"round {round_no}: tool did not become ready")
        time.sleep(0.01)
    if kill:
        time.sleep(rng.uniform(0.0, 1.5))
        kill_now()
    proc.wait(timeout=60)
    reader.join(timeout=10)
    with open(stderr_path, "rb") as f:
        err_text = f.read().decode(errors="replace")
    if "VERIFY FAILED" in err_text or (not kill and proc.returncode != 0):
        raise Failure(f"round {round_no}: {err_text.strip() or 'exit ' + str(proc.returncode)}")
    verified = [line for line in lines if line.startswith("VERIFIED")]
    check_verified(verified, acked, cursors, topics, round_no)
    new_acks = 0
    for line in lines:
        parts = line.split()
        if parts[0] == "ACK":
            t, seq = int(parts[1]), int(parts[2])
            acked[t] = max(acked.get(t, -1), seq)
            new_acks += 1
        elif parts[0] == "CURSOR":
            t, pos = int(parts[1]), (int(parts[2]), int(parts[3]))
            cursors[t] = max(cursors.get(t, (-1, -1)), pos)
    return new_acks


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--mode", choices=["storage", "broker"], default="storage")
    ap.add_argument("--kills", type=int, default=5)
    ap.add_argument("--topics", type=int, default=4)
    ap.add_argument("--tool")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--keep", action="store_true", help="keep the data directory")
    ap.add_argument("--compact", action="store_true",
                    help="storage mode: a churn topic and journal compaction every second, so "
                         "the kills land while live records are copied forward")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    data_dir = tempfile.mkdtemp(prefix="magnetar-crash-")
    acked, cursors = {}, {}
    total = 0
    try:
        if args.mode == "broker":
            sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
            import broker_crash

            try:
                total = broker_crash.run(args.kills, rng, data_dir)
            except broker_crash.BrokerFailure as e:
                raise Failure(str(e)) from None
            print(f"crash_test[broker]: PASS: {args.kills} kills, {total} receipted messages "
                  f"all recovered in order (seed {seed})")
            return 0
        tool = find_tool(args.tool)
        for k in range(args.kills):
            n = run_round(tool, data_dir, args.topics, rng, acked, cursors, k, kill=True,
                          compact=args.compact)
            total += n
            print(f"crash_test: round {k}: {n} acked appends, then SIGKILL", flush=True)
        run_round(tool, data_dir, args.topics, rng, acked, cursors, args.kills, kill=False,
                  compact=args.compact)
        print(
            f"crash_test: PASS: {args.kills} kills, {total} acknowledged appends over "
            f"{args.topics} topics all recovered in order, byte for byte (seed {seed})"
        )
        return 0
    except Failure as e:
        print(f"crash_test: FAIL (seed {seed}, data in {data_dir}): {e}", file=sys.stderr)
        args.keep = True
        return 1
    finally:
        if not args.keep:
            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
