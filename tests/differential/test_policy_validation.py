"""How Pulsar's admin REST validates policy bodies, at namespace and topic level: what it
refuses (retention limits below -1 or a single 0: 400 with its reasons; Java-int fields beyond
int32: Jackson's 400 "Numeric value (N) out of range of int"; a body that is not
application/json: 415) and what it stores as given (negative backlog-quota limits, any
maxInactiveDurationSeconds)."""

import uuid

import pytest
import requests

TOO_BIG = 4294967306  # 2^32 + 10: truncated to 10 by a careless int32 conversion
INT_CASES = [
    ("retention", "", {"retentionTimeInMinutes": TOO_BIG, "retentionSizeInMB": 1}, TOO_BIG),
    ("retention", "", {"retentionTimeInMinutes": 2147483648, "retentionSizeInMB": 1},
     2147483648),
    ("retention", "", {"retentionTimeInMinutes": 3e9, "retentionSizeInMB": 1}, "3000000000.0"),
    ("backlogQuota", "?backlogQuotaType=message_age",
     {"limitTime": TOO_BIG, "policy": "producer_exception"}, TOO_BIG),
    ("inactiveTopicPolicies", "",
     {"inactiveTopicDeleteMode": "delete_when_no_subscriptions",
      "maxInactiveDurationSeconds": TOO_BIG, "deleteWhileInactive": False}, TOO_BIG),
]
RETENTION_CASES = [
    ({"retentionTimeInMinutes": -2, "retentionSizeInMB": 5},
     "Invalid retention policy: time limit must be >= -1"),
    ({"retentionTimeInMinutes": 5, "retentionSizeInMB": -2},
     "Invalid retention policy: size limit must be >= -1"),
    ({"retentionTimeInMinutes": -5, "retentionSizeInMB": -5},
     "Invalid retention policy: size limit must be >= -1"),
    ({"retentionTimeInMinutes": 5, "retentionSizeInMB": 0},
     "Invalid retention policy: Setting a single time or size limit to 0 is invalid when one of "
     "the limits has a non-zero value. Use the value of -1 instead of 0 to ignore a specific "
     "limit. To disable retention both limits must be set to 0."),
]


@pytest.fixture
def bases(admin_url):
    """A fresh namespace and a topic in it: their policy base URLs."""
    ns = f"public/pv-{uuid.uuid4().hex[:8]}"
    assert requests.put(f"{admin_url}/admin/v2/namespaces/{ns}", timeout=30).status_code == 204
    tbase = f"{admin_url}/admin/v2/persistent/{ns}/t"
    r = requests.put(tbase, timeout=30)  # no body, no Content-Type: accepted
    assert r.status_code == 204, r.text
    yield f"{admin_url}/admin/v2/namespaces/{ns}", tbase
    requests.delete(tbase, params={"force": "true"}, timeout=30)
    requests.delete(f"{admin_url}/admin/v2/namespaces/{ns}", timeout=30)


def stored(base, path):
    r = requests.get(f"{base}/{path}", timeout=30)
    return r.status_code, r.text


@pytest.mark.admin
def test_out_of_int_range_values_are_refused(bases):
    for base in bases:
        before = {p: stored(base, p) for p in ("retention", "backlogQuotaMap",
                                               "inactiveTopicPolicies")}
        for path, query, body, value in INT_CASES:
            r = requests.post(f"{base}/{path}{query}", json=body, timeout=30)
            assert r.status_code == 400, (base, path, r.status_code, r.text)
            assert r.text.startswith(
                f"Numeric value ({value}) out of range of int (-2147483648 - 2147483647)"), r.text
        for p, was in before.items():
            assert stored(base, p) == was, (base, p)


@pytest.mark.admin
def test_retention_limits_below_minus_one_or_a_single_zero_are_refused(bases):
    for base in bases:
        before = stored(base, "retention")
        for body, reason in RETENTION_CASES:
            r = requests.post(f"{base}/retention", json=body, timeout=30)
            assert r.status_code == 400, (base, body, r.status_code, r.text)
            assert r.json() == {"reason": reason}
        assert stored(base, "retention") == before
        r = requests.post(f"{base}/retention",
                          json={"retentionTimeInMinutes": -1, "retentionSizeInMB": 5}, timeout=30)
        assert r.status_code == 204, r.text
        assert requests.get(f"{base}/retention", timeout=30).json() == {
            "retentionTimeInMinutes": -1, "retentionSizeInMB": 5}


