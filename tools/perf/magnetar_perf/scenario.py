"""Scenario files: YAML with `extends` inheritance, environment overrides and --set overrides.

Resolution order (later wins):
  1. DEFAULTS below,
  2. the `extends` chain, base first (a name is looked up in the scenarios directory, a path is
     relative to the file that names it),
  3. the scenario file itself,
  4. `${VAR}` / `${VAR:-default}` references in string values, replaced from the environment,
  5. MAGNETAR_PERF_SET in the environment: whitespace-separated `path=value` entries,
  6. --set path=value on the command line.
Maps merge key by key; lists and scalars replace. Unknown keys are errors (broker.settings is
free-form: any broker setting). Values of overrides are parsed as YAML (`8` is an int, `true` a
bool, `[0, 20]` a list).
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

SCENARIO_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "scenarios")

DEFAULTS = {
    "name": "",
    "description": "",
    "broker": {
        # magnetar: start `magnetar standalone`; pulsar: tools/pulsar-reference/
        # pulsar-standalone.sh; magnetar-bk: ZooKeeper + bookies (broker.bookkeeper) and one
        # `magnetar broker` in cluster mode storing its topics on them; pulsar-bk: the same with
        # Apache Pulsar's broker (tools/pulsar-reference/pulsar-broker.sh)
        "kind": "magnetar",
        "binary": None,             # None: --magnetar-bin, $MAGNETAR_BIN, build dir
        "settings": {},             # broker.conf keys passed as --set key=value
        "cpuset": None,             # e.g. "0-1": pin the broker (and --available-processors)
        "availableProcessors": None,  # explicit --available-processors (default: cpuset size)
        "journalOnTmpfs": False,    # journalDirectory on /dev/shm
        "fsync": None,              # False: journalSyncData=false; None: the broker's default
        "startTimeoutSeconds": 120,
        "javaOpts": "",             # pulsar only: extra JVM options
        "tls": False,               # clients on pulsar+ssl:// (brokerServicePortTls; test certs)
        # Peak RSS allowed above maxMessagePublishBufferSizeInMB + managedLedgerCacheSizeMB (MB);
        # None: reported only. A run whose broker exceeds it is invalid.
        "rssBoundBaseMb": None,
        # magnetar-bk / pulsar-bk only: the BookKeeper cluster started for the run
        # (scripts/zookeeper.sh + scripts/bookies.sh) and the broker's managed-ledger quorums.
        "bookkeeper": {
            "bookies": 3,
            "ensembleSize": 2,      # managedLedgerDefaultEnsembleSize
            "writeQuorum": 2,       # managedLedgerDefaultWriteQuorum
            "ackQuorum": 2,         # managedLedgerDefaultAckQuorum
            "journalSyncData": True,  # the bookies' (Pulsar's default); broker.fsync is not used
            # Ports from the block P..P+99: the bookies on the first free consecutive ones from
            # P, ZooKeeper on the first free one from P+50, the broker's two from P+60; None:
            # ports the system picks.
            "portBase": None,
            "startTimeoutSeconds": 300,
        },
    },
    "loadgen": {
        "cpuset": None,             # pin the worker
        "producerIoThreads": 1,
        "consumerIoThreads": 1,     # per application
        "sendTimeoutMs": 0,
    },
    "workload": {
        "devices": 1000000,
        "gateways": 500,
        "topics": 1,
        "topicPrefix": "persistent://public/default/iot-telemetry-",
        "payloadBytes": 128,
        "batching": False,
        "batchingMaxPublishDelayMs": 10,
        "maxOutstanding": 100000,
        "rate": 0,
        "connectMode": "sequential",
        # binary: gateways on Pulsar's protocol; websocket: through the broker's WebSocket API
        # (needs broker.settings.webSocketServiceEnabled; sequential connects, no batching);
        # mqtt: each gateway an MQTT 3.1.1 connection publishing QoS 1 (needs
        # broker.settings.mqttListeners with an mqtt:// entry; no batching, Magnetar only).
        "gatewayProtocol": "binary",
        "warmupRounds": 2,
        "warmupMessages": 500000,
        "warmupSeconds": 0,
        "measuredMessages": 4000000,
        "applications": 1,
        "pods": 20,
        "joinSeconds": [],
        "subscriptionPrefix": "iot-application-",
        "receiverQueueSize": 1000,
        "catchUpLagMs": 1000,
        "timeoutSeconds": 600,
        "stallSeconds": 30,
        "seed": 1,
        # Consume-transform-produce (iot-telemetry-txn, issue 45): each application turns every
        # input into one derived message on <outputTopicPrefix><application>-<topic>, in batches
        # of txnBatch (waiting at most txnBatchWaitMs for more), one transaction per batch
        # (transactions: true) or plain sends, a flush and acks (false); txnAbortFraction of the
        # transactions are aborted first and redone. A verifier per application
        # (iot-output-check-<i>, verifierPods pods) reads the output: each input exactly once, in
        # order per device, nothing of an aborted transaction.
        "transform": False,
        "transactions": False,
        "txnBatch": 100,
        "txnBatchWaitMs": 100,
        "txnAbortFraction": 0.0,
        "txnTimeoutMs": 60000,
        "outputTopicPrefix": "persistent://public/default/iot-telemetry-out-",
        "verifierPods": 1,
    },
    # A reconnect storm: at atSeconds into the measured phase every gateway and pod is made to
    # reconnect at once. mode unload: every topic is unloaded through the admin REST API (the
    # broker closes its producers and consumers; the clients look up and reconnect).
    "storm": {
        "atSeconds": 0.0,           # 0: no storm
        "mode": "unload",
    },
    # Several brokers (broker.kind magnetar-bk only) and the load manager at work (issue 48):
    # brokers > 1 starts that many `magnetar broker`s on the run's ZooKeeper and bookies; the
    # topics' namespace is created with namespaceBundles bundles (0: the broker's default);
    # placeOnFirstBroker: the topics' bundles are owned by broker 1 (HTTP lookups through it
    # while it is the only broker) before the others start, so the load starts on one broker.
    # The run samples each broker's CPU, load report and lb metrics every sampling interval and
    # checks that within targetIntervals shedding intervals (from the measured phase's start)
    # the busiest broker's msg rate (in + out) is within targetPercent of the brokers' mean;
    # windowSeconds: the end-to-end p99 is reported over that long before and after each move.
    "cluster": {
        "brokers": 1,
        "namespaceBundles": 0,
        "placeOnFirstBroker": False,
        "targetPercent": 25.0,
        "targetIntervals": 5,
        "windowSeconds": 5.0,
    },
    "sampling": {
        "intervalSeconds": 1.0,
        "topicStats": True,         # GET /admin/v2/persistent/{tenant}/{ns}/{topic}/stats
        "topicStatsIntervalSeconds": 5.0,  # how often (at least intervalSeconds)
    },
}

FREE_FORM = {("broker", "settings")}
BROKER_KINDS = ("magnetar", "pulsar", "magnetar-bk", "pulsar-bk")
BOOKKEEPER_KINDS = ("magnetar-bk", "pulsar-bk")
STORM_MODES = ("unload",)
SECTIONS = [k for k, v in DEFAULTS.items() if isinstance(v, dict)]
_ENV_REF = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?\}$")


class ScenarioError(Exception):
    pass


def find_scenario(ref: str, base_dir: str | None = None) -> str:
    """Path of a scenario given as a path or a name in tools/perf/scenarios (.yaml optional)."""
    candidates = []
    if base_dir and not os.path.isabs(ref):
        candidates.append(os.path.join(base_dir, ref))
    candidates.append(ref)
    for name in (ref, ref + ".yaml"):
        candidates.append(os.path.join(SCENARIO_DIR, os.path.basename(name)))
    if base_dir and not ref.endswith(".yaml"):
        candidates.append(os.path.join(base_dir, ref + ".yaml"))
    for c in candidates:
        if os.path.isfile(c):
            return os.path.abspath(c)
    raise ScenarioError("scenario not found: %s" % ref)


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """base updated by over: dicts merge recursively, anything else is replaced (copied)."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def load_chain(path: str, _seen: list[str] | None = None) -> list[tuple[str, str, dict[str, Any]]]:
    """[(path, text, data)] of the extends chain, base first."""
    seen = _seen or []
    path = os.path.abspath(path)
    if path in seen:
        raise ScenarioError("extends cycle: %s" % " -> ".join(seen + [path]))
    with open(path) as f:
        text = f.read()
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise ScenarioError("%s: %s" % (path, e)) from None
    if not isinstance(data, dict):
        raise ScenarioError("%s: a scenario is a YAML mapping" % path)
    chain = []
    parent = data.pop("extends", None)
    if parent:
        chain = load_chain(find_scenario(parent, os.path.dirname(path)), seen + [path])
    return chain + [(path, text, data)]


