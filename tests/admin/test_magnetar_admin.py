"""magnetar-admin (tools/admin) against a real broker: pulsar-admin's command shapes, JSON output,
exit status 1 with the broker's reason on errors, 2 on bad usage (the `cli` fixture:
conftest.py)."""

import uuid

import pulsar


def test_tenants_and_namespaces(cli):
    t = f"cli-{uuid.uuid4().hex[:8]}"
    assert cli("tenants", "create", t, "-r", "ops,dev", "-c", "standalone").stdout == ""
    assert cli.json("tenants", "get", t) == {"adminRoles": ["ops", "dev"],
                                             "allowedClusters": ["standalone"]}
    assert t in cli.json("tenants", "list")
    err = cli("tenants", "create", t, expect=1)
    assert "Tenant already exists" in err.stderr and "409" in err.stderr

    ns = f"{t}/ns"
    cli("namespaces", "create", ns)
    assert cli.json("namespaces", "list", t) == [ns]
    cli("namespaces", "set-retention", ns, "-t", "1h", "-s", "1G")
    assert cli.json("namespaces", "get-retention", ns) == {"retentionTimeInMinutes": 60,
                                                           "retentionSizeInMB": 1024}
    cli("namespaces", "set-deduplication", ns, "--enable")
    assert cli.json("namespaces", "get-deduplication", ns) is True
    cli("namespaces", "set-message-ttl", ns, "-t", "30")
    cli("namespaces", "set-backlog-quota", ns, "-l", "10M", "-p", "producer_exception")
    cli("namespaces", "grant-permission", ns, "--role", "app", "--actions", "produce,consume")
    policies = cli.json("namespaces", "policies", ns)
    assert policies["message_ttl_in_seconds"] == 30
    assert policies["deduplicationEnabled"] is True
    assert policies["backlog_quota_map"]["destination_storage"]["limitSize"] == 10 << 20
    assert policies["auth_policies"]["namespace_auth"] == {"app": ["produce", "consume"]}
    cli("namespaces", "revoke-permission", ns, "--role", "app")
    assert cli.json("namespaces", "permissions", ns) == {}
    cli("namespaces", "remove-retention", ns)
    assert cli("namespaces", "get-retention", ns).stdout == ""

    err = cli("tenants", "delete", t, expect=1)
    assert "namespaces" in err.stderr
    cli("namespaces", "delete", ns)
    cli("tenants", "delete", t)
    assert "does not exist" in cli("tenants", "get", t, expect=1).stderr


