"""Keys and tokens made by Apache Pulsar's own `pulsar tokens` (TokensCliUtils, from the jars of
tools/pulsar-reference) work with `magnetar tokens` and the broker, and the other way round.
Skipped when those jars are not there (`tools/pulsar-reference/pulsar-standalone.sh resolve`,
or PULSAR_LIB=<directory of Pulsar's jars>) or there is no java.
"""

import glob
import os
import shutil
import subprocess

import pulsar
import pytest

from harness.broker import REPO, MagnetarProcess, magnetar_bin

PULSAR_LIB = os.environ.get("PULSAR_LIB", os.path.join(REPO, "tools", "pulsar-reference", "lib"))
TOKENS_MAIN = "org.apache.pulsar.utils.auth.tokens.TokensCliUtils"
TOKEN_PROVIDER = "org.apache.pulsar.broker.authentication.AuthenticationProviderToken"

pytestmark = pytest.mark.skipif(
    not glob.glob(os.path.join(PULSAR_LIB, "pulsar-broker-[0-9]*.jar")) or not shutil.which("java"),
    reason=f"no Pulsar jars in {PULSAR_LIB} (or no java)")


def pulsar_tokens(*args, check=True):
    cmd = ["java", "-Xmx128m", "-XX:TieredStopAtLevel=1", "-cp", os.path.join(PULSAR_LIB, "*"),
           TOKENS_MAIN, *args]
    return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=120)


def magnetar_tokens(*args, check=True):
    return subprocess.run([magnetar_bin(), "tokens", *args], check=check, capture_output=True,
                          text=True, timeout=60)


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    d = tmp_path_factory.mktemp("keys")
    paths = {name: str(d / name) for name in
             ("pulsar.secret", "magnetar.secret", "pulsar.private", "pulsar.public",
              "magnetar.private", "magnetar.public")}
    pulsar_tokens("create-secret-key", "--output", paths["pulsar.secret"])
    magnetar_tokens("create-secret-key", "--output", paths["magnetar.secret"])
    pulsar_tokens("create-key-pair", "--output-private-key", paths["pulsar.private"],
                  "--output-public-key", paths["pulsar.public"])
    magnetar_tokens("create-key-pair", "--output-private-key", paths["magnetar.private"],
                    "--output-public-key", paths["magnetar.public"])
    return {k: "file://" + v for k, v in paths.items()}


# kind: (the create option, `pulsar tokens validate`'s option, `magnetar tokens validate`'s, the
# key a token is signed with, the key it is validated with)
KEY_KINDS = {
    "secret": ("--secret-key", "-sk", "--sk", "secret", "secret"),
    "key_pair": ("--private-key", "-pk", "--pk", "private", "public"),
}


@pytest.mark.parametrize("kind", KEY_KINDS)
def test_tokens_validate_both_ways(keys, kind):
    create, pulsar_opt, magnetar_opt, sign, verify = KEY_KINDS[kind]
    by_magnetar = magnetar_tokens("create", create, keys[f"pulsar.{sign}"],
                                  "--subject", "alice").stdout.strip()
    out = pulsar_tokens("validate", pulsar_opt, keys[f"pulsar.{verify}"], by_magnetar)
    assert "sub=alice" in out.stdout
    by_pulsar = pulsar_tokens("create", create, keys[f"magnetar.{sign}"],
                              "--subject", "bob", "--expiry-time", "1h").stdout.strip()
    out = magnetar_tokens("validate", magnetar_opt, keys[f"magnetar.{verify}"], by_pulsar)
    assert "sub=bob" in out.stdout
    # Another key: refused by both.
    assert pulsar_tokens("validate", pulsar_opt, keys[f"magnetar.{verify}"], by_magnetar,
                         check=False).returncode != 0
    assert magnetar_tokens("validate", magnetar_opt, keys[f"pulsar.{verify}"], by_pulsar,
                           check=False).returncode != 0


@pytest.mark.parametrize("kind", ["secret", "key_pair"])
def test_broker_accepts_pulsar_made_keys_and_tokens(keys, kind):
    if kind == "secret":
        setting = "tokenSecretKey=" + keys["pulsar.secret"]
        key_args = ["--secret-key", keys["pulsar.secret"]]
    else:
        setting = "tokenPublicKey=" + keys["pulsar.public"]
        key_args = ["--private-key", keys["pulsar.private"]]
    admin = pulsar_tokens("create", *key_args, "--subject", "admin").stdout.strip()
    other = pulsar_tokens("create", "--secret-key", keys["magnetar.secret"],
                          "--subject", "admin").stdout.strip()
    broker = MagnetarProcess(["authenticationEnabled=true", "authorizationEnabled=true",
                              f"authenticationProviders={TOKEN_PROVIDER}", setting,
                              "superUserRoles=admin"])
    endpoint = broker.start()
    try:
        c = pulsar.Client(endpoint.service_url, authentication=pulsar.AuthenticationToken(admin),
                          operation_timeout_seconds=5)
        t = f"persistent://public/default/pulsar-made-{kind}"
        consumer = c.subscribe(t, "s")
        c.create_producer(t).send(b"signed by pulsar tokens")
        assert consumer.receive(5000).data() == b"signed by pulsar tokens"
        c.close()
        bad = pulsar.Client(endpoint.service_url,
                            authentication=pulsar.AuthenticationToken(other),
                            operation_timeout_seconds=3)
        with pytest.raises(pulsar.Timeout):
            bad.create_producer(t)
        bad.close()
    finally:
        broker.close()
