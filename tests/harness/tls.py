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

from harness.protobuf import Fields, decode, fb, fv

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
        """who: broker, client, client-ROLE, nocn, other-client, expired."""
        return self.path(f"{who}.pem")

    def key(self, who: str) -> str:
        return self.path(f"{who}.key")


def generate_certs(directory: str, client_cn: str = "tls-client",
                   client_roles: tuple[str, ...] = ()) -> TlsCerts:
    """The certificates of gen_tls_certs.sh in `directory`; client_roles: a client-ROLE
    certificate (CN=ROLE) for each."""
    subprocess.run(["bash", GEN_SCRIPT, directory], check=True,
                   env={**os.environ, "CLIENT_CN": client_cn,
                        "CLIENT_ROLES": " ".join(client_roles)})
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


def connect_answer(host: str, port: int, auth_method: str, ca: str | None = None,
                   cert: tuple[str, str] | None = None, timeout_s: float = 10.0
                   ) -> tuple[int, Fields]:
    """Sends one CONNECT (client_version, protocol_version 21, auth_method_name) on
    pulsar+ssl:// when `ca` is given (the broker verified against it, host name not checked;
    `cert`: the client's (cert, key)), else on plaintext; returns the first answer's
    BaseCommand type (3 CONNECTED, 14 ERROR) and body fields (ERROR: 2 the ServerError value,
    3 the message)."""
    import socket
    import ssl
    import struct
    body = fb(1, "raw-test") + fv(4, 21) + fb(5, auth_method)
    cmd = fv(1, 2) + fb(2, body)
    sock: socket.socket = socket.create_connection((host, port), timeout=timeout_s)
    if ca is not None:
        ctx = ssl.create_default_context(cafile=ca)
        ctx.check_hostname = False
        if cert:
            ctx.load_cert_chain(*cert)
        sock = ctx.wrap_socket(sock)
    try:
        sock.sendall(struct.pack(">II", 4 + len(cmd), len(cmd)) + cmd)
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">I", buf[:4])[0]:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"closed without an answer ({len(buf)} bytes)")
            buf += chunk
        size = struct.unpack(">I", buf[4:8])[0]
        fields = decode(buf[8:8 + size])
        ctype = int(fields[1][0])
        return ctype, decode(fields.get(ctype, [b""])[0])
    finally:
        sock.close()
