"""Process and thread CPU and memory from /proc (Linux).

CPU is utime + stime (fields 14 and 15 of /proc/PID/stat, in clock ticks); thread names come from
/proc/PID/task/TID/comm (15 characters at most, as the kernel keeps them).
"""

from __future__ import annotations

import os
from typing import Any

CLK_TCK = os.sysconf("SC_CLK_TCK")


def parse_stat(text: str) -> tuple[str, int, int]:
    """(comm, utime_ticks, stime_ticks) of a /proc/.../stat line (comm may hold spaces/parens)."""
    open_paren = text.index("(")
    close_paren = text.rindex(")")
    comm = text[open_paren + 1:close_paren]
    fields = text[close_paren + 2:].split()
    # fields[0] is field 3 (state); utime is field 14, stime field 15.
    return comm, int(fields[11]), int(fields[12])


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of the whole process (all threads, live and exited)."""
    _, ut, st = parse_stat(_read("/proc/%d/stat" % pid))
    return (ut + st) / CLK_TCK


def thread_cpu_ticks(pid: int) -> dict[str, Any]:
    """{tid: (name, ticks)} of the process's live threads."""
    out = {}
    base = "/proc/%d/task" % pid
    try:
        tids = os.listdir(base)
    except OSError:
        return out
    for tid in tids:
        try:
            text = _read("%s/%s/stat" % (base, tid))
            name = _read("%s/%s/comm" % (base, tid)).strip()
        except OSError:
            continue  # the thread exited meanwhile
        _, ut, st = parse_stat(text)
        out[int(tid)] = (name, ut + st)
    return out


def thread_cpu_by_name(before: dict[str, Any], after: dict[str, Any],
                       seconds: float) -> dict[str, float]:
    """{thread name: CPU % of one core} between two thread_cpu_ticks() snapshots.

    Threads are matched by tid (a thread new in `after` counts from 0); threads sharing a name
    (e.g. JVM pools) are summed.
    """
    if seconds <= 0:
        return {}
    out = {}
    for tid, (name, ticks) in after.items():
        prev = before.get(tid)
        delta = ticks - (prev[1] if prev and prev[0] == name else 0)
        out[name] = out.get(name, 0.0) + delta / CLK_TCK / seconds * 100.0
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


def memory_kb(pid: int) -> dict[str, int]:
    """{'VmRSS': kB, 'VmHWM': kB} from /proc/PID/status (missing keys left out)."""
    out = {}
    try:
        for line in _read("/proc/%d/status" % pid).splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(rest.split()[0])
    except OSError:
        pass
    return out


def machine_busy_seconds() -> float:
    """CPU seconds all CPUs spent busy since boot (user, nice, system, irq, softirq, steal)."""
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    vals = [int(v) for v in fields]
    busy = vals[0] + vals[1] + vals[2] + vals[5] + vals[6] + (vals[7] if len(vals) > 7 else 0)
    return busy / CLK_TCK


def load_average() -> list[float] | None:
    try:
        return list(os.getloadavg())
    except OSError:
        return None


def cpu_count() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count()


def parse_cpuset(text: object) -> set[int]:
    """'0-1,4' -> {0, 1, 4}."""
    cpus = set()
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            cpus.update(range(int(lo), int(hi) + 1))
        else:
            cpus.add(int(part))
    if not cpus:
        raise ValueError("empty cpuset %r" % text)
    return cpus