@pytest.mark.admin
def test_negative_quota_limits_and_inactive_durations_are_stored_as_given(bases):
    for base in bases:
        r = requests.post(f"{base}/backlogQuota", timeout=30,
                          json={"limitSize": -5, "limitTime": -1,
                                "policy": "producer_request_hold"})
        assert r.status_code == 204, r.text
        r = requests.post(f"{base}/backlogQuota", params={"backlogQuotaType": "message_age"},
                          json={"limitSize": -1, "limitTime": -7, "policy": "producer_exception"},
                          timeout=30)
        assert r.status_code == 204, r.text
        quotas = requests.get(f"{base}/backlogQuotaMap", timeout=30).json()
        assert quotas["destination_storage"]["limitSize"] == -5
        assert quotas["message_age"]["limitTime"] == -7
        assert quotas["message_age"]["policy"] == "producer_exception"
        for duration in (-5, 0):
            policy = {"inactiveTopicDeleteMode": "delete_when_subscriptions_caught_up",
                      "maxInactiveDurationSeconds": duration, "deleteWhileInactive": False}
            r = requests.post(f"{base}/inactiveTopicPolicies", json=policy, timeout=30)
            assert r.status_code == 204, r.text
            assert requests.get(f"{base}/inactiveTopicPolicies", timeout=30).json() == policy
        for quota_type in ("destination_storage", "message_age"):
            r = requests.delete(f"{base}/backlogQuota", params={"backlogQuotaType": quota_type},
                                timeout=30)
            assert r.status_code == 204, r.text


@pytest.mark.admin
def test_bodies_must_be_application_json(bases, admin_url):
    good = b'{"retentionTimeInMinutes": 7, "retentionSizeInMB": 3}'
    for base in bases:
        before = stored(base, "retention")
        for headers in ({"Content-Type": "text/plain"}, {"Content-Type": "*/*"},
                        {"Content-Type": "application/x-www-form-urlencoded"}, {}):
            r = requests.post(f"{base}/retention", data=good, headers=headers, timeout=30)
            assert r.status_code == 415, (base, headers, r.status_code, r.text)
        r = requests.post(f"{base}/backlogQuota", data=b'{"limitSize": 5}', timeout=30,
                          headers={"Content-Type": "text/plain"})
        assert r.status_code == 415, r.text
        assert stored(base, "retention") == before
        r = requests.post(f"{base}/retention", data=good, timeout=30,
                          headers={"Content-Type": "Application/JSON; charset=utf-8"})
        assert r.status_code == 204, r.text
        assert requests.get(f"{base}/retention", timeout=30).json() == {
            "retentionTimeInMinutes": 7, "retentionSizeInMB": 3}
    # Namespace resources consume application/json only; topic resources whatever Jackson reads.
    nbase, tbase = bases
    for ctype in ("text/json", "application/vnd.example+json"):
        r = requests.post(f"{nbase}/retention", data=good, headers={"Content-Type": ctype},
                          timeout=30)
        assert r.status_code == 415, (ctype, r.status_code, r.text)
        r = requests.post(f"{tbase}/retention", data=good, headers={"Content-Type": ctype},
                          timeout=30)
        assert r.status_code == 204, (ctype, r.status_code, r.text)
    # A route without a body takes any Content-Type.
    r = requests.post(f"{bases[1]}/messageTTL", params={"messageTTL": 30}, timeout=30,
                      headers={"Content-Type": "text/plain"})
    assert r.status_code == 204, r.text
    tenant = f"pv-{uuid.uuid4().hex[:8]}"
    r = requests.put(f"{admin_url}/admin/v2/tenants/{tenant}", timeout=30,
                     data=b'{"allowedClusters": []}', headers={"Content-Type": "text/plain"})
    assert r.status_code == 415, r.text
    assert requests.get(f"{admin_url}/admin/v2/tenants/{tenant}", timeout=30).status_code == 404


