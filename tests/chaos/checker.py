"""The chaos suite's checker: from what the clients saw and what the topics hold at the end, the
anomalies a Pulsar user must never see, and how long each fault kept publishing unavailable.

Inputs (plain data, so the checker is tested on its own in test_checker.py):

- sends: {(topic, producer, seq): Send}: every send the workload made, with its key, when it was
  handed to the client, and its answer (Ok with a message id, an error name, or None: never
  answered).
- stored: {topic: [(producer, seq, key), ...]}: every message the topic holds, in its order (a
  reader from the earliest position, after the run).
- deliveries: [(topic, subscription, consumer, (producer, seq, key), time)]: what each consumer
  handed to the application, in the order each consumer saw it.
- faults: [Fault]: what the nemeses did, and when (monotonic start and end; slow disks and clock
  steps may overlap the other faults).
- dedup_topics: topics with deduplication on (a duplicate there is an error, elsewhere counted).
- key_ordered_subs: {(topic, subscription)} whose deliveries must keep per-key order (Key_Shared).
- key_batched: producers with key-based batching: their order is checked per key.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field


@dataclass
class Send:
    key: str
    sent_at: float
    result: str | None = None  # "Ok", an error name, or None (no answer)
    answered_at: float | None = None
    msg_id: tuple | None = None  # (ledger, entry) of the receipt; (-1, -1): a duplicate


@dataclass
class Fault:
    kind: str
    start: float
    end: float
    detail: str = ""


@dataclass
class Report:
    sends: int = 0
    receipted: int = 0
    failed: dict[str, int] = field(default_factory=dict)
    unanswered: list = field(default_factory=list)
    lost: list = field(default_factory=list)
    duplicates: dict[str, int] = field(default_factory=dict)  # topic -> extra copies
    producer_order: list = field(default_factory=list)
    undelivered: dict[str, int] = field(default_factory=dict)  # "topic sub" -> count
    key_order: list = field(default_factory=list)
    stored: int = 0
    deliveries: int = 0
    faults: dict[str, dict] = field(default_factory=dict)  # kind -> count, unavailability

    def violations(self, dedup_topics: set[str]) -> list[str]:
        out = []
        if self.unanswered:
            out.append(f"{len(self.unanswered)} sends never answered, e.g. {self.unanswered[:3]}")
        if self.lost:
            out.append(f"{len(self.lost)} receipted messages lost, e.g. {self.lost[:3]}")
        for topic, n in self.duplicates.items():
            if topic in dedup_topics and n:
                out.append(f"{n} duplicates stored on {topic}, which deduplicates")
        if self.producer_order:
            out.append(f"{len(self.producer_order)} per-producer order violations, e.g. "
                       f"{self.producer_order[:3]}")
        for sub, n in self.undelivered.items():
            if n:
                out.append(f"{n} stored messages never delivered on {sub}")
        if self.key_order:
            out.append(f"{len(self.key_order)} per-key order violations, e.g. {self.key_order[:3]}")
        return out


Ident = tuple[str, str, int]  # topic, producer, sequence


def check(sends: dict[Ident, Send], stored: dict[str, list[tuple[str, int, str]]],
          deliveries: list[tuple], faults: list[Fault], dedup_topics: set[str],
          key_ordered_subs: set[tuple[str, str]], subscriptions: list[tuple[str, str]],
          key_batched: frozenset[str] | set[str] = frozenset()) -> Report:
    """key_batched: producers with key-based batching, whose order holds per key only (each
    key's batch is sent on its own)."""
    r = Report(sends=len(sends))
    failed: dict[str, int] = defaultdict(int)
    for ident, s in sends.items():
        if s.result is None:
            r.unanswered.append(ident)
        elif s.result == "Ok":
            r.receipted += 1
        else:
            failed[s.result] += 1
    r.failed = dict(failed)

    # Stored: lost, duplicates, per-producer order (of first copies).
    index: dict[tuple[str, str, int], int] = {}
    for topic, msgs in stored.items():
        r.stored += len(msgs)
        extra = 0
        last_seq: dict[tuple[str, str], int] = {}
        for i, (producer, seq, key) in enumerate(msgs):
            ident = (topic, producer, seq)
            if ident in index:
                extra += 1
                continue
            index[ident] = i
            stream = (producer, key if producer in key_batched else "")
            prev = last_seq.get(stream)
            if prev is not None and seq < prev:
                r.producer_order.append((topic, producer, prev, seq))
            last_seq[stream] = max(seq, prev if prev is not None else seq)
        r.duplicates[topic] = extra
    for ident, s in sends.items():
        if s.result == "Ok" and ident not in index:
            r.lost.append(ident)

    # Deliveries: every stored message reaches every subscription; per-key order of first
    # deliveries where it is promised.
    r.deliveries = len(deliveries)
    seen: dict[tuple[str, str], set] = defaultdict(set)
    firsts: dict[tuple[str, str], list] = defaultdict(list)
    for topic, sub, _consumer, (producer, seq, key), t in deliveries:
        ident = (producer, seq)
        if ident in seen[(topic, sub)]:
            continue
        seen[(topic, sub)].add(ident)
        firsts[(topic, sub)].append((t, key, index.get((topic, producer, seq), -1), ident))
    for topic, sub in subscriptions:
        want = {(p, q) for (p, q, _k) in stored.get(topic, [])}
        r.undelivered[f"{topic} {sub}"] = len(want - seen[(topic, sub)])
    for ts in key_ordered_subs:
        latest: dict[str, tuple[int, tuple]] = {}
        for _t, key, pos, ident in sorted(firsts.get(ts, []), key=lambda x: x[0]):
            if pos < 0:
                continue  # not stored (a failed send delivered? reported by the stored checks)
            if key in latest and pos < latest[key][0]:
                r.key_order.append((ts, key, latest[key][1], ident))
            if key not in latest or pos > latest[key][0]:
                latest[key] = (pos, ident)

    # Unavailability: from a fault's start to the first receipt of a send made after it (a
    # receipt already on its way when the fault began says nothing), on the topic that waited
    # longest (a fault may hit one broker's topics only).
    streams = []
    for topic in {t for (t, _p, _q) in sends}:
        by_sent = sorted((s.sent_at, s.answered_at) for (t, _p, _q), s in sends.items()
                         if t == topic and s.result == "Ok")
        # suffix minimum of answer times: the earliest receipt among sends made at or after i
        suffix_min = [0.0] * len(by_sent)
        best = float("inf")
        for i in range(len(by_sent) - 1, -1, -1):
            best = min(best, by_sent[i][1])
            suffix_min[i] = best
        streams.append(([x[0] for x in by_sent], suffix_min))
    # A fault is "alone" when no other fault was under way from its start to the end of its
    # unavailability (or its own end, if later): slow disks and clock steps are injected
    # concurrently with the other faults, so the figures over all of a kind mix in the others'.
    per_kind: dict[str, list[float]] = defaultdict(list)
    alone: dict[str, list[float]] = defaultdict(list)
    for f in faults:
        worst: float | None = None
        for sent_times, suffix_min in streams:
            i = _index_after(sent_times, f.start)
            nxt = suffix_min[i] if i < len(sent_times) else float("inf")
            worst = nxt if worst is None else max(worst, nxt)
        gap = worst - f.start if worst is not None else float("inf")
        per_kind[f.kind].append(gap)
        until = max(f.end, f.start + gap)
        if not any(g is not f and g.start < until and g.end > f.start for g in faults):
            alone[f.kind].append(gap)
    for kind, gaps in per_kind.items():
        finite = [g for g in gaps if g != float("inf")]
        lone = [g for g in alone[kind] if g != float("inf")]
        r.faults[kind] = {
            "count": len(gaps),
            "unavailable_median_s": round(statistics.median(finite), 3) if finite else None,
            "unavailable_max_s": round(max(finite), 3) if finite else None,
            "no_receipt_after": len(gaps) - len(finite),
            "alone": len(alone[kind]),
            "alone_unavailable_median_s": round(statistics.median(lone), 3) if lone else None,
            "alone_unavailable_max_s": round(max(lone), 3) if lone else None,
        }
    return r


def _index_after(sorted_times: list[float], t: float) -> int:
    """The first index whose time is after t."""
    lo, hi = 0, len(sorted_times)
    while lo < hi:
        mid = (lo + hi) // 2
        if sorted_times[mid] <= t:
            lo = mid + 1
        else:
            hi = mid
    return lo
