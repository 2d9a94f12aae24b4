"""Back-pressure from real bookies. The cluster's bookies queue at most BOOKIE_ADD_QUEUE (100)
ADDs and refuse more with ETOOMANYREQUESTS (conftest). A burst of 5,000 adds of 1 KB:
- with the client's per-bookie count bound below the bookie's queue, no add is ever refused;
- with the default bound (5,000) the bookies refuse some, and the client sends them again to the
  same bookies: the ledger keeps its ensemble (no ensemble change, which with 3 bookies and E=3
  would end in NotEnoughBookies) and holds every entry."""

import re

from conftest import BENCH_QUORUMS, BOOKIE_ADD_QUEUE

STATS = re.compile(
    r"^bookie requests (\d+) waited (\d+) TooManyRequests (\d+) timeouts (\d+)$", re.M
)


def bench_burst(cluster, *bookkeeper_flags):
    rc, out, err = cluster.magnetar(
        *bookkeeper_flags,
        "bench",
        *BENCH_QUORUMS,
        "-n",
        "5000",
        "-s",
        "1024",
        "--outstanding",
        "5000",
        timeout=120,
    )
    assert rc == 0, out[-2000:] + err[-2000:]
    assert re.search(r"^entries 5000 size 1024 adds/s", out, re.M), out
    ledger_id = int(re.search(r"^Ledger ID: (\d+)$", out, re.M).group(1))
    sent, waited, refused, timeouts = (int(x) for x in STATS.search(out).groups())
    return ledger_id, sent, waited, refused, timeouts


def test_the_count_bound_keeps_adds_under_the_bookie_queue(bk_cluster):
    bound = BOOKIE_ADD_QUEUE // 2
    _, sent, waited, refused, timeouts = bench_burst(
        bk_cluster, "--max-requests-per-bookie", str(bound)
    )
    assert refused == 0 and timeouts == 0
    assert sent == 10000  # each entry to its Qw = 2 bookies, once
    assert waited > 0  # the bound held adds back


def test_refused_adds_are_retried_on_the_same_bookies(bk_cluster):
    ledger_id, sent, _, refused, timeouts = bench_burst(bk_cluster)
    assert refused > 0, "the bookies did not refuse any of 5,000 adds in flight"
    assert sent == 10000 + refused and timeouts == 0
    rc, out, err = bk_cluster.magnetar("ledgermetadata", "-ledgerid", str(ledger_id))
    assert rc == 0, err
    md = out.splitlines()[1]
    assert "state=CLOSED, length=5120000, lastEntryId=4999" in md, md
    assert len(re.findall(r"(\d+)=\[([^\]]*)\]", md)) == 1, md  # one segment: no ensemble change
