"""Token and basic authentication for tests: HS256 secret keys and tokens made here (no broker
tool needed), htpasswd entries with known hashes, and the broker settings that turn Pulsar's
token (and basic) authentication and authorization on, the same list for Magnetar and the
reference Pulsar. Standard library only.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os

TOKEN_PROVIDER = "org.apache.pulsar.broker.authentication.AuthenticationProviderToken"
TLS_PROVIDER = "org.apache.pulsar.broker.authentication.AuthenticationProviderTls"
BASIC_PROVIDER = "org.apache.pulsar.broker.authentication.AuthenticationProviderBasic"
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


# htpasswd entries (user -> (password, hash)) with hashes from independent tools: DES crypt from
# commons-codec's UnixCrypt tests, apr1 from `openssl passwd -apr1`, bcrypt and "$1$" from
# libxcrypt. Pulsar's AuthenticationProviderBasic checks only apr1 and DES crypt.
BASIC_USERS = {
    "des-user": ("secret", "xxWAum7tHdIUw"),
    "apr-user": ("aprpass", "$apr1$saltsalt$bc5FE0MgRXNeJx79BzzAm."),
    "basic-admin": ("averyveryverylongpassword-over-16", "$apr1$12345678$8DKUXkk4pQvkz7.BPuwte0"),
    "bcrypt-user": ("secret", "$2b$04$J5pqmmwsqzOaJMxxhbxX/.E3l8hQri8fiHicWQKvpnUVFS3QkNfSu"),
    "md5-user": ("secret", "$1$saltsalt$9xy1btjgzLYfb7hivXtC//"),
    # DES crypt keyed with the bytes a, b, NUL, c, d (commons-codec's UnixCrypt keys the first 8
    # bytes, a NUL included; crypt(3) stops at it): libxcrypt with 0x80, the same key byte.
    "des-nul": ("ab\0cd", "xxGJcYGy81PmQ"),
}


def write_htpasswd(path: str, users: dict[str, tuple[str, str]] = BASIC_USERS) -> str:
    """Writes `user:hash` lines to `path`; returns the path."""
    with open(path, "w") as f:
        f.write("".join(f"{u}:{h}\n" for u, (_, h) in users.items()))
    return path


def basic_and_token_settings(key_url: str, key: bytes, basic_conf: str,
                             super_users: str = f"{SUPER_USER},basic-admin") -> list[str]:
    """token_auth_settings with `key_url` as tokenSecretKey (`key` its bytes, for the broker's own
    client token), plus AuthenticationProviderBasic with basicAuthConf=`basic_conf`."""
    settings = [s for s in token_auth_settings(key)
                if not s.startswith(("authenticationProviders=", "tokenSecretKey=",
                                     "superUserRoles="))]
    return settings + [f"authenticationProviders={TOKEN_PROVIDER},{BASIC_PROVIDER}",
                       f"tokenSecretKey={key_url}", f"basicAuthConf={basic_conf}",
                       f"superUserRoles={super_users}"]
