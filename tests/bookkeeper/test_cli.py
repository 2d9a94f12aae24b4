"""`magnetar bookkeeper` and scripts/bookies.sh on bad input, without a cluster: one clear error
each (no cluster needed, so no Java)."""

import os
import socket
import subprocess

from conftest import BOOKIES_SH, magnetar_bin


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def magnetar_bk(uri, *args, timeout=60):
    p = subprocess.run(
        [magnetar_bin(), "bookkeeper", "--metadata-service-uri", uri, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return p.returncode, p.stdout, p.stderr


def test_zookeeper_not_listening_is_one_error_line():
    uri = f"zk://127.0.0.1:{closed_port()}/ledgers"
    rc, out, err = magnetar_bk(uri, "--timeout-seconds", "2", "ledgermetadata", "-ledgerid", "1")
    assert rc == 1
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert uri in lines[0] and "did not answer within 2000 ms" in lines[0], lines[0]


def test_bad_quorums_say_which_bound_fails():
    uri = f"zk://127.0.0.1:{closed_port()}/ledgers"  # checked before connecting
    rc, _, err = magnetar_bk(
        uri, "simpletest", "-ensemble", "3", "-writeQuorum", "2", "-ackQuorum", "3"
    )
    assert rc == 1 and "IllegalOp (ackQuorum 3 > writeQuorum 2)" in err, err
    rc, _, err = magnetar_bk(uri, "bench", "-e", "2", "-w", "3", "-a", "2")
    assert rc == 1 and "IllegalOp (writeQuorum 3 > ensemble 2)" in err, err


def test_out_of_range_ledger_ids_are_refused():
    uri = f"zk://127.0.0.1:{closed_port()}/ledgers"
    for args, text in [
        (["readledger", "-ledgerid", "99999999999999999999"], "out of range"),
        (["readledger", "-ledgerid", "-3"], "out of range"),
        (["ledgermetadata", "-ledgerid", "0x10"], "not a decimal number"),
        (["readledger", "-ledgerid", "1", "-firstentryid", "99999999999999999999"], "out of range"),
    ]:
        rc, _, err = magnetar_bk(uri, *args)
        assert rc != 0 and ("-ledgerid" in err or "-firstentryid" in err), (args, err)
        assert text in err, (args, err)


def test_bookies_sh_checks_the_command_before_touching_the_directory(tmp_path):
    d = tmp_path / "not-made"
    p = subprocess.run(
        ["bash", BOOKIES_SH, "bogus", "-d", str(d)], capture_output=True, text=True, timeout=30
    )
    assert p.returncode == 2 and "unknown command 'bogus'" in p.stderr
    assert not os.path.exists(d)
    p = subprocess.run(
        ["bash", BOOKIES_SH, "status", "-d", str(d)], capture_output=True, text=True, timeout=30
    )
    assert p.returncode == 1 and "no cluster in" in p.stderr
    assert not os.path.exists(d)
    p = subprocess.run(["bash", BOOKIES_SH, "--help"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and "BK_LOGLEVEL" in p.stdout and "info for shell" in p.stdout
    assert "readonly|writable" in p.stdout
    # readonly / writable name the bookie by its index, and it must be running.
    for args, rc, says in ((["readonly", "x"], 2, "readonly needs a bookie index"),
                           (["writable"], 2, "writable needs a bookie index"),
                           (["readonly", "0"], 1, "bookie 0 is not running")):
        p = subprocess.run(["bash", BOOKIES_SH, args[0], "-d", str(tmp_path), *args[1:]],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == rc and says in p.stderr, (args, p.returncode, p.stderr)
