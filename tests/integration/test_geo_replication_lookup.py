"""The replicator's lookup on the remote cluster (docs/geo-replication.md), against fake remote
brokers on raw sockets that record what the replicator sends: the service URL's broker redirects
(authoritative) to a second one, which answers Connect with proxy_through_service_url; the
producer then goes through that second broker (a proxy) with CONNECT's proxy_to_broker_url
naming the owner. After the fake closes the producer (CLOSE_PRODUCER, a topic moved), the
replicator looks the topic up again from the service URL and resends what was not
acknowledged; every message carries replicated_from and keeps its producer and sequence id."""

from __future__ import annotations

import socket
import struct
import threading

import pulsar
import requests

import hostile_wire as wire
from harness.broker import MagnetarProcess, free_port
from harness.util import eventually

OWNER = "owner.invalid:6650"


class FakeBroker:
    """Accepts connections on a free port; each one is served by serve(conn) on a thread. What
    came is appended to `events` as (kind, fields)."""

    def __init__(self, name: str, serve) -> None:
        self.name = name
        self.serve = serve
        self.events: list[tuple[str, dict]] = []
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.url = f"pulsar://127.0.0.1:{self.port}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                s, _ = self.sock.accept()
            except OSError:
                return
            c = wire.WireClient.__new__(wire.WireClient)
            c.sock, c.buf = s, b""
            threading.Thread(target=self._run, args=(c,), daemon=True).start()

    def _run(self, c: wire.WireClient) -> None:
        try:
            self.serve(self, c)
        except (OSError, AssertionError):
            pass
        finally:
            c.close()

    def record(self, kind: str, fields: dict) -> None:
        with self.lock:
            self.events.append((kind, fields))

    def kinds(self, kind: str) -> list[dict]:
        with self.lock:
            return [f for k, f in self.events if k == kind]

    def close(self) -> None:
        self.sock.close()


def recv_frame(c: wire.WireClient) -> tuple[int, dict, bytes] | None:
    """(type, body fields, payload after the command) of the next frame; None when closed."""
    if not c._fill(4):
        return None
    total = struct.unpack(">I", c.buf[:4])[0]
    if not c._fill(4 + total):
        return None
    fr, c.buf = c.buf[4:4 + total], c.buf[4 + total:]
    size = struct.unpack(">I", fr[:4])[0]
    cmd = wire.decode(fr[4:4 + size])
    ctype = cmd[1][0]
    return ctype, (wire.decode(cmd[ctype][0]) if ctype in cmd else {}), fr[4 + size:]


def metadata_of(payload: bytes) -> dict:
    """MessageMetadata of a SEND's payload ([0x0e01][crc][size][metadata]...)."""
    size = struct.unpack(">I", payload[6:10])[0]
    return wire.decode(payload[10:10 + size])


def connected(c: wire.WireClient, f: dict, broker: FakeBroker) -> None:
    broker.record("connect", f)
    c.send(wire.frame(wire.base_command(wire.CONNECTED, wire.fb(1, "fake") + wire.fv(2, 21))))


def lookup_answer(request_id: int, url: str, response: int, authoritative: bool = False,
                  proxy: bool = False) -> bytes:
    body = (wire.fb(1, url) + wire.fv(3, response) + wire.fv(4, request_id)
            + wire.fv(5, int(authoritative)) + wire.fv(8, int(proxy)))
    return wire.frame(wire.base_command(wire.LOOKUP_RESPONSE, body))


