"""Command line of magnetar-perf: run, compare, sweep, show."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

from . import compare, procstat, recommend, report, runner, seedtable
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


def _variants(args: argparse.Namespace, key: str, values: list[str],
              out: str | None = None, sets: list[str] | None = None) -> int:
    out = out or _out_dir(args, os.path.splitext(os.path.basename(args.scenario))[0], args.cmd)
    sets = args.set if sets is None else sets
    os.makedirs(out, exist_ok=True)
    sc = scen.resolve(args.scenario, sets)  # fail early on a bad scenario
    opts = {"broker_url": args.broker_url, "web_url": args.web_url,
            "broker_pid": args.broker_pid, "magnetar_bin": args.magnetar_bin,
            "worker_bin": args.worker_bin, "argv": sys.argv}
    variants = compare.run_variants(args.scenario, key, values, args.repeat, sets, out, opts,
                                    quiet=args.quiet)
    agg = compare.aggregate(variants)
    rec = None
    if args.cmd == "sweep":
        rec = recommend.recommend(agg, key, broker_processors(sc))
    doc, _ = compare.write_compare(out, sc.name, key, agg, args.repeat, mode=args.cmd,
                                   recommendation=rec)
    print(compare.console(doc))
    if rec:
        print(rec["text"])
    print("report: %s" % os.path.join(out, "index.html"))
    return 0 if all(v["valid_runs"] for v in agg) else 1


def broker_processors(sc: scen.Scenario) -> int:
    """The processor count the broker sees: broker.availableProcessors, else the size of
    broker.cpuset, else this process's CPUs."""
    b = sc.data["broker"]
    if b.get("availableProcessors"):
        return int(b["availableProcessors"])
    if b.get("cpuset") is not None:
        return len(procstat.parse_cpuset(b["cpuset"]))
    return procstat.cpu_count() or 1


def cpus_sets(count: int) -> list[str]:
    """--set entries pinning the broker to its first `count` CPUs with the matching
    --available-processors (PERF_FRAMEWORK.md: smaller brokers modelled by pinning)."""
    mine = sorted(os.sched_getaffinity(0))
    if count < 1 or count > len(mine):
        raise scen.ScenarioError("--cpus %d: this machine lets us use %d CPUs" % (count, len(mine)))
    return ["broker.cpuset=%s" % ",".join(str(c) for c in mine[:count]),
            "broker.availableProcessors=%d" % count]


def cmd_compare(args: argparse.Namespace) -> int:
    key, values = compare.parse_vary(args.vary)
    return _variants(args, key, values)


def cmd_sweep(args: argparse.Namespace) -> int:
    key, values = compare.parse_vary(args.values)
    if not args.cpus:
        return _variants(args, key, values)
    counts = [int(c) for c in args.cpus.split(",") if c.strip()]
    for c in counts:
        cpus_sets(c)  # fail early
    base = _out_dir(args, os.path.splitext(os.path.basename(args.scenario))[0], args.cmd)
    rc = 0
    for c in counts:
        if not args.quiet:
            sys.stderr.write("magnetar-perf: sweep with the broker on %d CPU(s)\n" % c)
        rc |= _variants(args, key, values, out=os.path.join(base, "cpus-%d" % c),
                        sets=list(args.set) + cpus_sets(c))
    return rc


def cmd_seed_table(args: argparse.Namespace) -> int:
    out = _out_dir(args, "seed", "seed-table")
    opts = {"magnetar_bin": args.magnetar_bin, "worker_bin": args.worker_bin, "argv": sys.argv}
    kinds = ["magnetar"] + (["pulsar"] if args.with_pulsar else [])
    ok = seedtable.run(out, args.scale, args.processors, args.repeat, kinds, args.set, opts,
                       quiet=args.quiet)
    print("report: %s" % os.path.join(out, "index.html"))
    return 0 if ok else 1


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
    p.add_argument("--cpus", metavar="N1,N2",
                   help="one sweep per count: the broker pinned to its first N CPUs with "
                   "--available-processors N")
    _common(p)
    p.set_defaults(fn=cmd_sweep)
    p = sub.add_parser("seed-table", help="the seed's table: max-rate 128 B and 8 KB, high-rate, "
                       "catch-up; numIOThreads 2n against min(2n, max(8, n/2)), interleaved")
    p.add_argument("--scale", choices=("small", "full"), default="small",
                   help="the -small scenarios (minutes) or the full ones (hours)")
    p.add_argument("--processors", type=int, default=16,
                   help="n of the two defaults and the broker's --available-processors "
                   "(default 16, the seed's machine: 32 against 8)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--with-pulsar", action="store_true",
                   help="the same rows for Apache Pulsar (tools/pulsar-reference)")
    p.add_argument("--set", action="append", default=[], metavar="PATH=VALUE")
    p.add_argument("--output", "-o")
    p.add_argument("--magnetar-bin")
    p.add_argument("--worker-bin")
    p.add_argument("--quiet", "-q", action="store_true")
    p.set_defaults(fn=cmd_seed_table)
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
