"""A minimal ZooKeeper client for tests: reads znodes over ZooKeeper's own wire protocol (jute),
so a test can check what the brokers wrote without a JVM. Only what tests need: a session,
getData, setData, getChildren, and close. Not for production use."""

from __future__ import annotations

import socket
import struct

_CREATE = 1
_GET_DATA = 4
_SET_DATA = 5
_GET_CHILDREN = 8
_CLOSE = -11
_NO_NODE = -101


class ZkError(Exception):
    pass


class ZkClient:
    def __init__(self, host: str, port: int, timeout_s: float = 10.0) -> None:
        self._sock = socket.create_connection((host, port), timeout=timeout_s)
        self._xid = 0
        # ConnectRequest: protocolVersion, lastZxidSeen, timeOut, sessionId, passwd (16 bytes).
        body = struct.pack(">iqiq", 0, 0, 30000, 0) + struct.pack(">i", 16) + bytes(16)
        self._send(body)
        self._recv()  # ConnectResponse

    def _send(self, body: bytes) -> None:
        self._sock.sendall(struct.pack(">i", len(body)) + body)

    def _recv_exact(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self._sock.recv(n - len(out))
            if not chunk:
                raise ZkError("connection closed by ZooKeeper")
            out += chunk
        return out

    def _recv(self) -> bytes:
        (n,) = struct.unpack(">i", self._recv_exact(4))
        return self._recv_exact(n)

    @staticmethod
    def _string(s: str) -> bytes:
        b = s.encode()
        return struct.pack(">i", len(b)) + b

    def _call(self, op: int, body: bytes) -> tuple[int, bytes]:
        self._xid += 1
        self._send(struct.pack(">ii", self._xid, op) + body)
        while True:
            reply = self._recv()
            xid, _zxid, err = struct.unpack(">iqi", reply[:16])
            if xid == self._xid:
                return err, reply[16:]
            # -1: a watch event; -2: ping; nothing to do for either here.

    def get(self, path: str) -> bytes | None:
        """The node's data; None when it does not exist."""
        err, rest = self._call(_GET_DATA, self._string(path) + b"\x00")
        if err == _NO_NODE:
            return None
        if err != 0:
            raise ZkError(f"getData {path}: error {err}")
        (n,) = struct.unpack(">i", rest[:4])
        return b"" if n < 0 else rest[4:4 + n]

    def set(self, path: str, data: bytes, version: int = -1) -> None:
        """Overwrites the node's data (version -1: whatever its version); ZkError when missing."""
        body = self._string(path) + struct.pack(">i", len(data)) + data + struct.pack(">i", version)
        err, _ = self._call(_SET_DATA, body)
        if err != 0:
            raise ZkError(f"setData {path}: error {err}")

    def create(self, path: str, data: bytes) -> None:
        """Creates a persistent node open to all (OPEN_ACL_UNSAFE); ZkError when it exists or
        its parent does not."""
        acl = struct.pack(">ii", 1, 31) + self._string("world") + self._string("anyone")
        body = (self._string(path) + struct.pack(">i", len(data)) + data + acl
                + struct.pack(">i", 0))
        err, _ = self._call(_CREATE, body)
        if err != 0:
            raise ZkError(f"create {path}: error {err}")

    def children(self, path: str) -> list[str]:
        """Sorted child names; [] when the node does not exist."""
        err, rest = self._call(_GET_CHILDREN, self._string(path) + b"\x00")
        if err == _NO_NODE:
            return []
        if err != 0:
            raise ZkError(f"getChildren {path}: error {err}")
        (count,) = struct.unpack(">i", rest[:4])
        pos, out = 4, []
        for _ in range(count):
            (n,) = struct.unpack(">i", rest[pos:pos + 4])
            out.append(rest[pos + 4:pos + 4 + n].decode())
            pos += 4 + n
        return sorted(out)

    def close(self) -> None:
        try:
            self._call(_CLOSE, b"")
        except (OSError, ZkError):
            pass
        self._sock.close()

    def __enter__(self) -> ZkClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
