"""Subscription permissions as Pulsar's (namespaces grant-subscription-permission /
revoke-subscription-permission / permission-on-subscription): the REST routes and their JSON, the
namespace policies' auth_policies.subscription_auth_roles, and SUBSCRIBE refused with
AuthorizationError "Client is not authorized to subscribe" for a role that may consume but is not
in the subscription's non-empty role list; and a permission grant with an unknown action, which
Pulsar answers 204 (storing null). Runs on a broker of the --broker kind started with token
authentication and authorization (harness/auth.py), so it passes on Magnetar and Pulsar.
"""

import os
import sys
import uuid

import pulsar
import pytest
import requests

from harness.auth import new_secret_key, role_token, token_auth_settings
from harness.broker import broker_process
from harness.util import eventually, wait_for

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from hostile_wire import (  # noqa: E402
    CONNECT,
    CONNECTED,
    ERROR,
    WireClient,
    base_command,
    error_name,
    fb,
    frame,
    fv,
    subscribe_frame,
)

NS = "public/default"


class Secured:
    def __init__(self, endpoint, key):
        self.url = endpoint.service_url
        self.web = endpoint.admin_url
        self.key = key
        self.admin = role_token(key, "admin")

    def client(self, role):
        return pulsar.Client(self.url, authentication=pulsar.AuthenticationToken(
            role_token(self.key, role)), operation_timeout_seconds=10,
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))

    def rest(self, method, path, **kwargs):
        return requests.request(method, f"{self.web}/admin/v2/{path}", timeout=30,
                                headers={"Authorization": f"Bearer {self.admin}"}, **kwargs)


@pytest.fixture(scope="module")
def secured(request):
    if request.config.getoption("--broker-url", None):
        pytest.skip("starts its own broker with authorization on")
    key = new_secret_key()
    proc = broker_process(request.config.getoption("--broker"), token_auth_settings(key))
    try:
        s = Secured(proc.start(), key)
        ready = wait_for(lambda: s.rest("GET", "namespaces/public").status_code == 200
                         and NS in s.rest("GET", "namespaces/public").json(), 120, 0.5)
        assert ready, "public/default did not appear"
        yield s
    finally:
        proc.close()


