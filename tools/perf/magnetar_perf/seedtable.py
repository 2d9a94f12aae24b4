"""`magnetar-perf seed-table`: the seed's matrix, reproduced at a chosen scale.

Scenarios max-rate 128 B, max-rate 8 KB, high-rate and catch-up, each an interleaved A/B of
numIOThreads = 2n (the old default) against min(2n, max(8, n/2)) (the formula), with the broker
told it has n processors (--available-processors). The table has the seed's columns: the mean of R
runs with min-max per setting, the change in %, and whether the ranges overlap; one chart puts
both settings' delivered rates on the same axes. --with-pulsar adds the same rows for Apache
Pulsar (tools/pulsar-reference) with the same two numIOThreads values.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable
from typing import Any

from . import charts, compare
from . import scenario as scen
from .doc import Doc, fmt
from .recommend import default_num_io_threads

Json = dict[str, Any]

SCENARIOS = ("iot-telemetry-max-rate", "iot-telemetry-max-rate-8k", "iot-telemetry-high-rate",
             "iot-telemetry-catch-up")
# (summary path, label, unit): the seed table's measures.
ROWS = (("delivered_msgs_per_s", "delivered", "msg/s"),
        ("broker_cpu_s_per_million", "broker CPU per 1M msgs", "s"),
        ("e2e_latency_ms.p99", "end-to-end p99", "ms"),
        ("publish_latency_ms.p99", "publish p99", "ms"))


def values_for(processors: int) -> tuple[int, int]:
    """(old default 2n, the formula) for n processors; ScenarioError when they are equal (then
    there is nothing to compare: n <= 4)."""
    old, new = 2 * processors, default_num_io_threads(processors)
    if old == new:
        raise scen.ScenarioError("for %d processors both defaults are %d: nothing to compare "
                                 "(use --processors 5 or more; the seed had 16)" % (processors,
                                                                                      old))
    return old, new


def scenario_names(scale: str) -> list[str]:
    return [s + "-small" if scale == "small" else s for s in SCENARIOS]


def table_rows(results: list[Json]) -> list[list[Any]]:
    """results: [{"kind", "scenario", "agg"}] with agg the two variants (old, new)."""
    rows = []
    for r in results:
        old, new = r["agg"]
        for path, label, unit in ROWS:
            a, b = old["measures"].get(path), new["measures"].get(path)
            if not a and not b:
                continue
            change = overlap = None
            if a and b:
                change = (b["mean"] - a["mean"]) / a["mean"] * 100 if a["mean"] else None
                overlap = not (a["max"] < b["min"] or b["max"] < a["min"])
            rows.append([r["kind"], r["scenario"], "%s (%s)" % (label, unit), _cell(a), _cell(b),
                         "-" if change is None else "%+.1f %%" % change,
                         "-" if overlap is None else ("yes" if overlap else "no")])
    return rows


def _cell(st: Json | None) -> str:
    if not st:
        return "-"
    return "%s (%s-%s)" % (fmt(st["mean"]), fmt(st["min"]), fmt(st["max"]))


def run(out_dir: str, scale: str, processors: int, repeat: int, kinds: list[str],
        sets: Iterable[str], opts: Json, quiet: bool = False) -> bool:
    """Runs the matrix into out_dir and writes seed-table.json and the report; True when every
    variant had a valid run."""
    old, new = values_for(processors)
    os.makedirs(out_dir, exist_ok=True)
    results = []
    ok = True
    for kind in kinds:
        for name in scenario_names(scale):
            sub = os.path.join(out_dir, "%s-%s" % (kind, name))
            os.makedirs(sub, exist_ok=True)
            extra = list(sets) + ["broker.kind=%s" % kind,
                                  "broker.availableProcessors=%d" % processors]
            scen.resolve(name, extra)  # fail early
            if not quiet:
                sys.stderr.write("magnetar-perf seed-table: %s on %s, numIOThreads %d vs %d\n"
                                 % (name, kind, old, new))
            variants = compare.run_variants(name, "numIOThreads", [str(old), str(new)], repeat,
                                            extra, sub, opts, quiet=quiet)
            agg = compare.aggregate(variants)
            compare.write_compare(sub, name, "numIOThreads", agg, repeat)
            ok = ok and all(v["valid_runs"] for v in agg)
            results.append({"kind": kind, "scenario": name, "agg": agg, "dir": sub})
    write_report(out_dir, results, processors, old, new, repeat)
    return ok


def write_report(out_dir: str, results: list[Json], processors: int, old: int, new: int,
                 repeat: int) -> None:
    with open(os.path.join(out_dir, "seed-table.json"), "w") as f:
        json.dump({"processors": processors, "old": old, "new": new, "repeat": repeat,
                   "results": results}, f, indent=2)
    doc = Doc("magnetar-perf seed-table: numIOThreads %d (2n) against %d (min(2n, max(8, n/2))),"
              " n = %d" % (old, new, processors))
    doc.para("Each cell: mean (min-max) of %d interleaved run(s); invalid runs are left out and "
             "named in each scenario's own report." % repeat)
    doc.table(["broker", "scenario", "measure", "numIOThreads=%d" % old,
               "numIOThreads=%d" % new, "change", "ranges overlap"], table_rows(results))
    groups = []
    for r in results:
        a, b = r["agg"]
        groups.append(("%s %s" % (r["kind"], r["scenario"].replace("iot-telemetry-", "")),
                       [("numIOThreads=%d" % old, a["measures"].get("delivered_msgs_per_s")),
                        ("numIOThreads=%d" % new, b["measures"].get("delivered_msgs_per_s"))]))
    png = charts.seed_chart(out_dir, groups, "delivered msg/s", "seed-throughput.png",
                            "delivered rate, same axes (bars: mean, whiskers: min-max)")
    if png:
        doc.heading("Throughput, A/B on the same axes")
        doc.image(png, "delivered rate per scenario")
    doc.heading("Scenario reports")
    doc.links([(os.path.relpath(os.path.join(r["dir"], "index.html"), out_dir),
                "%s %s" % (r["kind"], r["scenario"])) for r in results])
    doc.write(out_dir)
