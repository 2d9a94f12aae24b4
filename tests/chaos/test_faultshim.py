"""The chaos suite's LD_PRELOAD shim (faultshim.c) on a small C program: with its control file at
zero the program sees the real clocks and undelayed syncs; set while it runs, its wall clock is
shifted (forward and back) and its syncs are delayed, and CLOCK_MONOTONIC is not moved."""

import json
import os
import select
import shutil
import subprocess

import faultshim
import pytest

pytestmark = pytest.mark.skipif(not shutil.which("cc"), reason="no C compiler (cc)")

# Each probe prints one JSON line: every wall-clock API minus the real (raw syscall) realtime,
# the monotonic clock minus the raw monotonic one, each sync's duration, and how long an
# absolute 200 ms realtime wait lasted. It probes again after each line on stdin.
PROBE = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

static double raw(clockid_t c) {
  struct timespec ts;
  syscall(SYS_clock_gettime, c, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}
static double api(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}
static double timed(int (*f)(int), int fd) {
  double t = raw(CLOCK_MONOTONIC);
  if (f(fd) != 0) { perror("sync"); exit(1); }
  return raw(CLOCK_MONOTONIC) - t;
}
static int sfr(int fd) {
  return sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                         SYNC_FILE_RANGE_WAIT_AFTER);
}
static void *map;
static int ms(int fd) { (void)fd; return msync(map, 4096, MS_SYNC); }

int main(int argc, char **argv) {
  int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || ftruncate(fd, 4096) != 0) { perror(argv[1]); return 1; }
  map = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  char line[16];
  do {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    double now = raw(CLOCK_REALTIME);
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    double tsg = ts.tv_sec + ts.tv_nsec / 1e9;
    /* An absolute wait of 200 ms by the (possibly shifted) realtime clock. */
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t c = PTHREAD_COND_INITIALIZER;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 200000000;
    if (ts.tv_nsec >= 1000000000) { ts.tv_nsec -= 1000000000; ts.tv_sec++; }
    double t0 = raw(CLOCK_MONOTONIC);
    pthread_mutex_lock(&m);
    while (pthread_cond_timedwait(&c, &m, &ts) == 0) {}
    pthread_mutex_unlock(&m);
    double cond_wait = raw(CLOCK_MONOTONIC) - t0;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 200000000;
    if (ts.tv_nsec >= 1000000000) { ts.tv_nsec -= 1000000000; ts.tv_sec++; }
    t0 = raw(CLOCK_MONOTONIC);
    clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, NULL);
    double sleep_wait = raw(CLOCK_MONOTONIC) - t0;
    printf("{\"realtime\": %.3f, \"coarse\": %.3f, \"gettimeofday\": %.3f, \"time\": %.3f, "
           "\"timespec_get\": %.3f, \"monotonic\": %.3f, \"fsync\": %.3f, \"fdatasync\": %.3f, "
           "\"sync_file_range\": %.3f, \"msync\": %.3f, \"cond_wait\": %.3f, "
           "\"abs_sleep\": %.3f}\n",
           api(CLOCK_REALTIME) - raw(CLOCK_REALTIME),
           api(CLOCK_REALTIME_COARSE) - raw(CLOCK_REALTIME), tv.tv_sec + tv.tv_usec / 1e6 - now,
           (double)time(NULL) - raw(CLOCK_REALTIME), tsg - now,
           api(CLOCK_MONOTONIC) - raw(CLOCK_MONOTONIC), timed(fsync, fd), timed(fdatasync, fd),
           timed(sfr, fd), timed(ms, fd), cond_wait, sleep_wait);
    fflush(stdout);
  } while (fgets(line, sizeof line, stdin));
  return 0;
}
"""

WALL = ("realtime", "coarse", "gettimeofday", "time", "timespec_get")
SYNCS = ("fsync", "fdatasync", "sync_file_range", "msync")


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    d = tmp_path_factory.mktemp("faultshim")
    src = d / "probe.c"
    src.write_text(PROBE)
    exe = d / "probe"
    subprocess.run(["cc", "-O1", "-o", str(exe), str(src), "-lpthread"], check=True)
    return d, str(exe), faultshim.build(str(d))


def _data(tmp_path):
    """The probe's file: on a tmpfs where there is one, so that a real sync takes no time."""
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK):
        return os.path.join(shm, f"faultshim-probe-{os.getpid()}-{tmp_path.name}")
    return str(tmp_path / "data")


