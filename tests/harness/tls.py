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


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | 0x80 if n else b)
        if not n:
            return bytes(out)


def _fields(buf: bytes) -> dict[int, list[object]]:
    """A protobuf message's fields (varints as int, length-delimited as bytes)."""
    out: dict[int, list[object]] = {}
    pos = 0
    while pos < len(buf):
        key, shift, pos0 = 0, 0, pos
        while True:
            b = buf[pos]
            pos += 1
            key |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, shift = 0, 0
            while True:
                b = buf[pos]
                pos += 1
                v |= (b & 0x7F) << shift
                shift += 7
                if not b & 0x80:
                    break
            out.setdefault(num, []).append(v)
        elif wt == 2:
            n, shift = 0, 0
            while True:
                b = buf[pos]
                pos += 1
                n |= (b & 0x7F) << shift
                shift += 7
                if not b & 0x80:
                    break
            out.setdefault(num, []).append(buf[pos:pos + n])
            pos += n
        else:
            raise ValueError(f"wire type {wt} at {pos0}")
    return out


def connect_answer(host: str, port: int, auth_method: str, ca: str | None = None,
                   cert: tuple[str, str] | None = None, timeout_s: float = 10.0
                   ) -> tuple[int, dict[int, list[object]]]:
    """Sends one CONNECT (client_version, protocol_version 21, auth_method_name) on
    pulsar+ssl:// when `ca` is given (the broker verified against it, host name not checked;
    `cert`: the client's (cert, key)), else on plaintext; returns the first answer's
    BaseCommand type (3 CONNECTED, 14 ERROR) and body fields (ERROR: 2 the ServerError value,
    3 the message)."""
    import socket
    import ssl
    import struct
    body = (b"\x0a" + _varint(8) + b"raw-test" + b"\x20" + _varint(21) +
            b"\x2a" + _varint(len(auth_method)) + auth_method.encode())
    cmd = b"\x08" + _varint(2) + b"\x12" + _varint(len(body)) + body
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
        fields = _fields(buf[8:8 + size])
        ctype = int(fields[1][0])  # type: ignore[call-overload]
        inner = fields.get(ctype, [b""])[0]
        return ctype, _fields(inner)  # type: ignore[arg-type]
    finally:
        sock.close()
