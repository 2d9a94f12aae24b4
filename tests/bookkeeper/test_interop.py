"""Magnetar's BookKeeper client and BookKeeper's own Java tools (4.17) on one real cluster
(ZooKeeper + 3 bookies): each reads what the other wrote, byte for byte, and both print the same
ledger metadata; bad requests get named errors."""

import re

import pytest
from conftest import Cluster

ENTRY_LINE = re.compile(r"--------- Lid=(\d+), Eid=(\d+), EntrySize=(\d+) ---------")
METADATA = re.compile(r"(LedgerMetadata\{.*\})")


def parse_readledger(output):
    """[(entryId, entrySize, body)] from `readledger -msg` output (ours or the Java shell's)."""
    lines = output.splitlines()
    out = []
    for i, line in enumerate(lines):
        m = ENTRY_LINE.search(line)
        if m:
            out.append((int(m.group(2)), int(m.group(3)), lines[i + 1]))
    return out


def simpletest_payload():
    """The 100-byte entry `magnetar bookkeeper simpletest` writes (app/bookkeeper_cli.cc)."""
    return "".join(chr(ord("A") + (i * 7 + 3) % 26) for i in range(100))


def write_ledger_payload(i):
    """Entry i of tools/bookkeeper/src/WriteLedger.java."""
    return f"entry-{i}-" + "".join(chr(ord("a") + k % 26) for k in range(i * 37 % 200))


def java_metadata(cluster, ledger_id):
    rc, out = cluster.shell("ledgermetadata", "-ledgerid", str(ledger_id))
    assert rc == 0, out[-2000:]
    m = METADATA.search(out)
    assert m, out[-2000:]
    return m.group(1)


def magnetar_metadata(cluster, ledger_id):
    rc, out, err = cluster.magnetar("ledgermetadata", "-ledgerid", str(ledger_id))
    assert rc == 0, err
    assert out.splitlines()[0] == f"ledgerID: {ledger_id}"
    return out.splitlines()[1]


@pytest.fixture(scope="module", autouse=True)
def all_bookies_up(bk_cluster):
    bk_cluster.start_bookies()  # the session's bookies: an earlier module may have killed one


@pytest.fixture(scope="module")
def magnetar_ledger(bk_cluster):
    rc, out, err = bk_cluster.simpletest(20, "-keep")
    assert rc == 0, err
    m = re.search(r"^Ledger ID: (\d+)$", out, re.M)
    assert m, out
    assert "20 entries written to ledger" in out and "Last entry Id 19" in out
    return int(m.group(1))


def test_java_reads_a_ledger_magnetar_wrote(bk_cluster, magnetar_ledger):
    rc, out = bk_cluster.shell("readledger", "-ledgerid", str(magnetar_ledger), "-msg")
    assert rc == 0, out[-2000:]
    entries = parse_readledger(out)
    payload = simpletest_payload()
    assert [e[0] for e in entries] == list(range(20))
    assert all(body == payload for _, _, body in entries)
    # EntrySize is the entry's length field: the ledger's length up to and including it.
    assert [e[1] for e in entries] == [100 * (i + 1) for i in range(20)]
    rc, ours, err = bk_cluster.magnetar("readledger", "-ledgerid", str(magnetar_ledger), "-msg")
    assert rc == 0, err
    assert parse_readledger(ours) == entries


def test_metadata_magnetar_wrote_is_bookkeepers_own_encoding(bk_cluster, magnetar_ledger, tmp_path):
    theirs = java_metadata(bk_cluster, magnetar_ledger)
    assert "state=CLOSED, length=2000, lastEntryId=19" in theirs
    assert "customMetadata={Bookie=base64:c2ltcGxldGVzdA==}" in theirs
    assert magnetar_metadata(bk_cluster, magnetar_ledger) == theirs
    # BookKeeper re-encodes what it parsed from our znode into exactly the bytes we encode.
    java_dump, our_dump = tmp_path / "java.bin", tmp_path / "ours.bin"
    rc, out = bk_cluster.shell(
        "ledgermetadata", "-ledgerid", str(magnetar_ledger), "-dumptofile", str(java_dump)
    )
    assert rc == 0, out[-2000:]
    rc, _, err = bk_cluster.magnetar(
        "ledgermetadata", "-ledgerid", str(magnetar_ledger), "-dumptofile", str(our_dump)
    )
    assert rc == 0, err
    assert java_dump.read_bytes().startswith(b"BookieMetadataFormatVersion\t3\n")
    assert our_dump.read_bytes() == java_dump.read_bytes()


def test_magnetar_reads_a_ledger_java_wrote(bk_cluster):
    ledger_id = bk_cluster.java_write_ledger(3, 3, 2, 30)
    rc, out, err = bk_cluster.magnetar("readledger", "-ledgerid", str(ledger_id), "-msg")
    assert rc == 0, err
    entries = parse_readledger(out)
    assert [e[0] for e in entries] == list(range(30))
    length = 0
    for i, size, body in entries:
        length += len(write_ledger_payload(i))
        assert body == write_ledger_payload(i)
        assert size == length
    assert magnetar_metadata(bk_cluster, ledger_id) == java_metadata(bk_cluster, ledger_id)
    # A range, as the shell's -firstentryid/-lastentryid.
    rc, out, err = bk_cluster.magnetar(
        "readledger",
        "-ledgerid",
        str(ledger_id),
        "-firstentryid",
        "10",
        "-lastentryid",
        "12",
        "-msg",
    )
    assert rc == 0, err
    assert [e[0] for e in parse_readledger(out)] == [10, 11, 12]


def test_simpletest_deletes_its_ledger(bk_cluster):
    rc, out, err = bk_cluster.magnetar("simpletest", "-numEntries", "5")
    assert rc == 0, err
    ledger_id = int(re.search(r"^Ledger ID: (\d+)$", out, re.M).group(1))
    rc, _, err = bk_cluster.magnetar("ledgermetadata", "-ledgerid", str(ledger_id))
    assert rc == 1 and "NoSuchLedgerExists" in err


def test_pulsars_metadata_store_uri_form_reaches_the_same_cluster(bk_cluster):
    """Pulsar's default bookkeeperMetadataServiceUri form, metadata-store:zk:host:port/ledgers,
    names the same cluster as zk://host:port/ledgers."""
    pulsar_form = Cluster(bk_cluster.dir, "metadata-store:zk:" + bk_cluster.uri[len("zk://"):])
    rc, out, err = pulsar_form.magnetar("simpletest", "-numEntries", "3")
    assert rc == 0, err
    assert re.search(r"^Ledger ID: \d+$", out, re.M), out
    other = Cluster(bk_cluster.dir, "metadata-store:etcd:127.0.0.1:2379/ledgers")
    rc, _, err = other.magnetar("ledgermetadata", "-ledgerid", "1")
    assert rc != 0 and "only ZooKeeper" in err, err


def test_bad_requests_get_named_errors(bk_cluster):
    rc, _, err = bk_cluster.magnetar("readledger", "-ledgerid", "999999")
    assert rc == 1 and "NoSuchLedgerExists" in err
    rc, _, err = bk_cluster.magnetar(
        "simpletest", "-ensemble", "9", "-writeQuorum", "2", "-ackQuorum", "2", "-numEntries", "1"
    )
    assert rc == 1 and "NotEnoughBookies" in err
    rc, _, err = bk_cluster.magnetar(
        "simpletest", "-ensemble", "3", "-writeQuorum", "2", "-ackQuorum", "3", "-numEntries", "1"
    )
    assert rc == 1 and "IllegalOp" in err