def _start(probe, ctl, data):
    _d, exe, so = probe
    env = {"PATH": "/usr/bin:/bin", **faultshim.env(so, ctl.path)}
    return subprocess.Popen([exe, data], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)


def _next(p, timeout_s=30):
    """The probe's next line; a wait that never ends (a deadline off by the clock's offset)
    fails here."""
    ready, _, _ = select.select([p.stdout], [], [], timeout_s)
    assert ready, f"the probe printed nothing in {timeout_s} s"
    return json.loads(p.stdout.readline())


def _assert_unchanged(r):
    for k in WALL:
        assert abs(r[k]) < 1.1, (k, r)  # time() and the coarse clock lag by < 1 s, 4 ms
    assert abs(r["monotonic"]) < 0.05, r
    for k in SYNCS:
        assert r[k] < 0.08, (k, r)  # a real sync of one page (the machine may be loaded)
    assert 0.18 < r["cond_wait"] < 0.6 and 0.18 < r["abs_sleep"] < 0.6, r


def test_zero_changes_nothing_and_changes_apply_while_running(probe, tmp_path):
    ctl = faultshim.Control(str(tmp_path / "ctl"))
    data = _data(tmp_path)
    p = _start(probe, ctl, data)
    try:
        _assert_unchanged(_next(p))
        ctl.set_clock_offset(600)
        ctl.set_sync_delay(0.15)
        p.stdin.write("\n")
        p.stdin.flush()
        r = _next(p)
        for k in WALL:
            assert 598.9 < r[k] < 601.1, (k, r)
        assert abs(r["monotonic"]) < 0.05, r  # a clock step leaves CLOCK_MONOTONIC alone
        for k in SYNCS:
            assert 0.14 < r[k] < 0.6, (k, r)
        # A deadline 200 ms ahead on the shifted clock ends 200 ms later, not 10 min later.
        assert 0.18 < r["cond_wait"] < 0.6 and 0.18 < r["abs_sleep"] < 0.6, r
        ctl.set_clock_offset(-90.5)
        ctl.set_sync_delay(0)
        p.stdin.write("\n")
        p.stdin.flush()
        r = _next(p)
        for k in WALL:
            assert -91.6 < r[k] < -89.4, (k, r)
        for k in SYNCS:
            assert r[k] < 0.08, (k, r)
        # ... and a deadline 200 ms ahead of a clock stepped back does not end at once.
        assert 0.18 < r["cond_wait"] < 0.6 and 0.18 < r["abs_sleep"] < 0.6, r
        ctl.set_clock_offset(0)
        p.stdin.write("\n")
        p.stdin.flush()
        _assert_unchanged(_next(p))
    finally:
        if p.poll() is None and not p.stdin.closed:
            p.stdin.close()
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        os.remove(data)
    assert p.returncode == 0
    c = ctl.counters()
    assert c["fsync"] == 4 and c["fdatasync"] == 4 and c["sync_file_range"] == 4
    assert c["msync"] == 4 and c["delayed"] == 4, c


def test_without_a_control_file_the_shim_does_nothing(probe, tmp_path):
    _d, exe, so = probe
    env = {"PATH": "/usr/bin:/bin", **faultshim.env(so, str(tmp_path / "missing"))}
    data = _data(tmp_path)
    p = subprocess.run([exe, data], env=env, input="", capture_output=True, text=True, timeout=60)
    os.remove(data)
    assert p.returncode == 0, p.stderr
    _assert_unchanged(json.loads(p.stdout))


def test_the_build_is_cached_by_source(probe):
    d, _exe, so = probe
    mtime = os.path.getmtime(so)
    assert faultshim.build(str(d)) == so and os.path.getmtime(so) == mtime
