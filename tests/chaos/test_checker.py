"""The checker on made-up histories: each anomaly it must report, and a clean history it must
pass."""

from checker import Fault, Send, check

T = "persistent://public/chaos-dedup/t"
SUBS = [(T, "ks")]


def _clean():
    sends = {(T, "p", i): Send(key=f"k{i % 2}", sent_at=i, result="Ok", answered_at=i + 0.5)
             for i in range(6)}
    stored = {T: [("p", i, f"k{i % 2}") for i in range(6)]}
    deliveries = [(T, "ks", "c0", ("p", i, f"k{i % 2}"), 10 + i) for i in range(6)]
    return sends, stored, deliveries


def _run(sends, stored, deliveries, faults=()):
    return check(sends, stored, deliveries, list(faults), {T}, {(T, "ks")}, SUBS)


def test_a_clean_history_passes():
    r = _run(*_clean(), faults=[Fault("kill9", 2.2, 2.3)])
    assert r.violations({T}) == []
    assert r.receipted == 6 and r.stored == 6
    # The first send after the fault (3.0) was receipted at 3.5.
    assert r.faults["kill9"]["unavailable_max_s"] == 1.3


def test_lost_unanswered_and_duplicates_are_reported():
    sends, stored, deliveries = _clean()
    stored[T].remove(("p", 3, "k1"))  # receipted, not stored
    stored[T].append(("p", 5, "k1"))  # stored twice
    sends[(T, "p", 6)] = Send(key="k0", sent_at=7)  # never answered
    v = " | ".join(_run(sends, stored, deliveries).violations({T}))
    assert "1 receipted messages lost" in v
    assert "1 duplicates stored" in v
    assert "1 sends never answered" in v
    # Without deduplication a duplicate is counted, not a violation.
    r = _run(sends, stored, deliveries)
    assert "duplicates" not in " ".join(r.violations(set()))
    assert r.duplicates[T] == 1


def test_order_and_delivery_anomalies_are_reported():
    sends, stored, deliveries = _clean()
    stored[T][1], stored[T][2] = stored[T][2], stored[T][1]  # producer order broken
    v = " | ".join(_run(sends, stored, deliveries).violations({T}))
    assert "per-producer order" in v
    sends, stored, deliveries = _clean()
    # k0's message 2 handed out before k0's message 0 (on another consumer).
    deliveries[0] = (T, "ks", "c1", ("p", 0, "k0"), 20)
    deliveries.pop()  # message 5 never delivered
    v = " | ".join(_run(sends, stored, deliveries).violations({T}))
    assert "per-key order" in v
    assert "1 stored messages never delivered" in v


def test_key_batched_producers_keep_order_per_key_only():
    sends, stored, deliveries = _clean()
    # k1's message 1 stored after k0's message 2: fine for a key-batched producer only.
    stored[T][1], stored[T][2] = stored[T][2], stored[T][1]
    r = check(sends, stored, deliveries, [], {T}, {(T, "ks")}, SUBS, key_batched={"p"})
    assert r.producer_order == []
    stored[T][0], stored[T][2] = stored[T][2], stored[T][0]  # k0: 2 before 0
    r = check(sends, stored, deliveries, [], {T}, {(T, "ks")}, SUBS, key_batched={"p"})
    assert r.producer_order == [(T, "p", 2, 0)]


def test_unavailability_of_overlapping_faults_is_also_given_alone():
    sends, stored, deliveries = _clean()
    # A slow disk from 0.2 to 2.0 overlaps the kill9 at 1.2: neither is alone; the unload at
    # 3.1 is (its unavailability ends with the receipt at 4.5).
    faults = [Fault("slowdisk", 0.2, 2.0), Fault("kill9", 1.2, 1.3), Fault("unload", 3.1, 3.2)]
    r = _run(sends, stored, deliveries, faults=faults)
    assert r.faults["slowdisk"]["unavailable_max_s"] == 1.3  # send 1.0, receipt 1.5
    assert r.faults["slowdisk"]["alone"] == 0
    assert r.faults["slowdisk"]["alone_unavailable_max_s"] is None
    assert r.faults["kill9"]["alone"] == 0
    assert r.faults["unload"]["alone"] == 1
    assert r.faults["unload"]["alone_unavailable_max_s"] == 1.4