def test_redirect_proxy_and_lookup_again_after_close():
    closes_left = [1]

    def serve_first(me: FakeBroker, c: wire.WireClient) -> None:
        # The service URL's broker: every lookup is redirected (authoritative) to the second.
        while (got := recv_frame(c)) is not None:
            ctype, f, _ = got
            if ctype == wire.CONNECT:
                connected(c, f, me)
            elif ctype == wire.LOOKUP:
                me.record("lookup", f)
                c.send(lookup_answer(f[2][0], second.url, 0, authoritative=True))
            elif ctype == wire.PING:
                c.send(wire.frame(wire.base_command(wire.PONG, b"")))

    def serve_second(me: FakeBroker, c: wire.WireClient) -> None:
        # A proxy: lookups answered Connect to OWNER through it; producers served when CONNECT
        # names OWNER; the first producer is closed after 5 receipts.
        proxied = False
        receipts = 0
        while (got := recv_frame(c)) is not None:
            ctype, f, payload = got
            if ctype == wire.CONNECT:
                proxied = f.get(6, [b""])[0] == OWNER.encode()
                connected(c, f, me)
            elif ctype == wire.LOOKUP:
                me.record("lookup", f)
                c.send(lookup_answer(f[2][0], f"pulsar://{OWNER}", 1, proxy=True))
            elif ctype == wire.PRODUCER:
                me.record("producer", {**f, "proxied": proxied})
                c.send(wire.frame(wire.base_command(
                    wire.PRODUCER_SUCCESS, wire.fv(1, f[3][0]) + wire.fb(2, f[4][0]))))
            elif ctype == wire.SEND:
                md = metadata_of(payload)
                me.record("send", md)
                receipt = wire.fv(1, f[1][0]) + wire.fv(2, f[2][0]) + wire.fb(
                    3, wire.fv(1, 1) + wire.fv(2, receipts))
                c.send(wire.frame(wire.base_command(wire.SEND_RECEIPT, receipt)))
                receipts += 1
                if receipts == 5 and closes_left[0] > 0:
                    closes_left[0] -= 1
                    c.send(wire.frame(wire.base_command(
                        wire.CLOSE_PRODUCER, wire.fv(1, f[1][0]) + wire.fv(2, 1))))
            elif ctype == wire.CLOSE_PRODUCER:
                c.send(wire.frame(wire.base_command(wire.SUCCESS, wire.fv(1, f[2][0]))))
            elif ctype == wire.PING:
                c.send(wire.frame(wire.base_command(wire.PONG, b"")))

    second = FakeBroker("second", serve_second)
    first = FakeBroker("first", serve_first)
    c1 = MagnetarProcess(["clusterName=c1", "brokerDeduplicationEnabled=true"])
    c1.start(port=free_port())
    client = None
    try:
        admin = c1.admin_url
        for method, path, body in (
                ("PUT", "/admin/v2/clusters/c2", {"brokerServiceUrl": first.url}),
                ("PUT", "/admin/v2/tenants/geo", {"allowedClusters": ["c1", "c2"],
                                                  "adminRoles": []}),
                ("PUT", "/admin/v2/namespaces/geo/ns", None),
                ("POST", "/admin/v2/namespaces/geo/ns/replication", ["c1", "c2"])):
            r = requests.request(method, admin + path, json=body, timeout=30)
            assert r.status_code in (200, 204), r.text
        topic = "persistent://geo/ns/lookup"
        client = pulsar.Client(f"pulsar://127.0.0.1:{c1.port}",
                               logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
        producer = client.create_producer(topic, producer_name="p1", batching_enabled=False)
        n = 20
        for i in range(n):
            producer.send(f"m-{i}".encode())

        def all_replicated() -> None:
            st = requests.get(f"{admin}/admin/v2/persistent/geo/ns/lookup/stats", timeout=10)
            rep = st.json()["replication"]["c2"]
            assert rep["connected"] and rep["replicationBacklog"] == 0, rep
            assert rep["outboundConnection"] == second.url, rep
        eventually(all_replicated, 30)
        # Lookups: the first asked without authoritative, the redirect kept it; twice (again
        # after the CLOSE_PRODUCER).
        firsts, seconds = first.kinds("lookup"), second.kinds("lookup")
        assert len(firsts) >= 2 and len(seconds) >= 2, (firsts, seconds)
        assert all(f[1][0] == topic.encode() for f in firsts + seconds)
        assert all(f.get(3, [0])[0] == 0 for f in firsts), firsts
        assert all(f[3][0] == 1 for f in seconds), seconds
        producers = second.kinds("producer")
        assert len(producers) >= 2, producers
        assert all(p["proxied"] and p[4][0] == b"pulsar.repl.c1-->c2" for p in producers), producers
        assert not first.kinds("producer")
        # Every message, with replicated_from and the original producer and sequence ids; the
        # ones after the close may come twice (the remote's dedup drops them), in order.
        sends = second.kinds("send")
        seqs = [m[2][0] for m in sends]
        assert all(m[1][0] == b"p1" and m[5][0] == b"c1" for m in sends), sends[:3]
        assert sorted(set(seqs)) == list(range(n)), seqs
        firsts_seen: list[int] = []
        for s in seqs:
            if s not in firsts_seen:
                firsts_seen.append(s)
        assert firsts_seen == list(range(n)), seqs
    finally:
        if client:
            client.close()
        c1.close()
        first.close()
        second.close()
