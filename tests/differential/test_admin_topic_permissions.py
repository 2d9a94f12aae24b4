"""Topic-level permissions (`/admin/v2/{domain}/{tenant}/{ns}/{topic}/permissions[/{role}]`) as
Pulsar 4.2's PersistentTopicsBase answers them: only on a topic that exists (404 otherwise), a
partition's grants kept apart from its partitioned topic's, a revoke of a role without a grant
answered 204.
"""

import uuid

import pytest

pytestmark = pytest.mark.admin

DOMAINS = ["persistent", "non-persistent"]


@pytest.fixture
def http(admin_http):
    return admin_http


def perms(domain: str, topic_path: str, role: str = "") -> str:
    return f"/admin/v2/{domain}/{topic_path}/permissions" + (f"/{role}" if role else "")


def destination_auth(http, namespace: str) -> dict:
    return http("GET", f"/admin/v2/namespaces/{namespace}").json()["auth_policies"][
        "destination_auth"]


def assert_not_found(r, reason: str) -> None:
    assert r.status_code == 404, r.text
    assert r.json() == {"reason": reason}


@pytest.mark.parametrize("domain", DOMAINS)
def test_grant_get_revoke_on_a_missing_topic_is_404(http, namespace, domain):
    cases = {
        f"{namespace}/missing": f"Topic {domain}://{namespace}/missing not found",
        f"{namespace}/missing-partition-0": f"Topic {domain}://{namespace}/missing-partition-0 "
                                           "not found",
        # A missing namespace of a tenant that exists: the topic is not found either.
        f"{namespace}-absent/t": f"Topic {domain}://{namespace}-absent/t not found",
        f"absent-{uuid.uuid4().hex[:8]}/ns/t": "Tenant does not exist",
    }
    for path, reason in cases.items():
        assert_not_found(http("POST", perms(domain, path, "app-1"), json=["produce"]), reason)
        assert_not_found(http("GET", perms(domain, path)), reason)
        assert_not_found(http("DELETE", perms(domain, path, "app-1")), reason)
    assert destination_auth(http, namespace) == {}


@pytest.mark.parametrize("domain", DOMAINS)
def test_grant_get_revoke_on_an_existing_topic(http, namespace, domain):
    path = f"{namespace}/plain"
    assert http("PUT", f"/admin/v2/{domain}/{path}").status_code == 204
    assert http("GET", perms(domain, path)).json() == {}
    # Revoking a role that has no grant on the topic is not an error.
    assert http("DELETE", perms(domain, path, "app-1")).status_code == 204
    assert http("POST", perms(domain, path, "app-1"), json=["produce"]).status_code == 204
    assert http("POST", f"/admin/v2/namespaces/{namespace}/permissions/app-1",
                json=["consume"]).status_code == 204
    # GET merges the namespace's grants with the topic's.
    got = http("GET", perms(domain, path)).json()
    assert sorted(got["app-1"]) == ["consume", "produce"]
    assert destination_auth(http, namespace) == {f"{domain}://{path}": {"app-1": ["produce"]}}
    assert http("DELETE", perms(domain, path, "app-1")).status_code == 204
    assert http("DELETE", perms(domain, path, "app-1")).status_code == 204
    assert destination_auth(http, namespace) == {}
    assert http("GET", perms(domain, path)).json() == {"app-1": ["consume"]}


def test_grant_on_a_topic_a_producer_created(http, namespace, client):
    client.create_producer(f"persistent://{namespace}/produced").close()
    path = f"{namespace}/produced"
    assert http("POST", perms("persistent", path, "app-1"), json=["consume"]).status_code == 204
    assert http("GET", perms("persistent", path)).json() == {"app-1": ["consume"]}


@pytest.mark.parametrize("domain", DOMAINS)
def test_partitioned_topic_and_its_partitions_keep_their_own_grants(http, namespace, domain):
    parent = f"{namespace}/part"
    assert http("PUT", f"/admin/v2/{domain}/{parent}/partitions", json=2).status_code == 204
    assert http("POST", perms(domain, parent, "app-1"), json=["consume"]).status_code == 204
    assert http("GET", perms(domain, parent)).json() == {"app-1": ["consume"]}
    # The parent's grant is not listed on a partition (the broker still honours it there).
    assert http("GET", perms(domain, f"{parent}-partition-0")).json() == {}
    assert http("POST", perms(domain, f"{parent}-partition-1", "app-2"),
                json=["produce"]).status_code == 204
    assert http("GET", perms(domain, f"{parent}-partition-1")).json() == {"app-2": ["produce"]}
    assert http("GET", perms(domain, parent)).json() == {"app-1": ["consume"]}
    assert destination_auth(http, namespace) == {
        f"{domain}://{parent}": {"app-1": ["consume"]},
        f"{domain}://{parent}-partition-1": {"app-2": ["produce"]},
    }
    reason = f"Topic {domain}://{parent}-partition-2 not found"
    assert_not_found(http("POST", perms(domain, f"{parent}-partition-2", "app-2"),
                          json=["produce"]), reason)
    # A partition has no grant of the parent's to revoke: 204, the parent's kept.
    assert http("DELETE", perms(domain, f"{parent}-partition-0", "app-1")).status_code == 204
    assert http("GET", perms(domain, parent)).json() == {"app-1": ["consume"]}
    assert http("DELETE", perms(domain, parent, "app-1")).status_code == 204
    assert http("DELETE", perms(domain, f"{parent}-partition-1", "app-2")).status_code == 204
    assert destination_auth(http, namespace) == {}


def test_a_deleted_topics_grants_go_with_it(http, namespace):
    # Pulsar's topic delete drops its destination_auth entries (PersistentTopic.delete's
    # deleteTopicAuthenticationWithRetry, per partition for a partitioned topic): a topic created
    # again under the name starts without the old grants.
    plain, parent = f"{namespace}/gone", f"{namespace}/gone-part"
    assert http("PUT", f"/admin/v2/persistent/{plain}").status_code == 204
    assert http("PUT", f"/admin/v2/persistent/{parent}/partitions", json=2).status_code == 204
    for path in (plain, parent, f"{parent}-partition-1"):
        assert http("POST", perms("persistent", path, "app-1"),
                    json=["produce"]).status_code == 204
    assert len(destination_auth(http, namespace)) == 3
    assert http("DELETE", f"/admin/v2/persistent/{plain}").status_code == 204
    assert http("DELETE", f"/admin/v2/persistent/{parent}/partitions").status_code == 204
    assert destination_auth(http, namespace) == {}
    assert http("PUT", f"/admin/v2/persistent/{plain}").status_code == 204
    assert http("PUT", f"/admin/v2/persistent/{parent}/partitions", json=2).status_code == 204
    for path in (plain, parent, f"{parent}-partition-1"):
        assert http("GET", perms("persistent", path)).json() == {}
