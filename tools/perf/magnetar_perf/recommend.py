"""The recommendation at the end of a numIOThreads sweep, and the seed's default formula.

Rules (PERF_FRAMEWORK.md, the seed's reasoning):
- a setting "keeps up" when its consumers are not left behind: delivered at least KEEP_UP of the
  published rate (delivered is measured until the slowest application got the last message);
- the floor rule: too few loops shows as the busiest `pulsar-io` thread saturated (at least
  SATURATED % of a core) while the consumers fall behind;
- the best is the setting with the highest mean delivered rate among those that keep up; the
  best range is every setting whose delivered range overlaps the best one's (no measurable
  difference);
- the formula's default for the broker's processor count, min(2n, max(8, n/2)), is checked
  against that range.
"""

from __future__ import annotations

from typing import Any

Json = dict[str, Any]

KEEP_UP = 0.97
SATURATED = 90.0


def default_num_io_threads(n: int) -> int:
    """numIOThreads' default for n available processors: min(2n, max(8, n/2)) (CHANGES.md)."""
    return min(2 * n, max(8, n // 2))


def busiest_io_thread(threads: Json) -> tuple[str | None, float | None]:
    io = {k: v for k, v in threads.items() if k.startswith("pulsar-io")}
    if not io:
        return None, None
    name = max(io, key=lambda k: io[k])
    return name, io[name]


def _mean(v: Json, path: str) -> float | None:
    st = v["measures"].get(path)
    return st["mean"] if st else None


def recommend(agg: list[Json], key: str, processors: int) -> Json:
    """agg: compare.aggregate() of a sweep whose labels are 'numIOThreads=V'. Returns
    {"rows": [...], "best", "best_range", "default", "default_in_best_range", "floor_violations",
    "text"}."""
    rows = []
    for v in agg:
        value = v["label"].split("=", 1)[-1]
        pub = _mean(v, "published_msgs_per_s")
        dlv = _mean(v, "delivered_msgs_per_s")
        name, pct = busiest_io_thread(v.get("threads") or {})
        keeps_up = bool(pub and dlv is not None and dlv >= KEEP_UP * pub)
        saturated = pct is not None and pct >= SATURATED
        rows.append({"value": value, "valid_runs": len(v["valid_runs"]), "published": pub,
                     "delivered": dlv, "delivered_range": v["measures"].get(
                         "delivered_msgs_per_s"),
                     "broker_cpu_s_per_million": _mean(v, "broker_cpu_s_per_million"),
                     "busiest_io_thread": name, "busiest_io_pct": pct, "keeps_up": keeps_up,
                     "floor_rule": saturated and not keeps_up})
    candidates = [r for r in rows if r["valid_runs"] and r["keeps_up"] and r["delivered"]]
    out: Json = {"key": key, "processors": processors, "rows": rows,
                 "default": default_num_io_threads(processors), "best": None, "best_range": [],
                 "default_in_best_range": None,
                 "floor_violations": [r["value"] for r in rows if r["floor_rule"]]}
    if key != "numIOThreads":
        out["text"] = "no recommendation: the sweep varies %s, not numIOThreads" % key
        return out
    if not candidates:
        out["text"] = ("no recommendation: no setting had a valid run whose consumers kept up "
                       "(delivered >= %d %% of published)" % round(KEEP_UP * 100))
        return out
    best = max(candidates, key=lambda r: r["delivered"])
    lo = best["delivered_range"]["min"]
    best_range = [r["value"] for r in candidates if r["delivered_range"]["max"] >= lo]
    out["best"] = best["value"]
    out["best_range"] = best_range
    nums = sorted(int(x) for x in best_range if x.isdigit())
    default = out["default"]
    if str(default) in best_range:
        inside = True
    elif nums and str(default) not in [r["value"] for r in rows]:
        inside = nums[0] <= default <= nums[-1]  # not measured: between measured equals
    else:
        inside = False
    out["default_in_best_range"] = inside
    lines = ["recommendation: numIOThreads=%s (highest delivered rate with the consumers "
             "keeping up: %.0f msg/s)" % (best["value"], best["delivered"]),
             "settings within the best's range (no measurable difference): %s" %
             ", ".join(best_range),
             "the default for %d processors, min(2n, max(8, n/2)) = %d: %s" % (
                 processors, default, "within the best range" if inside else
                 "OUTSIDE the best range")]
    if out["floor_violations"]:
        lines.append("floor rule: too few loops at numIOThreads=%s (busiest pulsar-io thread "
                     ">= %d %% of a core while the consumers fell behind)" % (
                         ", ".join(out["floor_violations"]), SATURATED))
    else:
        lines.append("floor rule: no setting had a saturated pulsar-io thread with the consumers "
                     "falling behind")
    out["text"] = "\n".join(lines)
    return out
