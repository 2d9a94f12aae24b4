"""Policy fields that are Java ints in Pulsar refuse values beyond int32 with 400 and store
nothing, at namespace and topic level (Jackson's "Numeric value (N) out of range of int"; the
answers themselves are pinned against Pulsar in tests/differential/test_policy_validation.py);
a topic with policies set before keeps working after a restart."""

import uuid

import pulsar
import requests

from harness.broker import MagnetarProcess

TOO_BIG = 4294967306  # 2^32 + 10: truncated to 10 by a careless int32 conversion


def test_out_of_range_ints_are_refused_and_nothing_is_stored():
    broker = MagnetarProcess(prefix="magnetar-policy-ranges-")
    try:
        ep = broker.start()
        url = ep.admin_url
        topic = f"ranges-{uuid.uuid4().hex[:8]}"
        client = pulsar.Client(ep.service_url)
        client.create_producer(f"persistent://public/default/{topic}").send(b"x")
        tbase = f"{url}/admin/v2/persistent/public/default/{topic}"
        nbase = f"{url}/admin/v2/namespaces/public/default"
        cases = [
            ("retention", "", {"retentionTimeInMinutes": TOO_BIG, "retentionSizeInMB": 1}),
            ("retention", "", {"retentionTimeInMinutes": 2147483648, "retentionSizeInMB": 1}),
            ("backlogQuota", "?backlogQuotaType=message_age",
             {"limitTime": TOO_BIG, "policy": "producer_exception"}),
            ("inactiveTopicPolicies", "",
             {"inactiveTopicDeleteMode": "delete_when_no_subscriptions",
              "maxInactiveDurationSeconds": TOO_BIG, "deleteWhileInactive": True}),
        ]
        for base in (tbase, nbase):
            before = requests.get(f"{nbase}/retention").text
            for path, query, body in cases:
                r = requests.post(f"{base}/{path}{query}", json=body)
                assert r.status_code == 400, (base, path, r.status_code, r.text)
                assert "out of range of int" in r.text
            assert requests.get(f"{nbase}/retention").text == before
        assert requests.get(f"{tbase}/retention").text in ("", "null", "{}")
        inactive = requests.get(f"{nbase}/inactiveTopicPolicies")
        assert str(TOO_BIG) not in inactive.text and '"maxInactiveDurationSeconds":10' not in \
            inactive.text.replace(" ", "")
        client.close()
        # The topic still serves after a restart (its stored policies load without error).
        assert broker.stop() == 0
        ep = broker.start()
        client = pulsar.Client(ep.service_url, operation_timeout_seconds=10)
        consumer = client.subscribe(f"persistent://public/default/{topic}", "s",
                                    initial_position=pulsar.InitialPosition.Earliest)
        assert consumer.receive(timeout_millis=10000).data() == b"x"
        stats = requests.get(f"{ep.admin_url}/admin/v2/persistent/public/default/{topic}/stats",
                             timeout=10)
        assert stats.status_code == 200
        client.close()
    finally:
        broker.stop()
