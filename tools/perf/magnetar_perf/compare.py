"""A/B comparisons and sweeps: interleaved runs of variants of one scenario, aggregated."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterable
from typing import Any

from . import charts, runner
from . import scenario as scen
from . import summary as summ
from .doc import Doc, fmt

Json = dict[str, Any]  # a decoded JSON document


def parse_vary(text: str) -> tuple[str, list[str]]:
    """'numIOThreads=32,8' -> ('numIOThreads', ['32', '8'])."""
    if "=" not in text:
        raise scen.ScenarioError("--vary expects key=v1,v2,...; got %r" % text)
    key, values = text.split("=", 1)
    vals = [v.strip() for v in values.split(",") if v.strip()]
    if len(vals) < 2:
        raise scen.ScenarioError("--vary needs at least two values: %r" % text)
    return key.strip(), vals


def variant_sets(key: str, value: str) -> list[str]:
    """The --set entries of one variant. broker=magnetar|pulsar|magnetar-bk|pulsar-bk picks the
    broker kind; broker=PATH a magnetar binary; anything else a scenario path or broker
    setting."""
    if key == "broker":
        if value in scen.BROKER_KINDS:
            return ["broker.kind=%s" % value]
        return ["broker.kind=magnetar", "broker.binary=%s" % os.path.abspath(value)]
    return ["%s=%s" % (key, value)]


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")[:60]


def stats(values: Iterable[float | None]) -> Json | None:
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return {"mean": sum(vals) / len(vals), "min": min(vals), "max": max(vals), "n": len(vals)}


def compare_measures(base: Json, other: Json) -> list[Json]:
    """Rows of the comparison of variant `other` against `base` (dicts of stats by path)."""
    rows = []
    for path, label, unit, better in summ.MEASURES:
        a, b = base.get(path), other.get(path)
        if not a or not b:
            continue
        change = (b["mean"] - a["mean"]) / a["mean"] * 100 if a["mean"] else None
        improved = None
        if change is not None and change != 0:
            improved = (change > 0) == (better == "higher")
        overlap = not (a["max"] < b["min"] or b["max"] < a["min"])
        rows.append({"measure": path, "label": label, "unit": unit, "better": better,
                     "base": a, "variant": b, "change_pct": change, "improved": improved,
                     "ranges_overlap": overlap})
    return rows


def run_variants(scenario_ref: str, key: str, values: list[str], repeat: int,
                 sets: Iterable[str], out_dir: str, args: Json,
                 quiet: bool = False) -> list[tuple[str, list[tuple[str, Json]]]]:
    """Interleaved passes, every other one in reverse (A B C, C B A, A B C ...), so that a
    machine's load drifting over the passes does not line up with the values' order. Returns
    [(label, [(run_dir, summary)])] in the values' order."""
    labels = ["%s=%s" % (key, v) for v in values]
    results = {label: [] for label in labels}
    for r in range(repeat):
        order = list(zip(values, labels))
        if r % 2 == 1:
            order.reverse()
        for value, label in order:
            run_dir = os.path.join(out_dir, "%s-r%d" % (slug(label), r + 1))
            sc = scen.resolve(scenario_ref, list(sets) + variant_sets(key, value))
            if not quiet:
                sys.stderr.write("magnetar-perf: pass %d/%d, %s -> %s\n" % (r + 1, repeat, label,
                                                                            run_dir))
            s = runner.run(sc, run_dir, broker_url=args.get("broker_url"),
                           magnetar_bin=args.get("magnetar_bin"),
                           worker_bin=args.get("worker_bin"), argv=args.get("argv"), quiet=quiet,
                           web_url=args.get("web_url"), broker_pid=args.get("broker_pid"))
            if not quiet:
                sys.stderr.write("  -> %s, delivered %s msg/s, broker %s s CPU per 1M\n" % (
                    "valid" if s["valid"] else "INVALID: " + "; ".join(s["invalid_reasons"]),
                    fmt(s.get("delivered_msgs_per_s")), fmt(s.get("broker_cpu_s_per_million"))))
            results[label].append((run_dir, s))
    return [(label, results[label]) for label in labels]


def aggregate(variants: list[tuple[str, list[tuple[str, Json]]]]) -> list[Json]:
    out = []
    for label, runs in variants:
        valid = [(d, s) for d, s in runs if s["valid"]]
        failed = [{"run": d, "reasons": s.get("invalid_reasons")} for d, s in runs
                  if not s["valid"]]
        measures = {}
        for path, _, _, _ in summ.MEASURES:
            st = stats([summ.measure(s, path) for _, s in valid])
            if st:
                measures[path] = st
        threads = {}
        for _, s in valid:
            for name, pct in (s.get("threads") or {}).items():
                threads.setdefault(name, []).append(pct)
        out.append({"label": label, "runs": [d for d, _ in runs],
                    "valid_runs": [d for d, _ in valid], "failed": failed,
                    "measures": measures,
                    "threads": {k: sum(v) / len(v) for k, v in threads.items()}})
    return out


def _cell(st: Json | None) -> str:
    if not st:
        return "-"
    return "%s (%s-%s)" % (fmt(st["mean"]), fmt(st["min"]), fmt(st["max"]))


