#!/usr/bin/env python3
"""Runs a command against a freshly started broker, then stops the broker.

  with_broker.py --broker pulsar|magnetar [--set key=value]... [--tls] [--auth-token]
      [--auth-tls] [--transactions] -- COMMAND [ARGS...]

The command gets BROKER_URL (pulsar://127.0.0.1:N), ADMIN_URL (http://127.0.0.1:M), BROKER_HOST,
BROKER_PORT and BROKER_KIND (magnetar|pulsar) in its environment; the exit status is the command's.
With --tls the broker also listens on brokerServicePortTls with certificates made for the run
(tests/harness/tls.py), and the command gets BROKER_URL_TLS (pulsar+ssl://localhost:N) and
TLS_CERTS_DIR (ca.pem, client.pem, client.key, ...).
--auth-token starts the broker with token authentication and authorization on (a fresh HS256 key,
superUserRoles=admin; harness/auth.py) and adds AUTH_SECRET_KEY (the key, base64) and
AUTH_SUPER_USER_TOKEN (a token of role admin without expiry).
--auth-basic is --auth-token with AuthenticationProviderBasic beside the token provider:
basicAuthConf=file:///... of harness.auth.BASIC_USERS (superUserRoles=admin,basic-admin), and the
command gets AUTH_BASIC_CONF (that file's path).
--auth-tls is --tls and --auth-token with webServicePortTls too and AuthenticationProviderTls
beside the token provider: TLS_CERTS_DIR also has client-ROLE.pem/.key (CN=ROLE) for the roles
admin (the super-user), app-1 and app-2, and ADMIN_URL_TLS is https://localhost:N.
--transactions starts the broker with transactionCoordinatorEnabled=true and sets
BROKER_TRANSACTIONS=1 (tests/java TransactionTest runs its transactional tests only then).
"""

import argparse
import base64
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness.auth import (  # noqa: E402
    BASIC_PROVIDER,
    SUPER_USER,
    TLS_PROVIDER,
    TOKEN_PROVIDER,
    new_secret_key,
    role_token,
    token_auth_settings,
    write_htpasswd,
)
from harness.broker import broker_process, tail  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--broker", choices=["magnetar", "pulsar"], required=True)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="broker setting (repeatable)")
    parser.add_argument("--auth-token", action="store_true",
                        help="token authentication and authorization on (AUTH_* in the env)")
    parser.add_argument("--auth-basic", action="store_true",
                        help="--auth-token plus AuthenticationProviderBasic (harness.auth."
                             "BASIC_USERS; AUTH_BASIC_CONF in the env)")
    parser.add_argument("--tls", action="store_true",
                        help="also a TLS listener with certificates made now "
                             "(tests/harness/tls.py); sets BROKER_URL_TLS and TLS_CERTS_DIR")
    parser.add_argument("--auth-tls", action="store_true",
                        help="--tls and --auth-token plus AuthenticationProviderTls and "
                             "webServicePortTls; client-ROLE certificates in TLS_CERTS_DIR")
    parser.add_argument("--transactions", action="store_true",
                        help="transactionCoordinatorEnabled=true; sets BROKER_TRANSACTIONS=1")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        parser.error("no command given")

    settings, auth_env = list(args.set), {}
    certs_dir = None
    if args.tls or args.auth_tls:
        from harness.broker import free_port
        from harness.tls import generate_certs, tls_settings
        certs_dir = tempfile.mkdtemp(prefix="with-broker-tls-")
        certs = generate_certs(certs_dir, client_roles=("admin", "app-1", "app-2"))
        settings = tls_settings(certs, broker_port=free_port(),
                                web_port=free_port() if args.auth_tls else None) + settings
    basic_dir = None
    if args.auth_token or args.auth_tls or args.auth_basic:
        key = new_secret_key()
        auth = token_auth_settings(key)
        if args.auth_tls:
            auth = [s for s in auth if not s.startswith("authenticationProviders=")]
            auth.append(f"authenticationProviders={TOKEN_PROVIDER},{TLS_PROVIDER}")
        settings = auth + settings
        auth_env = {"AUTH_SECRET_KEY": base64.b64encode(key).decode(),
                    "AUTH_SUPER_USER_TOKEN": role_token(key, SUPER_USER)}
        if args.auth_basic:
            basic_dir = tempfile.mkdtemp(prefix="with-broker-basic-")
            conf = write_htpasswd(os.path.join(basic_dir, "htpasswd"))
            settings = [s for s in settings if not s.startswith(
                ("authenticationProviders=", "superUserRoles="))]
            providers = f"{TOKEN_PROVIDER},{BASIC_PROVIDER}"
            if args.auth_tls:
                providers += f",{TLS_PROVIDER}"
            settings += [f"authenticationProviders={providers}", f"basicAuthConf=file://{conf}",
                         f"superUserRoles={SUPER_USER},basic-admin"]
            auth_env["AUTH_BASIC_CONF"] = conf
    if args.transactions:
        settings.append("transactionCoordinatorEnabled=true")
        auth_env["BROKER_TRANSACTIONS"] = "1"
    proc = broker_process(args.broker, settings)
    endpoint = proc.start()
    try:
        url = urllib.parse.urlparse(endpoint.service_url)
        env = dict(os.environ, BROKER_URL=endpoint.service_url, ADMIN_URL=endpoint.admin_url or "",
                   BROKER_HOST=url.hostname or "", BROKER_PORT=str(url.port),
                   BROKER_KIND=args.broker, **auth_env)
        if certs_dir and endpoint.service_url_tls:
            env.update(BROKER_URL_TLS=endpoint.service_url_tls, TLS_CERTS_DIR=certs_dir,
                       ADMIN_URL_TLS=endpoint.admin_url_tls or "")
        print(f"with_broker: {args.broker} at {endpoint.service_url} / {endpoint.admin_url}",
              flush=True)
        rc = subprocess.call(cmd, env=env)
        if rc != 0 and endpoint.log_path:
            print(f"--- broker log ({endpoint.log_path}) ---\n{tail(endpoint.log_path, 80)}")
        return rc
    finally:
        proc.close()
        if certs_dir:
            shutil.rmtree(certs_dir, ignore_errors=True)
        if basic_dir:
            shutil.rmtree(basic_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
