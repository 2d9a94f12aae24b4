"""Token authentication for tests: HS256 secret keys and tokens made here (no broker tool
needed), and the broker settings that turn Pulsar's token authentication and authorization on,
the same list for Magnetar and the reference Pulsar. Standard library only.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os

TOKEN_PROVIDER = "org.apache.pulsar.broker.authentication.AuthenticationProviderToken"
TLS_PROVIDER = "org.apache.pulsar.broker.authentication.AuthenticationProviderTls"
CLIENT_TOKEN_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationToken"
SUPER_USER = "admin"


def b64url(data: bytes) -> str:
    """Base64url without padding (JWT's encoding)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def new_secret_key() -> bytes:
    """A random 256-bit HS256 key (what `pulsar tokens create-secret-key` makes)."""
    return os.urandom(32)


def hs256_token(key: bytes, claims: dict[str, object],
                header: dict[str, object] | None = None) -> str:
    """A compact JWT signed with HMAC-SHA256 over `key`; header defaults to {"alg": "HS256"}."""
    head = b64url(json.dumps(header or {"alg": "HS256"}).encode())
    body = b64url(json.dumps(claims).encode())
    sig = hmac.new(key, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64url(sig)}"


def role_token(key: bytes, role: str, exp: int | None = None) -> str:
    """A token with subject `role` and, when given, expiry `exp` (seconds since the epoch)."""
    claims: dict[str, object] = {"sub": role}
    if exp is not None:
        claims["exp"] = exp
    return hs256_token(key, claims)


def token_auth_settings(key: bytes, super_user: str = SUPER_USER) -> list[str]:
    """broker.conf KEY=VALUE settings: token authentication with `key`, authorization on,
    `super_user` a super-user, and the broker's own client (Pulsar's internal admin calls)
    authenticating as that super-user."""
    return [
        "authenticationEnabled=true",
        "authorizationEnabled=true",
        f"authenticationProviders={TOKEN_PROVIDER}",
        "tokenSecretKey=data:;base64," + base64.b64encode(key).decode(),
        f"superUserRoles={super_user}",
        f"brokerClientAuthenticationPlugin={CLIENT_TOKEN_PLUGIN}",
        f"brokerClientAuthenticationParameters=token:{role_token(key, super_user)}",
    ]