def write_compare(out_dir: str, scenario_name: str, key: str, agg: list[Json], repeat: int,
                  mode: str = "compare", recommendation: Json | None = None
                  ) -> tuple[Json, list[tuple[str, str]]]:
    """compare.json / sweep.json and the report; recommendation: recommend.recommend() of a
    sweep, written first in the report."""
    base = agg[0]
    comparisons = [{"variant": v["label"], "baseline": base["label"],
                    "rows": compare_measures(base["measures"], v["measures"])} for v in agg[1:]]
    doc_json = {"mode": mode, "scenario": scenario_name, "vary": key, "repeat": repeat,
                "variants": agg, "comparisons": comparisons}
    if recommendation is not None:
        doc_json["recommendation"] = recommendation
    with open(os.path.join(out_dir, "compare.json" if mode == "compare" else "sweep.json"),
              "w") as f:
        json.dump(doc_json, f, indent=2)

    variants_for_charts = []
    for v in agg:
        sums = []
        for d in v["valid_runs"]:
            with open(os.path.join(d, "summary.json")) as f:
                sums.append(json.load(f))
        variants_for_charts.append((v["label"], sums, v["valid_runs"]))
    if mode == "compare":
        made = charts.ab_charts(out_dir, variants_for_charts)
    else:
        made = charts.sweep_charts(out_dir, [(v[0].split("=", 1)[-1], v[1])
                                             for v in variants_for_charts], key)

    doc = Doc("magnetar-perf %s: %s, varying %s" % (mode, scenario_name, key))
    failed = [f for v in agg for f in v["failed"]]
    if failed:
        doc.para("Runs left out (invalid): " + "; ".join(
            "%s: %s" % (os.path.relpath(f["run"], out_dir), "; ".join(f["reasons"] or []))
            for f in failed), strong=True)
    if any(not v["valid_runs"] for v in agg):
        doc.para("A variant has no valid run: the comparison is incomplete.", strong=True)
    if recommendation is not None:
        doc.heading("Recommendation")
        for line in recommendation["text"].splitlines():
            doc.para(line, strong=line.startswith("recommendation"))
        doc.table(["numIOThreads", "valid runs", "delivered msg/s", "published msg/s",
                   "broker CPU s per 1M", "busiest pulsar-io %", "consumers keep up",
                   "floor rule broken"],
                  [[r["value"], r["valid_runs"], r["delivered"], r["published"],
                    r["broker_cpu_s_per_million"], r["busiest_io_pct"],
                    "yes" if r["keeps_up"] else "no", "yes" if r["floor_rule"] else "no"]
                   for r in recommendation["rows"]])
    doc.para("%d interleaved pass(es); each cell: mean (min-max) over the valid runs." % repeat)
    header = ["measure"] + [v["label"] for v in agg]
    rows = []
    for path, label, unit, better in summ.MEASURES:
        cells = [_cell(v["measures"].get(path)) for v in agg]
        if all(c == "-" for c in cells):
            continue
        rows.append(["%s (%s, %s is better)" % (label, unit, better)] + cells)
    doc.heading("Measures")
    doc.table(header, rows)
    for c in comparisons:
        doc.heading("%s against %s" % (c["variant"], c["baseline"]))
        doc.table(["measure", "change %", "better?", "ranges overlap"],
                  [[r["label"], r["change_pct"],
                    {True: "better", False: "worse", None: "same"}[r["improved"]],
                    "yes" if r["ranges_overlap"] else "no (a real difference)"]
                   for r in c["rows"]])
    names = sorted({n for v in agg for n in v["threads"]},
                   key=lambda n: -max(v["threads"].get(n, 0) for v in agg))[:20]
    if names:
        doc.heading("Broker CPU by thread (% of one core, mean of valid runs)")
        doc.table(["thread"] + [v["label"] for v in agg],
                  [[n] + [v["threads"].get(n) for v in agg] for n in names])
    doc.heading("Charts")
    for path, caption in made:
        doc.para(caption)
        doc.image(path, caption)
    doc.heading("Runs")
    doc.links([(os.path.relpath(os.path.join(d, "index.html"), out_dir),
                "%s%s" % (v["label"], "" if d in v["valid_runs"] else " (INVALID)"))
               for v in agg for d in v["runs"]])
    doc.write(out_dir)
    return doc_json, made


def console(doc_json: Json) -> str:
    lines = []
    agg = doc_json["variants"]
    for v in agg:
        for f in v["failed"]:
            lines.append("LEFT OUT (invalid): %s: %s" % (f["run"], "; ".join(f["reasons"] or [])))
    lines.append("  %-40s %s" % ("measure", " | ".join("%-28s" % v["label"] for v in agg)))
    for path, label, unit, _better in summ.MEASURES:
        cells = [_cell(v["measures"].get(path)) for v in agg]
        if all(c == "-" for c in cells):
            continue
        lines.append("  %-40s %s" % ("%s (%s)" % (label, unit),
                                     " | ".join("%-28s" % c for c in cells)))
    for c in doc_json["comparisons"]:
        lines.append("  %s vs %s:" % (c["variant"], c["baseline"]))
        for r in c["rows"]:
            lines.append("    %-38s %+7.1f %%  %-6s overlap=%s" % (
                r["label"], r["change_pct"] or 0.0,
                {True: "better", False: "worse", None: "same"}[r["improved"]],
                "yes" if r["ranges_overlap"] else "no"))
    return "\n".join(lines)