def fresh(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def subscription_roles(secured):
    r = secured.rest("GET", f"namespaces/{NS}/permissions/subscription")
    assert r.status_code == 200, r.text
    return {sub: sorted(roles) for sub, roles in r.json().items()}


def test_grant_get_and_revoke_subscription_permission(secured):
    sub, other = fresh("sub"), fresh("sub")
    path = f"namespaces/{NS}/permissions"
    r = secured.rest("POST", f"{path}/subscription/{sub}", json=["r1", "r2"])
    assert r.status_code == 204, r.text
    assert subscription_roles(secured)[sub] == ["r1", "r2"]
    # A grant replaces the list.
    assert secured.rest("POST", f"{path}/subscription/{sub}", json=["r3"]).status_code == 204
    assert subscription_roles(secured)[sub] == ["r3"]
    # An empty list is kept as given.
    assert secured.rest("POST", f"{path}/subscription/{other}", json=[]).status_code == 204
    assert subscription_roles(secured)[other] == []
    policies = secured.rest("GET", f"namespaces/{NS}").json()
    assert sorted(policies["auth_policies"]["subscription_auth_roles"][sub]) == ["r3"]
    # Bodies that are not a list of roles.
    r = secured.rest("POST", f"{path}/subscription/{sub}")
    assert r.status_code == 400 and "Roles should not be null" in r.text
    assert secured.rest("POST", f"{path}/subscription/{sub}", json="r1").status_code == 400
    # Revoking the last role removes the subscription's entry.
    assert secured.rest("DELETE", f"{path}/{sub}/r3").status_code == 204
    assert sub not in subscription_roles(secured)
    r = secured.rest("DELETE", f"{path}/{sub}/r3")
    assert r.status_code == 500 and "couldn't find subscription" in r.text
    assert secured.rest("DELETE", f"{path}/{other}/nobody").status_code == 204
    assert secured.rest("GET", f"namespaces/public/{fresh('nope')}/permissions/subscription"
                        ).status_code == 404


def test_role_outside_the_subscription_roles_is_refused(secured):
    reader, outsider = fresh("reader"), fresh("outsider")
    sub, free = fresh("guarded"), fresh("free")
    topic = f"persistent://{NS}/{fresh('subperm')}"
    for role in (reader, outsider):
        r = secured.rest("POST", f"namespaces/{NS}/permissions/{role}", json=["consume"])
        assert r.status_code == 204, r.text
    r = secured.rest("POST", f"namespaces/{NS}/permissions/subscription/{sub}", json=[reader])
    assert r.status_code == 204, r.text
    admin = pulsar.Client(secured.url, authentication=pulsar.AuthenticationToken(secured.admin))
    admin.create_producer(topic).close()

    c_out = secured.client(outsider)
    c_in = secured.client(reader)

    def outsider_refused():
        with pytest.raises(pulsar.AuthorizationError):
            c_out.subscribe(topic, sub)
    eventually(outsider_refused, 20)
    # The same role on a subscription without a list, the listed role, and the super-user pass.
    c_out.subscribe(topic, free).close()
    eventually(lambda: c_in.subscribe(topic, sub).close(), 20)
    admin.subscribe(topic, sub + "-x").close()
    admin.subscribe(topic, sub).close()

    # The broker's answer on the wire: AuthorizationError, Pulsar's text.
    wire = WireClient(int(secured.url.rsplit(":", 1)[1]), timeout=15)
    token = role_token(secured.key, outsider)
    wire.send(frame(base_command(CONNECT, fb(1, "raw") + fv(4, 21) + fb(5, "token")
                                 + fb(3, token))))
    wire.expect(CONNECTED)
    wire.send(subscribe_frame(topic, sub, 1, 7))
    err = wire.expect(ERROR)
    assert error_name(err, 2) == "AuthorizationError"
    assert err[3][0] == b"Client is not authorized to subscribe"
    wire.close()

    # Revoking the last listed role lifts the restriction.
    assert secured.rest("DELETE", f"namespaces/{NS}/permissions/{sub}/{reader}").status_code == 204
    eventually(lambda: c_out.subscribe(topic, sub).close(), 20)
    for c in (c_out, c_in, admin):
        c.close()


def test_grant_with_an_unknown_action_is_taken_as_null(secured):
    role = fresh("odd")
    path = f"namespaces/{NS}/permissions"
    r = secured.rest("POST", f"{path}/{role}", json=["produce", "bogus"])
    assert r.status_code == 204, r.text
    got = secured.rest("GET", path).json()[role]
    assert sorted(got, key=str) == sorted(["produce", None], key=str)
    # An ordinal is read as the action it numbers (Jackson's enum reading): 1 is consume.
    assert secured.rest("POST", f"{path}/{role}", json=[1]).status_code == 204
    assert secured.rest("GET", path).json()[role] == ["consume"]
    assert secured.rest("POST", f"{path}/{role}", json="produce").status_code == 400
    assert secured.rest("DELETE", f"{path}/{role}").status_code == 204


def refused_on_the_wire(secured, role, topic, sub):
    """The broker's ERROR (name, message) for SUBSCRIBE by `role`, on a raw connection."""
    wire = WireClient(int(secured.url.rsplit(":", 1)[1]), timeout=15)
    try:
        wire.send(frame(base_command(CONNECT, fb(1, "raw") + fv(4, 21) + fb(5, "token")
                                     + fb(3, role_token(secured.key, role)))))
        wire.expect(CONNECTED)
        wire.send(subscribe_frame(topic, sub, 1, 7))
        err = wire.expect(ERROR)
        return error_name(err, 2), err[3][0].decode()
    finally:
        wire.close()


def test_subscription_auth_mode_prefix(secured):
    """namespaces set-subscription-auth-mode Prefix: a role may only use subscriptions whose
    name starts with the role name (Pulsar's PulsarAuthorizationProvider.canConsumeAsync checks
    subscription.startsWith(role)); super-users are exempt; None lifts it."""
    ns = f"public/{fresh('prefix-ns')}"
    assert secured.rest("PUT", f"namespaces/{ns}").status_code == 204
    path = f"namespaces/{ns}/subscriptionAuthMode"
    assert secured.rest("GET", path).json() == "None"
    assert secured.rest("POST", path, json="Prefix").status_code == 204
    assert secured.rest("GET", path).json() == "Prefix"
    assert secured.rest("GET", f"namespaces/{ns}").json()["subscription_auth_mode"] == "Prefix"
    role = fresh("dev")
    r = secured.rest("POST", f"namespaces/{ns}/permissions/{role}", json=["consume"])
    assert r.status_code == 204, r.text
    topic = f"persistent://{ns}/{fresh('prefixed')}"
    admin = pulsar.Client(secured.url, authentication=pulsar.AuthenticationToken(secured.admin))
    admin.create_producer(topic).close()
    client = secured.client(role)

    def other_refused():
        with pytest.raises(pulsar.AuthorizationError):
            client.subscribe(topic, "telemetry")
    eventually(other_refused, 20)
    name, message = refused_on_the_wire(secured, role, topic, "telemetry")
    assert name == "AuthorizationError"
    assert message == (
        "org.apache.pulsar.broker.PulsarServerException: Failed to create consumer - The "
        "subscription name needs to be prefixed by the authentication role, like "
        f"{role}-xxxx for topic: {topic}")
    # The role's own prefix, with or without the '-' the message suggests, passes; the
    # super-user uses any name.
    client.subscribe(topic, f"{role}-telemetry").close()
    client.subscribe(topic, f"{role}telemetry").close()
    admin.subscribe(topic, "telemetry").close()
    # Back to None: any subscription name again.
    assert secured.rest("POST", path, json="None").status_code == 204
    assert secured.rest("GET", path).json() == "None"
    eventually(lambda: client.subscribe(topic, "telemetry").close(), 20)
    for c in (client, admin):
        c.close()


def test_subscription_auth_mode_prefix_on_admin_subscription_routes(secured):
    """Prefix mode on the admin API's subscription routes (Pulsar checks canConsumeAsync with
    the route's subscription): a role's call on another name answers 500 with Pulsar's message;
    its own prefix works; listing the subscriptions is not checked."""
    ns = f"public/{fresh('prefix-admin')}"
    assert secured.rest("PUT", f"namespaces/{ns}").status_code == 204
    assert secured.rest("POST", f"namespaces/{ns}/subscriptionAuthMode",
                        json="Prefix").status_code == 204
    role = fresh("dev")
    assert secured.rest("POST", f"namespaces/{ns}/permissions/{role}",
                        json=["consume"]).status_code == 204
    topic = f"persistent/{ns}/{fresh('t')}"
    assert secured.rest("PUT", topic).status_code == 204
    hdr = {"Authorization": f"Bearer {role_token(secured.key, role)}"}

    def call(method, path, **kwargs):
        return requests.request(method, f"{secured.web}/admin/v2/{topic}/{path}", headers=hdr,
                                timeout=30, **kwargs)
    start = {"json": {"ledgerId": -1, "entryId": -1}}
    own = f"{role}-sub"
    eventually(lambda: _status(call("PUT", f"subscription/{own}", **start), 204), 20)
    expected = ("Failed to create consumer - The subscription name needs to be prefixed by the "
                f"authentication role, like {role}-xxxx for topic: persistent://{topic[11:]}")
    for method, path, kwargs in [("PUT", "subscription/other", start),
                                 ("POST", "subscription/other/skip_all", {}),
                                 ("POST", "subscription/other/resetcursor/0", {}),
                                 ("DELETE", "subscription/other", {})]:
        r = call(method, path, **kwargs)
        assert r.status_code == 500, (path, r.status_code, r.text)
        assert expected in r.json()["reason"], (path, r.text)
    assert call("POST", f"subscription/{own}/skip_all").status_code == 204
    assert call("GET", "subscriptions").json() == [own]
    assert call("DELETE", f"subscription/{own}").status_code == 204


def _status(r, code):
    assert r.status_code == code, (r.status_code, r.text)