BAD_RETENTION = {"retentionTimeInMinutes": -5, "retentionSizeInMB": 10}
CREATE_REFUSED = [
    # Pulsar's validatePolicies, in its order: message TTL (412), bundles, then retention (400).
    ({"retention_policies": BAD_RETENTION}, 400,
     "Invalid retention policy: time limit must be >= -1"),
    ({"retention_policies": {"retentionTimeInMinutes": 0, "retentionSizeInMB": 10}}, 400,
     RETENTION_CASES[3][1]),
    ({"message_ttl_in_seconds": -5, "retention_policies": BAD_RETENTION}, 412,
     "Invalid value for message TTL"),
    ({"message_ttl_in_seconds": "-1"}, 412, "Invalid value for message TTL"),
    ({"bundles": {"numBundles": 2, "boundaries": ["0x00000000", "0x7fffffff"]},
      "retention_policies": BAD_RETENTION}, 400,
     "Input bundles do not cover the whole hash range. first:0x00000000, last:0x7fffffff"),
    ({"bundles": {"numBundles": 1, "boundaries": ["0x00000000", "-0x1", "0xffffffff"]}}, 400,
     "Input bundles do not cover the whole hash range. first:0x00000000, "
     "last:0xffffffffffffffff"),
    ({"bundles": {"numBundles": 1, "boundaries": ["0x00000000"]}}, 400,
     "Input bundles do not cover the whole hash range. first:0x00000000, last:0x00000000"),
    # Long.decode refuses the boundary: Pulsar's 500 (its text is a stack trace).
    ({"bundles": {"numBundles": 2, "boundaries": ["0x00000000", "zz", "0xffffffff"]}}, 500,
     None),
]
DEFAULT_BUNDLES = {"boundaries": ["0x00000000", "0x40000000", "0x80000000", "0xc0000000",
                                  "0xffffffff"], "numBundles": 4}
CREATE_BUNDLES = [
    # numBundles below 1 (boundaries or not): the default bundles.
    ({"numBundles": 0}, DEFAULT_BUNDLES),
    ({"numBundles": -3}, DEFAULT_BUNDLES),
    ({"boundaries": ["0x00000000", "0x10000000", "0xffffffff"]}, DEFAULT_BUNDLES),
    # Given boundaries: read by Long.decode, printed 0x%08x, sorted as text, duplicates dropped;
    # numBundles is their count.
    ({"numBundles": 9, "boundaries": ["0x00000000", "0x80000000", "0x70000000", "0x70000000",
                                      "0xffffffff"]},
     {"boundaries": ["0x00000000", "0x70000000", "0x80000000", "0xffffffff"], "numBundles": 3}),
    ({"numBundles": 2, "boundaries": ["0", "#80", "2147483648", "0XFFFFFFFF"]},
     {"boundaries": ["0x00000000", "0x00000080", "0x80000000", "0xffffffff"], "numBundles": 3}),
    ({"numBundles": 2}, {"boundaries": ["0x00000000", "0x80000000", "0xffffffff"],
                         "numBundles": 2}),
]


@pytest.mark.admin
@pytest.mark.parametrize("body,status,reason", CREATE_REFUSED)
def test_namespace_created_with_invalid_policies_is_refused(admin_url, body, status, reason):
    # Nothing is stored on a refusal: the namespace does not exist after it.
    ns = f"public/pv-{uuid.uuid4().hex[:8]}"
    r = requests.put(f"{admin_url}/admin/v2/namespaces/{ns}", json=body, timeout=30)
    assert r.status_code == status, r.text
    if reason is not None:
        assert r.json()["reason"] == reason
    assert requests.get(f"{admin_url}/admin/v2/namespaces/{ns}", timeout=30).status_code == 404
    assert ns not in requests.get(f"{admin_url}/admin/v2/namespaces/public", timeout=30).json()


@pytest.mark.admin
@pytest.mark.parametrize("bundles,shown", CREATE_BUNDLES)
def test_namespace_created_with_bundles_shows_pulsars_bundles(admin_url, bundles, shown):
    ns = f"public/pv-{uuid.uuid4().hex[:8]}"
    r = requests.put(f"{admin_url}/admin/v2/namespaces/{ns}", json={"bundles": bundles},
                     timeout=30)
    assert r.status_code == 204, r.text
    try:
        got = requests.get(f"{admin_url}/admin/v2/namespaces/{ns}", timeout=30).json()["bundles"]
        assert got == shown
    finally:
        requests.delete(f"{admin_url}/admin/v2/namespaces/{ns}", timeout=30)
