#!/usr/bin/env python3
"""Runs a command against a fresh `magnetar standalone` on free ports, then stops the broker.

Usage: run_with_broker.py [--set KEY=VALUE ...] -- COMMAND ARGS...
The command gets BROKER_URL (pulsar://127.0.0.1:N), BROKER_HOST, BROKER_PORT and ADMIN_URL in its
environment; its exit code is returned. The broker log is printed when the command fails.
"""

import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "differential"))
from brokers import MagnetarProcess, tail  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--set", action="append", default=[], dest="settings")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    cmd = args.command[1:] if args.command and args.command[0] == "--" else args.command
    if not cmd:
        parser.error("no command given")
    broker = MagnetarProcess(extra_settings=args.settings)
    endpoint = broker.start()
    try:
        host_port = endpoint.service_url.split("://", 1)[1]
        env = dict(os.environ)
        env.update(
            BROKER_URL=endpoint.service_url,
            BROKER_HOST=host_port.split(":")[0],
            BROKER_PORT=host_port.split(":")[1],
            ADMIN_URL=endpoint.admin_url or "",
        )
        rc = subprocess.call(cmd, env=env)
        if rc != 0:
            print(f"--- broker log ({endpoint.log_path}) ---\n{tail(endpoint.log_path, 80)}")
        return rc
    finally:
        broker.stop()


if __name__ == "__main__":
    sys.exit(main())
