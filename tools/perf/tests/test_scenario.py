"""Scenario resolution: extends chains, env references, MAGNETAR_PERF_SET and --set."""
import os
import textwrap

import pytest

from magnetar_perf import scenario as scen


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return str(p)


def test_extends_merges_maps_and_replaces_lists(tmp_path):
    write(tmp_path, "base.yaml", """
        name: base
        description: the base
        broker: {settings: {numIOThreads: 8, managedLedgerCacheSizeMB: 100}}
        workload: {gateways: 500, joinSeconds: [0, 20], applications: 2, payloadBytes: 128}
    """)
    leaf = write(tmp_path, "leaf.yaml", """
        extends: base.yaml
        broker: {settings: {numIOThreads: 32}}
        workload: {gateways: 50, joinSeconds: [0]}
    """)
    sc = scen.resolve(leaf, env={})
    d = sc.data
    assert d["name"] == "leaf"  # never inherited
    assert d["description"] == "the base"
    assert d["broker"]["settings"] == {"numIOThreads": 32, "managedLedgerCacheSizeMB": 100}
    assert d["workload"]["gateways"] == 50
    assert d["workload"]["joinSeconds"] == [0]
    assert d["workload"]["payloadBytes"] == 128
    assert d["workload"]["devices"] == scen.DEFAULTS["workload"]["devices"]  # default kept
    assert [os.path.basename(p) for p, _ in sc.sources] == ["base.yaml", "leaf.yaml"]
    assert "# ---- " in sc.written_text() and "extends: base.yaml" in sc.written_text()


def test_three_level_chain_by_name(tmp_path):
    write(tmp_path, "a.yaml", "workload: {gateways: 1, pods: 1, topics: 1}\n")
    write(tmp_path, "b.yaml", "extends: a\nworkload: {pods: 2}\n")
    c = write(tmp_path, "c.yaml", "extends: b.yaml\nworkload: {topics: 3}\n")
    w = scen.resolve(c, env={}).data["workload"]
    assert (w["gateways"], w["pods"], w["topics"]) == (1, 2, 3)


def test_extends_cycle_is_an_error(tmp_path):
    write(tmp_path, "x.yaml", "extends: y.yaml\n")
    y = write(tmp_path, "y.yaml", "extends: x.yaml\n")
    with pytest.raises(scen.ScenarioError, match="cycle"):
        scen.resolve(y, env={})


def test_overrides_order_env_reference_then_env_set_then_cli(tmp_path):
    f = write(tmp_path, "s.yaml", """
        workload: {measuredMessages: "${MSGS:-1000}", gateways: 10, pods: 3}
    """)
    assert scen.resolve(f, env={}).data["workload"]["measuredMessages"] == 1000
    assert scen.resolve(f, env={"MSGS": "5000"}).data["workload"]["measuredMessages"] == 5000
    env = {"MAGNETAR_PERF_SET": "workload.gateways=20 numIOThreads=4 workload.pods=5"}
    sc = scen.resolve(f, ["workload.gateways=30", "broker.fsync=false",
                          "workload.joinSeconds=[0, 2.5]", "workload.applications=2"], env=env)
    d = sc.data
    assert d["workload"]["gateways"] == 30        # --set wins over MAGNETAR_PERF_SET
    assert d["workload"]["pods"] == 5             # MAGNETAR_PERF_SET wins over the file
    assert d["broker"]["settings"]["numIOThreads"] == 4  # bare name = broker setting
    assert d["broker"]["fsync"] is False
    assert d["workload"]["joinSeconds"] == [0, 2.5]
    assert len(sc.overrides) == 7


def test_env_reference_without_default_must_be_set(tmp_path):
    f = write(tmp_path, "s.yaml", "workload: {gateways: '${GW}'}\n")
    with pytest.raises(scen.ScenarioError, match="GW"):
        scen.resolve(f, env={})
    assert scen.resolve(f, env={"GW": "7"}).data["workload"]["gateways"] == 7


@pytest.mark.parametrize("text,overrides,match", [
    ("workload: {gateway: 10}", [], "unknown key workload.gateway"),
    ("workload: {gateways: ten}", [], "number"),
    ("workload: {applications: 1, joinSeconds: [0, 1]}", [], "joinSeconds"),
    ("broker: {kind: kafka}", [], "kind"),
    ("workload: {gateways: 5}", ["workload.gateways"], "path=value"),
])
def test_unknown_keys_and_bad_types_are_errors(tmp_path, text, overrides, match):
    f = write(tmp_path, "s.yaml", text + "\n")
    with pytest.raises(scen.ScenarioError, match=match):
        scen.resolve(f, overrides, env={})


def test_whole_floats_become_ints(tmp_path):
    f = write(tmp_path, "s.yaml", "workload: {measuredMessages: 4.0e+6}\n")
    v = scen.resolve(f, env={}).data["workload"]["measuredMessages"]
    assert v == 4000000 and isinstance(v, int)


@pytest.mark.parametrize("name", [
    "iot-telemetry-max-rate", "iot-telemetry-high-rate", "iot-telemetry-catch-up",
    "iot-telemetry-max-rate-8k"])
def test_project_scenarios_resolve_with_spec_values(name):
    full = scen.resolve(name, env={}).data
    small = scen.resolve(name + "-small", env={}).data
    assert full["name"] == name and small["name"] == name + "-small"
    for d in (full, small):
        assert d["workload"]["measuredMessages"] > 0
        assert len(d["workload"]["joinSeconds"]) <= d["workload"]["applications"]
    # small versions are smaller
    assert small["workload"]["measuredMessages"] < full["workload"]["measuredMessages"]
    assert small["workload"]["gateways"] < full["workload"]["gateways"]


