"""The reconnect storm: every client of the run made to reconnect at one moment, and what it cost.

`Storm` runs on its own thread during the measured phase (scenario section `storm`). Mode
`unload`: every topic of the run is unloaded through the admin REST API at once
(`PUT /admin/v2/persistent/{tenant}/{ns}/{topic}/unload`, as `pulsar-admin topics unload`); the
broker closes the topic's producers and consumers and the clients look the topic up again and
reconnect, resending what had no receipt (deduplication drops what was already stored).

`recovery()` reads the load generator's receipts per 10 ms (worker-result.json `receipt_timeline`)
and says how long the publish rate took to come back.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
import urllib.request
from typing import Any

from .sampler import topic_rest_url

Json = dict[str, Any]

# The rate before the storm is the mean over this window; "back" is PRE_RATE_FRACTION of it,
# measured over RECOVERY_WINDOW_S so one 10 ms bucket's jitter does not count.
PRE_WINDOW_S = 3.0
RECOVERY_WINDOW_S = 0.2
PRE_RATE_FRACTION = 0.9
DIP_SEARCH_S = 10.0


class Storm:
    """Thread: start() from the launcher when the measured phase starts; the storm runs on its
    own thread; result() after join()."""

    def __init__(self, cfg: Json, web_url: str, topics: list[str]) -> None:
        self.at_s = float(cfg["atSeconds"])
        self.mode = cfg["mode"]
        self.web_url = web_url
        self.topics = topics
        self.errors: list[str] = []
        self.start_ns: int | None = None
        self.done_ns: int | None = None
        self._thread: threading.Thread | None = None

    def start(self, measured_start_ns: int) -> None:
        self._thread = threading.Thread(target=self._run, args=(measured_start_ns,),
                                        name="storm", daemon=True)
        self._thread.start()

    def join(self, timeout: float = 60) -> None:
        if self._thread:
            self._thread.join(timeout)

    def _unload(self, topic: str) -> str | None:
        req = urllib.request.Request(topic_rest_url(self.web_url, topic, "unload"), method="PUT")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                if r.status // 100 != 2:
                    return "%s: HTTP %d" % (topic, r.status)
        except Exception as e:  # noqa: BLE001 - reported as the storm's error
            return "%s: %s" % (topic, e)
        return None

    def _run(self, measured_start_ns: int) -> None:
        delay = measured_start_ns / 1e9 + self.at_s - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        self.start_ns = time.monotonic_ns()
        workers = min(64, max(1, len(self.topics)))
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            for err in pool.map(self._unload, self.topics):
                if err:
                    self.errors.append("storm unload failed: " + err)
        self.done_ns = time.monotonic_ns()

    def result(self, measured_start_ns: int | None) -> Json:
        out: Json = {"mode": self.mode, "at_s": self.at_s, "topics": len(self.topics),
                     "happened": self.start_ns is not None}
        if self.start_ns is not None and self.done_ns is not None:
            out["unload_s"] = (self.done_ns - self.start_ns) / 1e9
            if measured_start_ns:
                out["offset_s"] = (self.start_ns - measured_start_ns) / 1e9
        return out


def recovery(timeline: list[int], bucket_ms: float, storm_offset_s: float) -> Json:
    """How the publish rate fared around a storm at storm_offset_s (from the timeline's start).

    timeline: receipts per bucket_ms. Returns pre_rate (msg/s over the PRE_WINDOW_S before),
    dip_rate (the lowest RECOVERY_WINDOW_S rate in the DIP_SEARCH_S after the storm), dipped
    (whether that is under PRE_RATE_FRACTION of pre_rate) and recovery_s: storm to the end of
    the first window at PRE_RATE_FRACTION of pre_rate after the lowest one (0 without a dip;
    None when the rate never came back)."""
    b = bucket_ms / 1000.0
    storm = int(storm_offset_s / b)
    win = max(1, int(round(RECOVERY_WINDOW_S / b)))
    pre_lo = max(0, storm - int(PRE_WINDOW_S / b))
    pre = timeline[pre_lo:storm]
    pre_rate = sum(pre) / (len(pre) * b) if pre else 0.0
    out: Json = {"pre_rate": pre_rate, "dip_rate": None, "recovery_s": None, "dipped": False}
    last = len(timeline) - win  # the last window that fits
    if pre_rate <= 0 or storm > last:
        return out

    def rate(i: int) -> float:
        return sum(timeline[i:i + win]) / (win * b)

    low_at = min(range(storm, min(last, storm + int(DIP_SEARCH_S / b)) + 1), key=rate)
    out["dip_rate"] = rate(low_at)
    back = PRE_RATE_FRACTION * pre_rate
    if out["dip_rate"] >= back:
        out["recovery_s"] = 0.0
        return out
    out["dipped"] = True
    for i in range(low_at, last + 1):
        if rate(i) >= back:
            out["recovery_s"] = (i + win) * b - storm_offset_s
            break
    return out
