"""Samples the broker once per interval: process CPU, RSS, per-thread CPU (from /proc), and every
topic-stats interval the topic stats of the admin REST API (when it answers), plus exact snapshots
at phase events. The topic stats go over one kept-alive HTTP connection, one topic at a time,
spread over the topic-stats interval: a request per topic on a new connection each second, all at
once, cost the runner about a quarter of a core and the broker's threads their share on a 2-core
machine (docs/perf.md, "the sampler's cost")."""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.parse
from typing import TYPE_CHECKING, Any

from . import procstat

if TYPE_CHECKING:
    from .brokers import Broker


def topic_rest_url(web_url: str, topic: str, action: str) -> str:
    """persistent://tenant/ns/name -> {web}/admin/v2/persistent/tenant/ns/name/{action}."""
    rest = topic.split("://", 1)
    domain, path = (rest[0], rest[1]) if len(rest) == 2 else ("persistent", rest[0])
    return "%s/admin/v2/%s/%s/%s" % (web_url, domain, path, action)


def topic_stats_url(web_url: str, topic: str) -> str:
    """The topic's stats without its producers and consumers lists (Pulsar's GetStatsOptions:
    15,000 producers make a high-rate topic's stats ~100 times larger; a broker that does not
    know the parameters answers the lists, which are not read)."""
    return topic_rest_url(web_url, topic, "stats") + "?excludePublishers=true&excludeConsumers=true"


