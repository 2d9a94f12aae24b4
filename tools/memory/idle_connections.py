"""Resident memory of idle connections: starts `magnetar standalone`, opens N TCP connections
that send nothing (or, with --connect, only CONNECT), and reports the broker's RSS before,
while they are open, and after they are closed (the closed figure shows whether the memory went
back to the OS). Exits 1 when the per-connection cost or what stays after closing is over the
bounds given (CI runs a small form: scripts/test.sh).

  MAGNETAR_BIN=build/src/app/magnetar /work/main/.venv/bin/python \\
      tools/memory/idle_connections.py --connections 5000

Needs RLIMIT_NOFILE above N for this process (the broker gets N + 1000).
"""

import argparse
import os
import resource
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests"))
from harness.broker import MagnetarProcess  # noqa: E402
from harness.util import proc_status_kb  # noqa: E402


def connect_frame() -> bytes:
    """CONNECT{client_version="memory-idle", protocol_version=21}."""
    version = b"memory-idle"
    body = b"\x0a" + bytes([len(version)]) + version + b"\x20\x15"
    cmd = b"\x08\x02" + b"\x12" + bytes([len(body)]) + body  # type=CONNECT, connect (field 2)
    return (len(cmd) + 4).to_bytes(4, "big") + len(cmd).to_bytes(4, "big") + cmd


def settle(pid: int, seconds: float) -> int:
    time.sleep(seconds)
    return proc_status_kb(pid, "VmRSS")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--connections", type=int, default=5000)
    ap.add_argument("--connect", action="store_true", help="send CONNECT on each connection")
    ap.add_argument("--rounds", type=int, default=1, help="open/close rounds (churn)")
    ap.add_argument("--max-kb-per-connection", type=float, default=0,
                    help="fail above this RSS per open connection (0: report only)")
    ap.add_argument("--max-kb-after-close", type=float, default=0,
                    help="fail when RSS after closing exceeds the start by more (0: report only)")
    args = ap.parse_args()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = args.connections + 100
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))
    broker = MagnetarProcess(["keepAliveIntervalSeconds=600"], nofile=args.connections + 1000,
                             prefix="magnetar-memory-")
    ok = True
    try:
        endpoint = broker.start()
        pid = broker.pid
        port = endpoint.port
        base = settle(pid, 1.0)
        print(f"binary: {broker.binary}")
        print(f"start: RSS {base / 1024:.1f} MB")
        frame = connect_frame() if args.connect else b""
        for r in range(args.rounds):
            socks = []
            for _ in range(args.connections):
                s = socket.create_connection(("127.0.0.1", port))
                if frame:
                    s.sendall(frame)
                socks.append(s)
            if frame:
                for s in socks:
                    s.settimeout(10)
                    s.recv(4096)  # CONNECTED
            held = settle(pid, 2.0)
            per = (held - base) / args.connections
            for s in socks:
                s.close()
            closed_1s = settle(pid, 1.0)
            closed = settle(pid, 6.0)  # the broker trims the heap every 5 s after churn
            print(f"round {r + 1}: {args.connections} open: RSS {held / 1024:.1f} MB "
                  f"({per:.2f} KB per connection); closed: RSS {closed_1s / 1024:.1f} MB "
                  f"after 1 s, {closed / 1024:.1f} MB after 7 s "
                  f"({(closed - base) / 1024:+.1f} MB vs start)")
            if args.max_kb_per_connection and per > args.max_kb_per_connection:
                print(f"FAIL: {per:.2f} KB per connection > {args.max_kb_per_connection}")
                ok = False
            if args.max_kb_after_close and closed - base > args.max_kb_after_close:
                print(f"FAIL: {closed - base} KB kept after closing > {args.max_kb_after_close}")
                ok = False
    finally:
        broker.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
