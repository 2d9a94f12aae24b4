"""TLS test material: certificates generated at run time by gen_tls_certs.sh (the openssl
command; nothing is committed) and the broker settings that use them.

  tls_certs     session fixture: a TlsCerts with the paths (ca, broker, client, other-client,
                expired), removed after the session
  tls_settings  tls_settings(certs, broker_port, web_port, **extra) -> ["key=value", ...]
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator

import pytest

GEN_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gen_tls_certs.sh")


@dataclasses.dataclass
class TlsCerts:
    dir: str

    def path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    @property
    def ca(self) -> str:
        return self.path("ca.pem")

    def cert(self, who: str) -> str:
        """who: broker, client, other-client, expired."""
        return self.path(f"{who}.pem")

    def key(self, who: str) -> str:
        return self.path(f"{who}.key")


def generate_certs(directory: str, client_cn: str = "tls-client") -> TlsCerts:
    subprocess.run(["bash", GEN_SCRIPT, directory], check=True,
                   env={**os.environ, "CLIENT_CN": client_cn})
    return TlsCerts(directory)


@pytest.fixture(scope="session")
def tls_certs() -> Iterator[TlsCerts]:
    d = tempfile.mkdtemp(prefix="magnetar-tls-certs-")
    try:
        yield generate_certs(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def tls_settings(certs: TlsCerts, broker_port: int | None = 0, web_port: int | None = None,
                 **extra: object) -> list[str]:
    """brokerServicePortTls (and webServicePortTls) with the broker certificate and the test CA
    as trust; extra: further settings (key=value; bools as true/false)."""
    s = [f"tlsCertificateFilePath={certs.cert('broker')}",
         f"tlsKeyFilePath={certs.key('broker')}",
         f"tlsTrustCertsFilePath={certs.ca}"]
    if broker_port is not None:
        s.append(f"brokerServicePortTls={broker_port}")
    if web_port is not None:
        s.append(f"webServicePortTls={web_port}")
    for k, v in extra.items():
        s.append(f"{k}={str(v).lower() if isinstance(v, bool) else v}")
    return s
