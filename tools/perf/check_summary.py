#!/usr/bin/env python3
"""Checks a run's summary.json: every measure present and sane, and the run valid.

Usage: check_summary.py RUN_DIR/summary.json [--allow-invalid] [--require-balance-target]
Exit status 0 when it passes; 1 with the problems listed otherwise.
--require-balance-target: a run with several brokers must also have met its balance target
(load_balance.target_met; docs/perf.md "Load balancing"), and a summary without load_balance fails.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from magnetar_perf import summary  # noqa: E402  (stdlib only: no yaml/matplotlib needed)


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    if len(args) != 1:
        sys.stderr.write(__doc__)
        return 2
    with open(args[0]) as f:
        doc = json.load(f)
    problems = summary.check(doc, require_valid="--allow-invalid" not in argv)
    if "--require-balance-target" in argv:
        problems.extend(summary.check_balance_target(doc.get("load_balance")))
    if problems:
        print("summary check FAILED for %s:" % args[0])
        for p in problems:
            print("  - " + p)
        return 1
    print("summary check passed: %s (%s messages, %.0f msg/s delivered, %.2f s broker CPU per "
          "1M messages)" % (args[0], doc["measured_messages"], doc["delivered_msgs_per_s"],
                            doc["broker_cpu_s_per_million"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
