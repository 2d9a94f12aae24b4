"""The chaos suite's short form (CI): 20 s on each deployment under a fixed seed with every fault
kind enabled (what fits in 20 s is injected; a slow disk and a clock step always, concurrently
with the others), then the checker (chaos.py). The long form is one command per deployment:
`.venv/bin/python tests/chaos/chaos.py --duration 3600 [--deployment cluster]`."""

import os
import shutil
import subprocess

import chaos
import pytest


def _userns_ok() -> bool:
    if not shutil.which("unshare") or not shutil.which("nsenter"):
        return False
    r = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "true"],
                       capture_output=True, timeout=30)
    return r.returncode == 0


@pytest.mark.skipif(not _userns_ok(), reason="no unprivileged user+mount namespace (unshare)")
def test_standalone_under_every_fault(tmp_path):
    seed = int(os.environ.get("CHAOS_SEED", "7"))
    report = tmp_path / "report.json"
    code = chaos.main(["--seed", str(seed), "--duration", os.environ.get("CHAOS_DURATION", "20"),
                       "--rate", "300", "--report", str(report),
                       "--history", str(tmp_path / "history.jsonl")])
    assert code == 0, report.read_text()


@pytest.mark.skipif(not shutil.which("java"), reason="java not installed (install-test-deps.sh)")
def test_cluster_under_every_fault(tmp_path):
    seed = int(os.environ.get("CHAOS_SEED", "7"))
    report = tmp_path / "report.json"
    code = chaos.main(["--deployment", "cluster", "--seed", str(seed),
                       "--duration", os.environ.get("CHAOS_DURATION", "20"), "--rate", "200",
                       "--report", str(report), "--history", str(tmp_path / "history.jsonl")])
    assert code == 0, report.read_text()