def flatten_topic_stats(topic: str, doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows {topic, subscription, msgRateIn, msgRateOut, msgBacklog, ...} from a Pulsar
    TopicStats document (one row for the topic itself with subscription '')."""
    rows = [{"topic": topic, "subscription": "",
             "msgRateIn": doc.get("msgRateIn"), "msgRateOut": doc.get("msgRateOut"),
             "msgBacklog": None, "storageSize": doc.get("storageSize")}]
    for name, sub in sorted((doc.get("subscriptions") or {}).items()):
        rows.append({"topic": topic, "subscription": name,
                     "msgRateIn": None, "msgRateOut": sub.get("msgRateOut"),
                     "msgBacklog": sub.get("msgBacklog"), "storageSize": None})
    return rows


def _add_cpu_and_threads(snap: dict[str, Any], pid: int, prefix: str) -> None:
    """snap[prefix + "cpu_s"] and snap[prefix + "threads"] of a process (neither once it is
    gone)."""
    try:
        snap[prefix + "cpu_s"] = procstat.process_cpu_seconds(pid)
        snap[prefix + "threads"] = procstat.thread_cpu_ticks(pid)
    except OSError:
        pass


class HttpStatusError(Exception):
    """An admin REST answer other than 200 (code: its HTTP status)."""

    def __init__(self, code: int) -> None:
        super().__init__("HTTP %d" % code)
        self.code = code


class Sampler:
    """Thread: start()/stop()/snapshot() from the launcher; the loop runs on its own thread."""

    def __init__(self, broker: Broker, topics: list[str], interval: float = 1.0,
                 topic_stats: bool = True, worker_pid: int | None = None,
                 topic_stats_interval: float = 5.0) -> None:
        self.broker = broker
        self.topics = topics
        self.interval = interval
        # Topic stats every topic_stats_interval seconds (at least every interval).
        self.topic_stats_interval = max(interval, topic_stats_interval)
        self.topic_stats = topic_stats and broker.web_url is not None
        self._http = None        # the kept-alive connection to the broker's web port
        self.worker_pid = worker_pid
        # The broker's helper processes by group (bookies, ZooKeeper), sampled apart from it.
        self.aux_pids = broker.aux_pids() if hasattr(broker, "aux_pids") else {}
        self.samples = []        # {t, cpu_s, rss_kb, hwm_kb, worker_cpu_s}
        self.topic_rows = []     # {t, topic, subscription, ...}
        self.thread_series = []  # (t, {tid: (name, ticks)}) of the broker, each interval
        self.stats_note = None   # why topic stats are missing, if they are
        self.stats_ok = 0
        self.peak_hwm_kb = 0
        self.snapshots = {}
        self._stop = threading.Event()
        self._thread = None
        self._lock = threading.Lock()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stops sampling after one last sample (the final RSS high-water mark). Idempotent."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=10)
        self._sample_process(time.monotonic())

    def snapshot(self, label: str, t: float | None = None) -> dict[str, Any]:
        """Exact broker CPU, per-thread ticks and worker CPU now, stored under label."""
        snap = {"t": time.monotonic() if t is None else t,
                "machine_busy_s": procstat.machine_busy_seconds()}
        if self.broker.pid:
            _add_cpu_and_threads(snap, self.broker.pid, "")
        if self.worker_pid:
            _add_cpu_and_threads(snap, self.worker_pid, "worker_")
        self._add_aux_cpu(snap)
        with self._lock:
            self.snapshots[label] = snap
        return snap

    def _add_aux_cpu(self, row: dict[str, Any]) -> None:
        """row["aux_cpu_s"]: CPU seconds of each group of helper processes (a group whose process
        is gone is left out, so its CPU of the phase is not counted wrong; no key when none)."""
        out = {}
        for group, pids in self.aux_pids.items():
            try:
                out[group] = sum(procstat.process_cpu_seconds(p) for p in pids)
            except OSError:
                continue
        if out:
            row["aux_cpu_s"] = out

    def _sample_process(self, now: float) -> None:
        pid = self.broker.pid
        row = {"t": now}
        if pid:
            try:
                row["cpu_s"] = procstat.process_cpu_seconds(pid)
                mem = procstat.memory_kb(pid)
                row["rss_kb"] = mem.get("VmRSS")
                row["hwm_kb"] = mem.get("VmHWM")
                if row["hwm_kb"]:
                    self.peak_hwm_kb = max(self.peak_hwm_kb, row["hwm_kb"])
                threads = procstat.thread_cpu_ticks(pid)
                with self._lock:
                    self.thread_series.append((now, threads))
            except OSError:
                pass
        if self.worker_pid:
            try:
                row["worker_cpu_s"] = procstat.process_cpu_seconds(self.worker_pid)
            except OSError:
                pass
        self._add_aux_cpu(row)
        with self._lock:
            self.samples.append(row)

    def _get_json(self, url: str) -> Any:
        """GET url on the kept-alive connection (made again after an error). Raises
        HttpStatusError for an answer other than 200, OSError or ValueError otherwise."""
        parts = urllib.parse.urlsplit(url)
        if self._http is None:
            self._http = http.client.HTTPConnection(
                parts.hostname, parts.port, timeout=max(0.5, self.interval / 2))
        try:
            target = parts.path + ("?" + parts.query if parts.query else "")
            self._http.request("GET", target, headers={"Accept": "application/json"})
            r = self._http.getresponse()
            body = r.read()
        except (OSError, http.client.HTTPException):
            self._http.close()
            self._http = None
            raise
        if r.status != 200:
            raise HttpStatusError(r.status)
        return json.loads(body.decode())

    def _sample_topics(self, now: float) -> None:
        """Every topic once (a round), in order; stops at a topic that is not there yet."""
        for topic in self.topics:
            if not self._sample_topic(topic, now):
                return

    def _sample_topic(self, topic: str, now: float) -> bool:
        """One topic's stats as rows at time now; False when the round should stop (an answer
        other than 200: the topic is not created yet, or the broker has no such endpoint)."""
        url = topic_stats_url(self.broker.web_url, topic)
        try:
            doc = self._get_json(url)
        except HttpStatusError as e:
            if self.stats_ok == 0:
                self.stats_note = "topic stats not available: GET %s answered %d" % (url, e.code)
                # 404: the producers have not created the topic yet (the sampler starts with
                # the broker), so ask again later; another code: the broker has no such
                # endpoint, stop asking.
                if e.code != 404:
                    self.topic_stats = False
            return False
        except Exception as e:  # noqa: BLE001 - a slow or failed sample is skipped
            self.stats_note = "some topic stats samples failed: %s" % e
            return True
        if self.stats_ok == 0 and self.stats_note and "not available" in self.stats_note:
            self.stats_note = None  # it exists now
        self.stats_ok += 1
        with self._lock:
            for row in flatten_topic_stats(topic, doc):
                row["t"] = now
                self.topic_rows.append(row)
        return True

    def _loop(self) -> None:
        # The topics' requests are spread evenly over the topic-stats interval, one at a time:
        # a burst of one request per topic stalls the broker's threads for long enough to show
        # in the end-to-end p99 (docs/perf.md, "the sampler's cost").
        next_t = time.monotonic()
        next_topic = next_t
        i = 0
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= next_t:
                self._sample_process(now)
                next_t += self.interval
            if self.topic_stats and self.topics and now >= next_topic:
                if not self._sample_topic(self.topics[i % len(self.topics)], now) and \
                        self.stats_ok == 0:
                    # Not created yet (the sampler starts with the broker): the same topic again
                    # after one sampling interval, so that a short run still gets its stats.
                    next_topic = now + self.interval
                else:
                    i += 1  # a topic gone meanwhile is asked for again in the next round
                    next_topic = max(next_topic + self.topic_stats_interval / len(self.topics),
                                     now - self.interval)  # after a stall: no burst to catch up
            wake = next_t
            if self.topic_stats and self.topics:
                wake = min(wake, next_topic)
            self._stop.wait(max(0.0, wake - time.monotonic()))
        if self._http is not None:
            self._http.close()
