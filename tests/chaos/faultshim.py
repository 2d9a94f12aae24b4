"""The chaos suite's LD_PRELOAD shim (faultshim.c): building it, and its control file.

build(workdir) compiles faultshim.c into workdir/faultshim.so (again only when the source
changed); Control(path) creates a control file and changes a running process's faults through it:
a process started with env(so, path) in its environment maps the file and reads it on every call.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import struct
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "faultshim.c")
MAGIC = b"MGFSHIM1"
SIZE = 64  # bytes the library maps (faultshim.c FS_SIZE)
_SYNC_DELAY_US, _CLOCK_OFFSET_NS = 8, 16
COUNTERS = ("fsync", "fdatasync", "sync_file_range", "msync", "delayed")  # int64s from 24


def build(workdir: str) -> str:
    """Compiles the shim into workdir/faultshim.so unless one built from the same source is
    there; returns its path. Raises RuntimeError with the compiler's output on failure."""
    with open(SOURCE, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    out = os.path.join(workdir, "faultshim.so")
    stamp = out + ".sha256"
    if os.path.exists(out) and os.path.exists(stamp) and open(stamp).read() == digest:
        return out
    p = subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", out, SOURCE, "-ldl"],
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError(f"cc faultshim.c failed:\n{p.stdout}{p.stderr}")
    with open(stamp, "w") as f:
        f.write(digest)
    return out


def env(so: str, ctl: str) -> dict[str, str]:
    """The environment entries that put the shim, controlled by `ctl`, into a process."""
    return {"LD_PRELOAD": so, "MAGNETAR_FAULTSHIM_CTL": ctl}


class Control:
    """A control file: created zeroed (no fault) with the magic, then mapped here; writes are
    seen by every process that mapped it on its next call."""

    def __init__(self, path: str) -> None:
        self.path = path
        if not os.path.exists(path):
            with open(path + ".tmp", "wb") as f:
                f.write(MAGIC + b"\0" * (4096 - len(MAGIC)))
            os.replace(path + ".tmp", path)
        fd = os.open(path, os.O_RDWR)
        try:
            self._map = mmap.mmap(fd, SIZE)
        finally:
            os.close(fd)

    def set_sync_delay(self, seconds: float) -> None:
        """Each fsync/fdatasync/msync(MS_SYNC)/waiting sync_file_range sleeps this long first."""
        struct.pack_into("<q", self._map, _SYNC_DELAY_US, round(seconds * 1e6))

    def set_clock_offset(self, seconds: float) -> None:
        """CLOCK_REALTIME (and gettimeofday, time) reads this much ahead (negative: behind)."""
        struct.pack_into("<q", self._map, _CLOCK_OFFSET_NS, round(seconds * 1e9))

    @property
    def sync_delay(self) -> float:
        return struct.unpack_from("<q", self._map, _SYNC_DELAY_US)[0] / 1e6

    @property
    def clock_offset(self) -> float:
        return struct.unpack_from("<q", self._map, _CLOCK_OFFSET_NS)[0] / 1e9

    def counters(self) -> dict[str, int]:
        """Calls seen by the processes using this file: per sync function, and how many of
        them were delayed."""
        return dict(zip(COUNTERS, struct.unpack_from(f"<{len(COUNTERS)}q", self._map, 24)))

    def close(self) -> None:
        self._map.close()