def test_topics(cli, broker):
    name = f"cli-{uuid.uuid4().hex[:8]}"
    topic = f"persistent://public/default/{name}"
    cli("topics", "create-partitioned-topic", f"{topic}-p", "-p", "4")
    assert cli.json("topics", "get-partitioned-topic-metadata", f"{topic}-p")["partitions"] == 4
    cli("topics", "update-partitioned-topic", f"{topic}-p", "-p", "5")
    assert f"{topic}-p" in cli.json("topics", "list-partitioned-topics", "public/default")
    assert f"{topic}-p-partition-4" in cli.json("topics", "list", "public/default")
    cli("topics", "create", topic)
    cli("topics", "create-subscription", topic, "-s", "sub", "-m", "earliest")

    c = pulsar.Client(broker.service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    try:
        p = c.create_producer(topic)
        ids = [p.send(f"m{i}".encode(), properties={"n": str(i)}) for i in range(5)]
    finally:
        c.close()

    st = cli.json("topics", "stats", topic)
    assert st["msgInCounter"] == 5 and st["subscriptions"]["sub"]["msgBacklog"] == 5
    assert cli.json("topics", "subscriptions", topic) == ["sub"]
    cli("topics", "skip", topic, "-s", "sub", "-n", "2")
    assert cli.json("topics", "stats", topic)["subscriptions"]["sub"]["msgBacklog"] == 3
    cli("topics", "clear-backlog", topic, "-s", "sub")
    assert cli.json("topics", "stats", topic)["subscriptions"]["sub"]["msgBacklog"] == 0
    cli("topics", "reset-cursor", topic, "-s", "sub", "-m",
        f"{ids[3].ledger_id()}:{ids[3].entry_id()}")
    assert cli.json("topics", "stats", topic)["subscriptions"]["sub"]["msgBacklog"] == 2
    cli("topics", "reset-cursor", topic, "-s", "sub", "-t", "1h")
    assert cli.json("topics", "stats", topic)["subscriptions"]["sub"]["msgBacklog"] == 5
    ist = cli.json("topics", "stats-internal", topic)
    assert ist["entriesAddedCounter"] == 5 and "sub" in ist["cursors"]
    last = cli.json("topics", "last-message-id", topic)
    assert (last["ledgerId"], last["entryId"]) == (ids[4].ledger_id(), ids[4].entry_id())

    out = cli("topics", "examine-message", topic, "-i", "earliest", "-m", "2").stdout
    assert f"X-Pulsar-Message-ID: {ids[1].ledger_id()}:{ids[1].entry_id()}" in out
    assert "X-Pulsar-PROPERTY-n: 1" in out and out.rstrip().endswith("m1")
    out = cli("topics", "get-message-by-id", topic, "-l", str(ids[2].ledger_id()), "-e",
              str(ids[2].entry_id())).stdout
    assert out.rstrip().endswith("m2")

    cli("topics", "unload", topic)
    term = cli.json("topics", "terminate", topic)
    assert (term["ledgerId"], term["entryId"]) == (ids[4].ledger_id(), ids[4].entry_id())
    lookup = cli.json("topics", "lookup", topic)
    assert lookup["brokerUrl"] == broker.service_url
    cli("topics", "unsubscribe", topic, "-s", "sub")
    assert cli.json("topics", "subscriptions", topic) == []
    cli("topics", "delete", topic)
    assert "Topic not found" in cli("topics", "stats", topic, expect=1).stderr
    cli("topics", "delete-partitioned-topic", f"{topic}-p")


def test_brokers_and_clusters(cli):
    assert cli("brokers", "healthcheck").stdout.strip() == "ok"
    assert cli.json("clusters", "list") == ["standalone"]
    cli("brokers", "update-dynamic-config", "--config", "dispatcherMaxReadBatchSize",
        "--value", "77")
    assert cli.json("brokers", "get-runtime-config")["dispatcherMaxReadBatchSize"] == "77"
    assert "dispatcherMaxReadBatchSize" in cli.json("brokers", "list-dynamic-config")
    err = cli("brokers", "update-dynamic-config", "--config", "brokerServicePort", "--value", "1",
              expect=1)
    assert "412" in err.stderr
    cli("brokers", "update-dynamic-config", "--config", "dispatcherMaxReadBatchSize",
        "--value", "100")


def test_usage_errors_and_unreachable_broker(cli):
    cli("topics", "stats", expect=2)  # missing topic
    cli("topics", "reset-cursor", "t", "-s", "sub", "-t", "5x", expect=2)
    cli("topics", "reset-cursor", "t", "-s", "sub", expect=2)  # neither --time nor --messageId
    cli("namespaces", "create", "no-slash", expect=2)
    cli("topics", "stats", "a/b", expect=2)
    # A refused connection is told in one line: the URL and the system's message, no Boost
    # source path or function signature.
    err = cli("clusters", "list", expect=1, url="http://127.0.0.1:1")
    assert err.stderr == ("magnetar-admin: cannot connect to http://127.0.0.1:1: "
                          "Connection refused\n")
    err = cli("clusters", "list", expect=1, url="http://no-such-host.invalid:8080")
    assert err.stderr.startswith("magnetar-admin: cannot resolve no-such-host.invalid: "), \
        err.stderr
    assert "boost" not in err.stderr and "[" not in err.stderr, err.stderr
