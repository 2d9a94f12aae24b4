"""pytest plugin: a sanitizer report from any broker process fails the test that was running.

The sanitizer CI stages (scripts/test.sh) run the broker built with ASan+UBSan or TSan and set
ASAN_OPTIONS / UBSAN_OPTIONS / TSAN_OPTIONS with `log_path=$MAGNETAR_SANITIZER_LOG_DIR/<name>`, so
every report from every child process (whatever test helper started it) lands in a file
`<name>.<pid>` there instead of in a log nobody reads. This plugin fails the test during which a
new report file appeared, and fails the session for reports written after the last test (e.g. a
leak report from a session-scoped broker stopped at the end).

Load it with `-p harness.sanitizer_reports` and tests/ on PYTHONPATH. Without the environment
variable it does nothing.
"""

import os
import pathlib

import pytest

_seen = set()
_late = []


def _log_dir():
    d = os.environ.get("MAGNETAR_SANITIZER_LOG_DIR")
    return pathlib.Path(d) if d else None


def _new_reports():
    d = _log_dir()
    if d is None or not d.is_dir():
        return []
    fresh = sorted(p for p in d.iterdir() if p.is_file() and p.name not in _seen)
    _seen.update(p.name for p in fresh)
    return fresh


def _describe(paths, limit=12000):
    text = []
    for p in paths:
        text.append(f"--- {p} ---\n{p.read_text(errors='replace')}")
    joined = "\n".join(text)
    return joined if len(joined) <= limit else joined[:limit] + "\n... (truncated)"


@pytest.fixture(autouse=True)
def _fail_on_sanitizer_report():
    yield
    fresh = _new_reports()  # includes reports from an earlier module fixture's broker stop
    if fresh:
        pytest.fail("sanitizer report(s) from a broker process:\n" + _describe(fresh),
                    pytrace=False)


def pytest_sessionfinish(session, exitstatus):
    fresh = _new_reports()
    if fresh:
        _late.extend(fresh)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter):
    if _late:
        terminalreporter.section("sanitizer reports after the last test", sep="=", red=True)
        terminalreporter.write_line(_describe(_late))
