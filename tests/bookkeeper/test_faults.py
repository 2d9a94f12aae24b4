"""Faults on a real cluster: kill -9 of a bookie while a ledger is written (ensemble change, no
acknowledged entry lost) and SIGSTOP of a writer while another client recovers its ledger (the
writer is fenced; the recovered ledger holds every acknowledged entry, in order). The writer is
`magnetar bookkeeper bench`, the reader `magnetar bookkeeper readledger` and BookKeeper's shell."""

import os
import re
import signal
import subprocess
import time

from conftest import BENCH_QUORUMS, BOOKIES_SH

ENTRY = re.compile(r"--------- Lid=(\d+), Eid=(\d+), EntrySize=(\d+) ---------")


def start_bench(cluster, *args):
    return subprocess.Popen(cluster.command("bench", *args), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def read_until(proc, pattern, timeout=60):
    """Lines of proc's output up to the first matching `pattern` (returned last)."""
    deadline = time.monotonic() + timeout
    lines = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        assert line, "writer exited early: " + "".join(lines[-20:])
        lines.append(line.rstrip("\n"))
        if re.search(pattern, line):
            return lines
    raise AssertionError(f"no line matching {pattern!r} in {timeout} s")


def check_entries(cluster, ledger_id, count, size):
    rc, out, err = cluster.magnetar("readledger", "-ledgerid", str(ledger_id), "-msg")
    assert rc == 0, err
    lines = out.splitlines()
    ids = []
    for i, line in enumerate(lines):
        m = ENTRY.search(line)
        if m:
            e = int(m.group(2))
            ids.append(e)
            assert int(m.group(3)) == size * (e + 1)
            assert lines[i + 1] == (f"entry-{e}-" + "x" * size)[:size]
    assert ids == list(range(count))


def bench_past_999(cluster, entries, size, outstanding, progress):
    """A `bench` writer (E=3 Qw=2 Qa=2) of `entries` entries of `size` bytes, once it printed the
    ack of entry 999: (the process, its ledger id). The writer is killed if that fails."""
    writer = start_bench(cluster, *BENCH_QUORUMS, "-n", str(entries), "-s", str(size),
                         "--outstanding", str(outstanding), "--progress", str(progress))
    try:
        ledger_id = int(read_until(writer, r"^Ledger ID: ")[-1].split()[-1])
        read_until(writer, r"^acked 999$")
    except BaseException:
        writer.kill()
        raise
    return writer, ledger_id


def metadata_line(cluster, ledger_id):
    rc, out, err = cluster.magnetar("ledgermetadata", "-ledgerid", str(ledger_id))
    assert rc == 0, err
    return out.splitlines()[1]


def test_kill9_bookie_during_adds_changes_the_ensemble(bk_cluster):
    # A fourth bookie, so that a replacement exists for E=3.
    bk_cluster.start_bookies(4)
    writer, ledger_id = bench_past_999(bk_cluster, 6000, 256, outstanding=5, progress=500)
    try:
        ensemble = re.search(r"ensembles=\{0=\[([^\]]*)\]", metadata_line(bk_cluster, ledger_id))
        victim = ensemble.group(1).split(", ")[0]
        port = victim.rsplit(":", 1)[1]
        index = next(
            i
            for i in range(4)
            if open(os.path.join(bk_cluster.dir, f"bookie-{i}", "port")).read().strip() == port
        )
        subprocess.run(["bash", BOOKIES_SH, "kill9", "-d", bk_cluster.dir, str(index)], check=True)
        out, _ = writer.communicate(timeout=120)
        assert writer.returncode == 0, out[-3000:]
        assert re.search(r"^entries 6000 size 256 adds/s", out, re.M), out[-2000:]
    finally:
        if writer.poll() is None:
            writer.kill()
    md = metadata_line(bk_cluster, ledger_id)
    assert "state=CLOSED, length=1536000, lastEntryId=5999" in md
    segments = re.findall(r"(\d+)=\[([^\]]*)\]", md)
    assert len(segments) == 2, md
    assert victim in segments[0][1] and victim not in segments[1][1]
    assert int(segments[1][0]) >= 1000
    check_entries(bk_cluster, ledger_id, 6000, 256)
    # BookKeeper's own reader sees the same ledger.
    rc, out = bk_cluster.shell("readledger", "-ledgerid", str(ledger_id), "-firstentryid", "5990")
    assert rc == 0, out[-2000:]
    assert [int(m.group(2)) for m in ENTRY.finditer(out)] == list(range(5990, 6000))
    # The killed bookie comes back for the other tests.
    bk_cluster.start_bookies(4)


def test_recovery_fences_a_stopped_writer(bk_cluster):
    writer, ledger_id = bench_past_999(bk_cluster, 10_000_000, 100, outstanding=20, progress=100)
    try:
        os.kill(writer.pid, signal.SIGSTOP)
        # What the writer had acknowledged by now is at least what it printed.
        rc, out, err = bk_cluster.magnetar(
            "readledger",
            "-ledgerid",
            str(ledger_id),
            "-r",
            "-firstentryid",
            "0",
            "-lastentryid",
            "0",
        )
        assert rc == 0, err
        md = metadata_line(bk_cluster, ledger_id)
        m = re.search(r"state=CLOSED, length=(\d+), lastEntryId=(\d+)", md)
        assert m, md
        recovered_last = int(m.group(2))
        assert int(m.group(1)) == 100 * (recovered_last + 1)
        os.kill(writer.pid, signal.SIGCONT)
        out, _ = writer.communicate(timeout=60)
    finally:
        if writer.poll() is None:
            os.kill(writer.pid, signal.SIGCONT)
            writer.kill()
    assert writer.returncode == 1, out[-2000:]
    assert re.search(r"^error at entry \d+: LedgerFenced$", out, re.M), out[-2000:]
    acked = int(re.search(r"^last acked entry (\d+)$", out, re.M).group(1))
    # Every acknowledged entry is in the recovered ledger (it may hold a few more that reached
    # the ack quorum without the writer hearing of it), in order and intact.
    assert 999 <= acked <= recovered_last
    check_entries(bk_cluster, ledger_id, recovered_last + 1, 100)
    rc, out = bk_cluster.shell("ledgermetadata", "-ledgerid", str(ledger_id))
    assert rc == 0 and f"lastEntryId={recovered_last}" in out, out[-2000:]


def test_reads_skip_a_stopped_bookie_after_one_timeout(bk_cluster):
    # A bookie that stops answering (SIGSTOP: its connections stay open) costs a reader one
    # timeout: after it, the bookie is read from last (its failure is remembered), so the
    # entries it is the first replica of go to their second replica at once.
    rc, out, err = bk_cluster.simpletest(6000, "--keep")
    assert rc == 0, err
    ledger_id = int(re.search(r"^Ledger ID: (\d+)$", out, re.M).group(1))
    ensemble = re.search(r"ensembles=\{0=\[([^\]]*)\]", metadata_line(bk_cluster, ledger_id))
    port = ensemble.group(1).split(", ")[0].rsplit(":", 1)[1]
    index = next(
        i
        for i in range(4)
        if os.path.exists(os.path.join(bk_cluster.dir, f"bookie-{i}", "port"))
        and open(os.path.join(bk_cluster.dir, f"bookie-{i}", "port")).read().strip() == port
    )
    pid = int(open(os.path.join(bk_cluster.dir, f"bookie-{index}", "pid")).read())
    # Stopped for a few seconds only: well within the bookie's ZooKeeper session (10 s).
    os.kill(pid, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        rc, out, err = bk_cluster.magnetar(
            "--timeout-seconds", "2", "readledger", "-ledgerid", str(ledger_id), timeout=120
        )
        elapsed = time.monotonic() - t0
    finally:
        os.kill(pid, signal.SIGCONT)
    assert rc == 0, err[-2000:]
    assert [int(m.group(2)) for m in ENTRY.finditer(out)] == list(range(6000))
    # Only the reads in flight when it stopped timed out (one window of 256 at most); without
    # the failure history each window of reads would pay a timeout again (about 6000 / 3 of them).
    timed_out = sum(int(n) for n in re.findall(r"(\d+) request\(s\) timed out", err))
    assert 0 < timed_out <= 256, err[-2000:]
    assert elapsed < 10, f"{elapsed:.1f} s for one 2 s timeout"


def test_the_largest_entry_goes_and_a_larger_one_is_refused_at_once(bk_cluster):
    """bookies.sh runs the bookies with Pulsar's nettyMaxFrameSizeBytes (5 MiB + 10 KiB): a 5 MiB
    entry (Pulsar's maxMessageSize) is stored; `bench` refuses a size over the frame limit (the
    client itself answers IllegalOp for such an entry: LedgerHandleTest), where bookies would
    drop the connection."""
    rc, out, err = bk_cluster.magnetar("bench", "-n", "2", "-s", str(5 * 1024 * 1024),
                                       "--outstanding", "1")
    assert rc == 0, err
    assert "adds/s" in out, out
    rc, out, err = bk_cluster.magnetar("bench", "-n", "1", "-s", str(5 * 1024 * 1024 + 10 * 1024))
    assert rc != 0 and "entrySize" in err, err