def test_project_scenarios_match_the_design():
    m = scen.resolve("iot-telemetry-max-rate", env={}).data["workload"]
    assert (m["gateways"], m["topics"], m["payloadBytes"], m["batching"], m["maxOutstanding"],
            m["applications"], m["pods"], m["measuredMessages"], m["warmupRounds"],
            m["warmupMessages"], m["rate"]) == (500, 1, 128, False, 100000, 1, 20, 4000000, 2,
                                               500000, 0)
    h = scen.resolve("iot-telemetry-high-rate", env={}).data["workload"]
    assert (h["gateways"], h["rate"], h["topics"], h["payloadBytes"], h["applications"],
            h["pods"]) == (500, 30000, 30, 64, 5, 10)
    c = scen.resolve("iot-telemetry-catch-up", env={}).data["workload"]
    assert c["joinSeconds"] == [0, 20, 22, 24, 60] and c["measuredMessages"] == 3600000
    assert c["rate"] == 30000
    assert scen.resolve("iot-telemetry-max-rate-8k", env={}).data["workload"]["payloadBytes"] \
        == 8192


def test_worker_config_has_only_worker_sections():
    sc = scen.resolve("iot-telemetry-max-rate-small", env={})
    wc = sc.worker_config("pulsar://h:1")
    assert set(wc) == {"serviceUrl", "workload", "loadgen"}
    assert "cpuset" not in wc["loadgen"]


def test_tls_is_off_by_default_and_passes_the_ca_to_the_worker():
    sc = scen.resolve("iot-telemetry-max-rate-small", env={})
    assert sc.data["broker"]["tls"] is False
    sc = scen.resolve("iot-telemetry-max-rate-small", sets=["broker.tls=true"], env={})
    assert sc.data["broker"]["tls"] is True
    wc = sc.worker_config("pulsar+ssl://127.0.0.1:6651", "/tmp/ca.pem")
    assert wc["serviceUrl"] == "pulsar+ssl://127.0.0.1:6651"
    assert wc["tlsTrustCertsFilePath"] == "/tmp/ca.pem"


def test_websocket_gateways_keep_the_high_rate_fleet_and_pass_the_web_url():
    full = scen.resolve("iot-telemetry-high-rate-websocket", env={})
    base = scen.resolve("iot-telemetry-high-rate", env={}).data["workload"]
    w = full.data["workload"]
    assert w["gatewayProtocol"] == "websocket" and base["gatewayProtocol"] == "binary"
    for k in ("gateways", "topics", "rate", "payloadBytes", "applications", "pods",
              "measuredMessages"):
        assert w[k] == base[k], k
    assert full.data["broker"]["settings"]["webSocketServiceEnabled"] is True
    small = scen.resolve("iot-telemetry-high-rate-websocket-small", env={})
    assert small.data["workload"]["gatewayProtocol"] == "websocket"
    wc = small.worker_config("pulsar://127.0.0.1:1", None, "http://127.0.0.1:2")
    assert wc["webServiceUrl"] == "http://127.0.0.1:2"


@pytest.mark.parametrize("sets, match", [
    (["workload.gatewayProtocol=carrier-pigeon"], "must be binary, websocket or mqtt"),
    (["broker.settings.webSocketServiceEnabled=false"], "needs broker.settings"),
    (["workload.batching=true"], "neither batching"),
])
def test_websocket_gateways_refuse_what_they_cannot_run(sets, match):
    with pytest.raises(scen.ScenarioError, match=match):
        scen.resolve("iot-telemetry-high-rate-websocket-small", sets=sets, env={})


def test_mqtt_gateways_keep_the_high_rate_fleet_and_pass_the_mqtt_url():
    full = scen.resolve("iot-telemetry-high-rate-mqtt", env={})
    base = scen.resolve("iot-telemetry-high-rate", env={}).data["workload"]
    w = full.data["workload"]
    assert w["gatewayProtocol"] == "mqtt"
    for k in ("gateways", "topics", "rate", "payloadBytes", "applications", "pods",
              "measuredMessages", "maxOutstanding"):
        assert w[k] == base[k], k
    assert full.data["broker"]["settings"]["mqttListeners"] == "mqtt://127.0.0.1:0"
    small = scen.resolve("iot-telemetry-high-rate-mqtt-small", env={})
    assert small.data["workload"]["gatewayProtocol"] == "mqtt"
    wc = small.worker_config("pulsar://127.0.0.1:1", None, "http://127.0.0.1:2",
                             "mqtt://127.0.0.1:3")
    assert wc["mqttUrl"] == "mqtt://127.0.0.1:3"
    # The same scenario with binary gateways (compare --vary workload.gatewayProtocol=...).
    binary = scen.resolve("iot-telemetry-high-rate-mqtt-small",
                          sets=["workload.gatewayProtocol=binary"], env={})
    assert binary.data["workload"]["gatewayProtocol"] == "binary"


@pytest.mark.parametrize("sets, match", [
    (["broker.settings.mqttListeners=mqtt+ssl://127.0.0.1:0"], "needs broker.settings"),
    (["workload.batching=true"], "neither batching"),
    (["broker.tls=true"], "neither batching"),
])
def test_mqtt_gateways_refuse_what_they_cannot_run(sets, match):
    with pytest.raises(scen.ScenarioError, match=match):
        scen.resolve("iot-telemetry-high-rate-mqtt-small", sets=sets, env={})
