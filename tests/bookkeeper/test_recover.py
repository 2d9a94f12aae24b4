"""`magnetar bookkeeper recover` on a real cluster of 4 bookies: ledgers written with E=3 Qw=2
Qa=2, one of their bookies killed with SIGKILL, its data re-replicated by Magnetar; BookKeeper's
own shell then shows the dead bookie gone from the ensembles and reads every entry back with a
second original replica stopped too (so the copied entries are the only ones left of some)."""

import os
import re
import subprocess

from conftest import BOOKIES_SH

ENTRY = re.compile(r"--------- Lid=(\d+), Eid=(\d+), EntrySize=(\d+) ---------")


def kill9(cluster, bookie_id):
    port = bookie_id.rsplit(":", 1)[1]
    index = next(
        i
        for i in range(4)
        if open(os.path.join(cluster.dir, f"bookie-{i}", "port")).read().strip() == port
    )
    subprocess.run(["bash", BOOKIES_SH, "kill9", "-d", cluster.dir, str(index)], check=True)


def ensembles(cluster, ledger_id):
    rc, out, err = cluster.magnetar("ledgermetadata", "-ledgerid", str(ledger_id))
    assert rc == 0, err
    return re.findall(r"(\d+)=\[([^\]]*)\]", out.splitlines()[1])


def write_ledger(cluster, entries):
    rc, out, err = cluster.simpletest(entries, "--keep")
    assert rc == 0, err
    return int(re.search(r"^Ledger ID: (\d+)$", out, re.M).group(1))


def test_recover_rereplicates_a_killed_bookie(bk_cluster):
    bk_cluster.start_bookies(4)
    first = write_ledger(bk_cluster, 200)
    second = write_ledger(bk_cluster, 50)
    ensemble = ensembles(bk_cluster, first)[0][1].split(", ")
    victim, other = ensemble[0], ensemble[1]
    try:
        kill9(bk_cluster, victim)
        # Bad input: a malformed bookie id changes nothing.
        rc, out, err = bk_cluster.magnetar("recover", "-force", "not-a-bookie")
        assert rc != 0 and "invalid bookie id" in err
        # Without -force the shell asks; "n" gives up.
        p = subprocess.run(
            bk_cluster.command("recover", victim),
            input="n\n",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert p.returncode != 0 and "Give up!" in p.stdout
        # -query lists the ledger with the bookie marked; -dryrun prints the plan only.
        rc, out, err = bk_cluster.magnetar("recover", "-query", "-force", victim)
        assert rc == 0, err
        assert f"ledger {first} : CLOSED" in out and f"{victim}*" in out
        rc, out, err = bk_cluster.magnetar(
            "recover", "-dryrun", "-force", "-ledger", str(first), victim
        )
        assert rc == 0, err
        assert f"Recovered ledger {first} : " in out and "    new ensemble : [" in out
        assert victim in ensembles(bk_cluster, first)[0][1]

        rc, out, err = bk_cluster.magnetar("recover", "-force", victim, timeout=120)
        assert rc == 0, out + err
        assert f"Recovered ledger {first}." in out
        assert "Recover bookie operation completed with rc: OK" in out

        # BookKeeper's own view of the metadata: the dead bookie is gone.
        rc, out = bk_cluster.shell("ledgermetadata", "-ledgerid", str(first))
        assert rc == 0, out[-2000:]
        assert "state=CLOSED" in out and "lastEntryId=199" in out
        assert victim not in out.split("ensembles=")[1]
        for _, bookies in ensembles(bk_cluster, second):
            assert victim not in bookies

        # A second original replica stops: entries 0, 3, 6, ... of `first` (write set {0, 1})
        # now live only on the replacement.
        kill9(bk_cluster, other)
        rc, out = bk_cluster.shell("readledger", "-ledgerid", str(first))
        assert rc == 0, out[-2000:]
        assert [int(m.group(2)) for m in ENTRY.finditer(out)] == list(range(200))
        rc, out, err = bk_cluster.magnetar("readledger", "-ledgerid", str(second))
        assert rc == 0, err
        assert [int(m.group(2)) for m in ENTRY.finditer(out)] == list(range(50))
    finally:
        # The killed bookies come back for the other tests.
        bk_cluster.start_bookies(4)