def substitute_env(value: Any, env: Mapping[str, str]) -> Any:
    """Replaces whole-string ${VAR} / ${VAR:-default} references (typed as YAML)."""
    if isinstance(value, dict):
        return {k: substitute_env(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute_env(v, env) for v in value]
    if isinstance(value, str):
        m = _ENV_REF.match(value.strip())
        if m:
            var, default = m.group(1), m.group(2)
            if var in env:
                return parse_value(env[var])
            if default is None:
                raise ScenarioError("environment variable %s is not set" % var)
            return parse_value(default)
    return value


def parse_value(text: str) -> Any:
    try:
        return yaml.safe_load(text) if text.strip() != "" else ""
    except yaml.YAMLError:
        return text


def expand_path(path: str) -> str:
    """A bare name that is no top-level key is a broker setting: numIOThreads ->
    broker.settings.numIOThreads."""
    if "." in path or path in DEFAULTS:
        return path
    return "broker.settings." + path


def set_path(data: dict[str, Any], path: str, value: Any) -> None:
    keys = expand_path(path).split(".")
    node = data
    for k in keys[:-1]:
        if not isinstance(node.get(k), dict):
            node[k] = {}
        node = node[k]
    node[keys[-1]] = value


def get_path(data: dict[str, Any], path: str) -> Any:
    node = data
    for k in expand_path(path).split("."):
        node = node[k]
    return node


def parse_assignment(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise ScenarioError("expected path=value, got %r" % text)
    path, value = text.split("=", 1)
    return path.strip(), parse_value(value)


def validate(data: dict[str, Any], defaults: dict[str, Any] = DEFAULTS,
             prefix: tuple[str, ...] = ()) -> None:
    for k, v in data.items():
        where = ".".join(prefix + (k,))
        if k not in defaults:
            raise ScenarioError("unknown key %s" % where)
        d = defaults[k]
        if prefix + (k,) in FREE_FORM:
            if not isinstance(v, dict):
                raise ScenarioError("%s must be a mapping" % where)
            continue
        if isinstance(d, dict):
            if not isinstance(v, dict):
                raise ScenarioError("%s must be a mapping" % where)
            validate(v, d, prefix + (k,))
        elif d is None or v is None:
            continue
        elif isinstance(d, bool):
            if not isinstance(v, bool):
                raise ScenarioError("%s must be true or false, got %r" % (where, v))
        elif isinstance(d, (int, float)):
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ScenarioError("%s must be a number, got %r" % (where, v))
            if isinstance(d, int) and not isinstance(d, bool) and isinstance(v, float) \
                    and not v.is_integer():
                raise ScenarioError("%s must be an integer, got %r" % (where, v))
        elif isinstance(d, list):
            if not isinstance(v, list):
                raise ScenarioError("%s must be a list, got %r" % (where, v))
        elif isinstance(d, str):
            if not isinstance(v, str):
                raise ScenarioError("%s must be a string, got %r" % (where, v))
    wl = data.get("workload", {})
    if prefix == () and wl:
        joins = wl.get("joinSeconds", [])
        if len(joins) > wl.get("applications", 1):
            raise ScenarioError("workload.joinSeconds has more entries than applications")
        check_transform(wl)
        check_gateway_protocol(data)
        if data.get("broker", {}).get("kind") not in BROKER_KINDS:
            raise ScenarioError("broker.kind must be one of %s" % ", ".join(BROKER_KINDS))
        bk = data.get("broker", {}).get("bookkeeper", {})
        if bk:
            check_bookkeeper(bk)
        check_cluster(data)
        storm = data.get("storm", {})
        if storm.get("mode") not in STORM_MODES:
            raise ScenarioError("storm.mode must be one of %s" % ", ".join(STORM_MODES))
        if storm.get("atSeconds", 0) < 0:
            raise ScenarioError("storm.atSeconds must be >= 0")


def check_cluster(data: dict[str, Any]) -> None:
    """cluster: several brokers only on magnetar-bk (topics that move keep their messages only
    on BookKeeper), placeOnFirstBroker only with several, sane targets."""
    c = data.get("cluster", {})
    n = c.get("brokers", 1)
    if n < 1:
        raise ScenarioError("cluster.brokers must be >= 1, got %r" % (n,))
    if n > 1 and data.get("broker", {}).get("kind") != "magnetar-bk":
        raise ScenarioError("cluster.brokers > 1 needs broker.kind magnetar-bk")
    if c.get("placeOnFirstBroker") and n < 2:
        raise ScenarioError("cluster.placeOnFirstBroker needs cluster.brokers >= 2")
    if c.get("namespaceBundles", 0) < 0 or c.get("targetIntervals", 1) < 1 or \
            c.get("targetPercent", 1) <= 0 or c.get("windowSeconds", 1) <= 0:
        raise ScenarioError("cluster: namespaceBundles >= 0, targetIntervals >= 1, "
                            "targetPercent > 0 and windowSeconds > 0 are required")


def check_gateway_protocol(data: dict[str, Any]) -> None:
    """workload.gatewayProtocol: binary; websocket on a broker with the WebSocket service, or mqtt
    on a broker with an mqtt:// listener, each without batching, transform or a TLS broker (the
    gateways speak ws:// or mqtt:// only)."""
    wl = data.get("workload", {})
    proto = wl.get("gatewayProtocol", "binary")
    if proto not in ("binary", "websocket", "mqtt"):
        raise ScenarioError("workload.gatewayProtocol must be binary, websocket or mqtt, got %r"
                            % (proto,))
    if proto == "binary":
        return
    broker = data.get("broker", {})
    settings = broker.get("settings", {})
    if proto == "websocket" and str(settings.get("webSocketServiceEnabled", "")).lower() != "true":
        raise ScenarioError("workload.gatewayProtocol websocket needs "
                            "broker.settings.webSocketServiceEnabled: true")
    if proto == "mqtt" and "mqtt://" not in str(settings.get("mqttListeners", "")):
        raise ScenarioError("workload.gatewayProtocol mqtt needs broker.settings.mqttListeners "
                            "with an mqtt:// listener (mqtt://127.0.0.1:0)")
    if wl.get("batching") or wl.get("transform") or broker.get("tls"):
        raise ScenarioError("workload.gatewayProtocol %s takes neither batching, "
                            "transform nor broker.tls" % proto)


def check_transform(wl: dict[str, Any]) -> None:
    """The transform keys: a batch of at least 1, an abort fraction in [0, 1) that needs
    transactions, no late applications."""
    if wl.get("txnBatch", 1) < 1 or wl.get("verifierPods", 1) < 1:
        raise ScenarioError("workload.txnBatch and workload.verifierPods must be >= 1")
    frac = wl.get("txnAbortFraction", 0.0)
    if not 0 <= frac < 1:
        raise ScenarioError("workload.txnAbortFraction must be in [0, 1), got %r" % (frac,))
    if frac > 0 and not (wl.get("transform") and wl.get("transactions")):
        raise ScenarioError("workload.txnAbortFraction needs workload.transform and "
                            "workload.transactions")
    if wl.get("transform") and any(j > 0 for j in wl.get("joinSeconds", [])):
        raise ScenarioError("workload.transform does not take late applications (joinSeconds)")


def check_bookkeeper(bk: dict[str, Any]) -> None:
    """broker.bookkeeper: counts >= 1 and ensemble >= write quorum >= ack quorum, as BookKeeper
    requires, and no more bookies needed than started."""
    for k in ("bookies", "ensembleSize", "writeQuorum", "ackQuorum"):
        if bk.get(k, 1) < 1:
            raise ScenarioError("broker.bookkeeper.%s must be >= 1, got %r" % (k, bk.get(k)))
    e, w, a = bk.get("ensembleSize", 2), bk.get("writeQuorum", 2), bk.get("ackQuorum", 2)
    if not e >= w >= a:
        raise ScenarioError("broker.bookkeeper needs ensembleSize >= writeQuorum >= ackQuorum, "
                            "got %d/%d/%d" % (e, w, a))
    if e > bk.get("bookies", 3):
        raise ScenarioError("broker.bookkeeper.ensembleSize %d is more than its %d bookies"
                            % (e, bk.get("bookies", 3)))
    port = bk.get("portBase")
    if port is not None and (not isinstance(port, int) or isinstance(port, bool)
                             or not 1024 <= port <= 65535 - 99):
        raise ScenarioError("broker.bookkeeper.portBase must be a port in 1024-65436 or null, "
                            "got %r" % (port,))


def normalize_ints(data: dict[str, Any], defaults: dict[str, Any] = DEFAULTS) -> None:
    """Whole floats where the default is an int become ints (YAML 1e6 -> 1000000)."""
    for k, v in data.items():
        d = defaults.get(k) if isinstance(defaults, dict) else None
        if isinstance(v, dict) and isinstance(d, dict):
            normalize_ints(v, d)
        elif isinstance(d, int) and not isinstance(d, bool) and isinstance(v, float) \
                and v.is_integer():
            data[k] = int(v)


class Scenario:
    """A resolved scenario: .data (the merged mapping), .sources [(path, text)], .overrides."""

    def __init__(self, data: dict[str, Any], sources: list[tuple[str, str]],
                 overrides: list[str]) -> None:
        self.data = data
        self.sources = sources
        self.overrides = overrides

    @property
    def name(self) -> str:
        return self.data["name"]

    def written_text(self) -> str:
        """The files as written, base first, each under a comment naming it."""
        parts = []
        for path, text in self.sources:
            parts.append("# ---- %s\n%s" % (path, text if text.endswith("\n") else text + "\n"))
        if self.overrides:
            parts.append("# ---- overrides (MAGNETAR_PERF_SET, --set)\n" +
                         "".join("# %s\n" % o for o in self.overrides))
        return "".join(parts)

    def resolved_text(self) -> str:
        return yaml.safe_dump(self.data, sort_keys=False, default_flow_style=False)

    def worker_config(self, service_url: str, tls_trust_certs: str | None = None,
                      web_url: str | None = None, mqtt_url: str | None = None) -> dict[str, Any]:
        """The JSON document magnetar-perf-worker reads."""
        workload = dict(self.data["workload"])
        if self.data["storm"]["atSeconds"] > 0:
            workload["receiptTimeline"] = True
        cfg = {"serviceUrl": service_url, "workload": workload,
               "loadgen": {k: v for k, v in self.data["loadgen"].items() if k != "cpuset"}}
        if tls_trust_certs:
            cfg["tlsTrustCertsFilePath"] = tls_trust_certs
        if web_url:
            cfg["webServiceUrl"] = web_url
        if mqtt_url:
            cfg["mqttUrl"] = mqtt_url
        return cfg


def resolve(ref: str, sets: Iterable[str] = (),
            env: Mapping[str, str] | None = None) -> Scenario:
    """Loads scenario ref (path or name) and applies env and --set overrides."""
    env = os.environ if env is None else env
    chain = load_chain(find_scenario(ref))
    data = copy.deepcopy(DEFAULTS)
    for _, _, part in chain:
        data = deep_merge(data, part)
    # The name is the leaf's own (or its file name), never inherited from a base.
    data["name"] = chain[-1][2].get("name") or \
        os.path.splitext(os.path.basename(chain[-1][0]))[0]
    data = substitute_env(data, env)
    overrides = []
    for entry in env.get("MAGNETAR_PERF_SET", "").split():
        path, value = parse_assignment(entry)
        set_path(data, path, value)
        overrides.append("MAGNETAR_PERF_SET %s" % entry)
    for entry in sets:
        path, value = parse_assignment(entry)
        set_path(data, path, value)
        overrides.append("--set %s" % entry)
    normalize_ints(data)
    validate(data)
    return Scenario(data, [(p, t) for p, t, _ in chain], overrides)
