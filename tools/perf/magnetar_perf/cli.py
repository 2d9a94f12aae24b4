"""Command line of magnetar-perf: run, compare, sweep, show."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

from . import compare, report, runner
from . import scenario as scen

DEFAULT_OUT = os.path.join(runner.REPO, "perf-runs")  # git-ignored


def _out_dir(args: argparse.Namespace, name: str, kind: str) -> str:
    if args.output:
        return os.path.abspath(args.output)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return os.path.join(DEFAULT_OUT, "%s-%s-%s" % (stamp, kind, name))


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", action="append", default=[], metavar="PATH=VALUE",
                   help="override a scenario value (workload.gateways=50, numIOThreads=8, ...)")
    p.add_argument("--output", "-o", help="run directory (default perf-runs/<time>-...)")
    p.add_argument("--broker-url", help="use a running broker instead of starting one")
    p.add_argument("--web-url", help="its admin URL (default http://HOST:8080)")
    p.add_argument("--broker-pid", type=int, help="its process id, to sample its CPU and RSS")
    p.add_argument("--magnetar-bin", help="magnetar binary (default $MAGNETAR_BIN or build dir)")
    p.add_argument("--worker-bin", help="magnetar-perf-worker (default $MAGNETAR_PERF_WORKER "
                   "or build dir)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress output")


def cmd_run(args: argparse.Namespace) -> int:
    sc = scen.resolve(args.scenario, args.set)
    out = _out_dir(args, sc.name, "run")
    if not args.quiet:
        sys.stderr.write("magnetar-perf: %s -> %s\n" % (sc.name, out))
    s = runner.run(sc, out, broker_url=args.broker_url, magnetar_bin=args.magnetar_bin,
                   worker_bin=args.worker_bin, argv=sys.argv, quiet=args.quiet,
                   web_url=args.web_url, broker_pid=args.broker_pid)
    print(report.console_table(s))
    print("report: %s" % os.path.join(out, "index.html"))
    return 0 if s["valid"] else 1


def _variants(args: argparse.Namespace, key: str, values: list[str]) -> int:
    out = _out_dir(args, os.path.splitext(os.path.basename(args.scenario))[0], args.cmd)
    os.makedirs(out, exist_ok=True)
    scen.resolve(args.scenario, args.set)  # fail early on a bad scenario
    opts = {"broker_url": args.broker_url, "web_url": args.web_url,
            "broker_pid": args.broker_pid, "magnetar_bin": args.magnetar_bin,
            "worker_bin": args.worker_bin, "argv": sys.argv}
    variants = compare.run_variants(args.scenario, key, values, args.repeat, args.set, out, opts,
                                    quiet=args.quiet)
    agg = compare.aggregate(variants)
    doc, _ = compare.write_compare(out, scen.resolve(args.scenario, args.set).name, key, agg,
                                   args.repeat, mode=args.cmd)
    print(compare.console(doc))
    print("report: %s" % os.path.join(out, "index.html"))
    return 0 if all(v["valid_runs"] for v in agg) else 1


def cmd_compare(args: argparse.Namespace) -> int:
    key, values = compare.parse_vary(args.vary)
    return _variants(args, key, values)


def cmd_sweep(args: argparse.Namespace) -> int:
    key, values = compare.parse_vary(args.values)
    return _variants(args, key, values)


def cmd_show(args: argparse.Namespace) -> int:
    sc = scen.resolve(args.scenario, args.set)
    if args.worker_config:
        print(json.dumps(sc.worker_config("pulsar://127.0.0.1:6650"), indent=2))
    else:
        sys.stdout.write(sc.resolved_text())
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="magnetar-perf", description=(
        "Magnetar's performance testing framework: IoT telemetry scenarios, reports, A/B "
        "comparisons. See docs/perf.md."))
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("run", help="run one scenario")
    p.add_argument("scenario", help="scenario file or name in tools/perf/scenarios")
    _common(p)
    p.set_defaults(fn=cmd_run)
    p = sub.add_parser("compare", help="interleaved A/B runs over the values of one setting")
    p.add_argument("scenario")
    p.add_argument("--vary", required=True, metavar="KEY=A,B",
                   help="numIOThreads=32,8 | broker=magnetar,pulsar | broker=PATH_A,PATH_B | "
                   "workload.path=a,b")
    p.add_argument("--repeat", type=int, default=3)
    _common(p)
    p.set_defaults(fn=cmd_compare)
    p = sub.add_parser("sweep", help="the same as compare over a list, reported as curves")
    p.add_argument("scenario")
    p.add_argument("values", metavar="KEY=V1,V2,...")
    p.add_argument("--repeat", type=int, default=1)
    _common(p)
    p.set_defaults(fn=cmd_sweep)
    p = sub.add_parser("show", help="print the resolved scenario")
    p.add_argument("scenario")
    p.add_argument("--set", action="append", default=[])
    p.add_argument("--worker-config", action="store_true", help="as the worker's JSON")
    p.set_defaults(fn=cmd_show)
    args = ap.parse_args(argv)
    try:
        return args.fn(args)
    except scen.ScenarioError as e:
        sys.stderr.write("magnetar-perf: scenario error: %s\n" % e)
        return 2
