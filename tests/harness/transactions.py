"""Raw-frame transactional client for the transaction tests
(tests/differential/test_transactions*.py):
the protocol's transaction commands (PulsarApi.proto), `TxnWire` (one connection acting as a
transactional client, in the order the Java and C++ clients send the commands), and the
module fixtures `txn_broker` (a broker of its own with transactionCoordinatorEnabled=true, or
--broker-url) and `tx`.
"""

from __future__ import annotations

import os
import struct
import sys
import time
import uuid
from collections.abc import Iterator

import pytest
import requests

from harness.broker import BrokerEndpoint
from harness.fixtures import own_broker
from harness.util import eventually

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from hostile_wire import (  # noqa: E402
    ACK,
    CONNECT,
    CONNECTED,
    ERROR,
    LOOKUP_RESPONSE,
    MESSAGE,
    PRODUCER_SUCCESS,
    SEND,
    SEND_ERROR,
    SEND_RECEIPT,
    SERVER_ERRORS,
    SUCCESS,
    WireClient,
    base_command,
    crc32c,
    decode,
    fb,
    flow_frame,
    frame,
    fv,
    lookup_frame,
    port_of,
    producer_frame,
    subscribe_frame,
)

# BaseCommand types (and fields) of the transaction commands (PulsarApi.proto).
NEW_TXN, NEW_TXN_RESPONSE = 50, 51
ADD_PARTITION_TO_TXN, ADD_PARTITION_TO_TXN_RESPONSE = 52, 53
ADD_SUBSCRIPTION_TO_TXN, ADD_SUBSCRIPTION_TO_TXN_RESPONSE = 54, 55
END_TXN, END_TXN_RESPONSE = 56, 57
TC_CLIENT_CONNECT_REQUEST, TC_CLIENT_CONNECT_RESPONSE = 62, 63
ACK_RESPONSE = 38
COMMIT, ABORT = 0, 1  # TxnAction
SHARED = 1
TXN_SETTINGS = ["transactionCoordinatorEnabled=true"]
TC_ASSIGN = "persistent://pulsar/system/transaction_coordinator_assign"


def txn_endpoint(config: pytest.Config) -> Iterator[BrokerEndpoint]:
    """A broker of its own started with transactionCoordinatorEnabled=true (for a module
    fixture), or the --broker-url one (start it with transactions on)."""
    url = config.getoption("--broker-url", None)
    if url:
        yield BrokerEndpoint("external", url, config.getoption("--admin-url", None))
        return
    yield from own_broker(
        config, TXN_SETTINGS, lambda e: e,
        lambda e: requests.get(f"{e.admin_url}/admin/v2/namespaces/public", timeout=10),
        "unused")


class TxnError(Exception):
    """A transaction command answered with an error: .error (ServerError name), .message."""

    def __init__(self, ctype: int, error: str, message: str) -> None:
        super().__init__(f"command {ctype}: {error}: {message}")
        self.error, self.message = error, message


class TxnWire:
    """One raw connection acting as a transactional client: coordinator 0, producers and Shared
    consumers on it; MESSAGEs received meanwhile are kept in `messages` (consumer id, ledger,
    entry, payload)."""

    def __init__(self, endpoint: BrokerEndpoint, connect_tc: bool = True, tc_id: int = 0,
                 token: str | None = None) -> None:
        """token: CONNECT with that token (auth method "token") instead of no credentials."""
        if token is None:
            self.wire = WireClient.connected(port_of(endpoint), timeout=20.0)
        else:
            self.wire = WireClient(port_of(endpoint), timeout=20.0)
            self.wire.send(frame(base_command(CONNECT, fb(1, "txn-wire") + fv(4, 21)
                                              + fb(5, "token") + fb(3, token))))
            self.wire.expect(CONNECTED)
        self.next_id = 1
        self.tc_id = tc_id
        self.messages: list[tuple[int, int, int, bytes]] = []
        self.producers: dict[str, int] = {}
        if connect_tc:
            self.connect_tc()

    def connect_tc(self) -> None:
        """As the clients connect to coordinator `tc_id` (0 unless given): a LOOKUP of its assign
        partition (which has the broker take the pulsar/system bundle), then
        TC_CLIENT_CONNECT_REQUEST, both again for 60 s while it answers ServiceNotReady (the
        coordinator still loading, or the bundle not taken yet: a lookup while the leader was a
        dead broker takes nothing; the clients look the partition up again then)."""

        def connect() -> None:
            self.wire.send(lookup_frame(f"{TC_ASSIGN}-partition-{self.tc_id}", self._rid()))
            self._answer({LOOKUP_RESPONSE})
            try:
                self.request(TC_CLIENT_CONNECT_REQUEST, fv(2, self.tc_id),
                             TC_CLIENT_CONNECT_RESPONSE, 2)
            except TxnError as e:
                if e.error != "ServiceNotReady":
                    pytest.fail(f"TC_CLIENT_CONNECT_REQUEST: {e}")
                raise
        eventually(connect, 60.0)

    def close(self) -> None:
        self.wire.close()

    def _rid(self) -> int:
        self.next_id += 1
        return self.next_id

    def _answer(self, want: set[int]) -> tuple[int, dict]:
        while True:
            ctype, body = self.wire.next_command(f"commands {want}")
            if ctype == MESSAGE:
                md_id = decode(body[2][0])
                self.messages.append((body[1][0], md_id[1][0], md_id[2][0], b""))
                continue
            if ctype in want:
                return ctype, body
            raise AssertionError(f"expected {want}, got {ctype} {body}")

    def request(self, ctype: int, rest: bytes, answer: int, error_field: int = 4) -> dict:
        """Sends BaseCommand ctype {request_id, rest}; the answer's body, or TxnError."""
        self.wire.send(frame(base_command(ctype, fv(1, self._rid()) + rest)))
        got, body = self._answer({answer, ERROR})
        if got == ERROR:
            raise TxnError(ERROR, SERVER_ERRORS[body[2][0]], body[3][0].decode())
        if error_field in body:
            msg_field = error_field + 1
            raise TxnError(ctype, SERVER_ERRORS[body[error_field][0]],
                           body.get(msg_field, [b""])[0].decode(errors="replace"))
        return body

    def new_txn(self, ttl_ms: int = 60000) -> tuple[int, int]:
        """NEW_TXN on the coordinator `tc_id`; txn_ttl_seconds carries milliseconds, as the Java,
        C++ and Go clients send it and Pulsar's coordinator reads it (60 there is 60 ms)."""
        body = self.request(NEW_TXN, fv(2, ttl_ms) + fv(3, self.tc_id), NEW_TXN_RESPONSE)
        return body[3][0], body[2][0]  # (most, least)

    @staticmethod
    def _txn(txn: tuple[int, int]) -> bytes:
        return fv(2, txn[1]) + fv(3, txn[0])

    def add_partition(self, txn: tuple[int, int], topic: str) -> None:
        self.request(ADD_PARTITION_TO_TXN, self._txn(txn) + fb(4, topic),
                     ADD_PARTITION_TO_TXN_RESPONSE)

    def add_subscription(self, txn: tuple[int, int], topic: str, sub: str) -> None:
        self.request(ADD_SUBSCRIPTION_TO_TXN, self._txn(txn) + fb(4, fb(1, topic) + fb(2, sub)),
                     ADD_SUBSCRIPTION_TO_TXN_RESPONSE)

    def end(self, txn: tuple[int, int], action: int) -> None:
        self.request(END_TXN, self._txn(txn) + fv(4, action), END_TXN_RESPONSE)

    def producer(self, topic: str) -> int:
        if topic not in self.producers:
            pid = len(self.producers) + 1
            self.wire.send(lookup_frame(topic, self._rid()))  # has Pulsar load the bundle
            self._answer({LOOKUP_RESPONSE})
            self.wire.send(producer_frame(topic, pid, self._rid(), f"txn-{uuid.uuid4().hex[:8]}"))
            self._answer({PRODUCER_SUCCESS})
            self.producers[topic] = pid
        return self.producers[topic]

    def send(self, topic: str, payload: bytes, txn: tuple[int, int] | None = None) -> None:
        """SEND (with the txnid in the command and the metadata when txn is given); waits for
        the SEND_RECEIPT (SEND_ERROR raises TxnError)."""
        pid = self.producer(topic)
        seq = self._rid()
        md = fb(1, f"p{pid}") + fv(2, seq) + fv(3, int(time.time() * 1000))
        cmd = fv(1, pid) + fv(2, seq)
        if txn is not None:
            md += fv(22, txn[1]) + fv(23, txn[0])
            cmd += fv(4, txn[1]) + fv(5, txn[0])
        checked = struct.pack(">I", len(md)) + md + payload
        self.wire.send(frame(base_command(SEND, cmd),
                             struct.pack(">HI", 0x0E01, crc32c(checked)) + checked))
        ctype, body = self._answer({SEND_RECEIPT, SEND_ERROR})
        if ctype == SEND_ERROR:
            raise TxnError(SEND, SERVER_ERRORS[body[3][0]], body[4][0].decode())

    def subscribe(self, topic: str, sub: str, consumer_id: int) -> None:
        self.wire.send(lookup_frame(topic, self._rid()))  # has the broker load the bundle
        self._answer({LOOKUP_RESPONSE})
        self.wire.send(subscribe_frame(topic, sub, consumer_id, self._rid(), SHARED,
                                       earliest=True))
        self._answer({SUCCESS})
        self.wire.send(flow_frame(consumer_id, 1000))

    def receive(self, n: int, timeout_s: float = 10.0) -> list[tuple[int, int, int, bytes]]:
        """Waits until `n` MESSAGEs were received (in all); returns them."""
        deadline = time.time() + timeout_s
        while len(self.messages) < n and time.time() < deadline:
            for ctype, body in self.wire.commands_within(0.5):
                if ctype == MESSAGE:
                    md_id = decode(body[2][0])
                    self.messages.append((body[1][0], md_id[1][0], md_id[2][0], b""))
        assert len(self.messages) >= n, f"{len(self.messages)} of {n} messages"
        return self.messages[:n]

    def ack(self, consumer_id: int, ledger: int, entry: int, txn: tuple[int, int]) -> None:
        """An individual ACK with the txnid and a request id; TxnError on an error answer."""
        body = (fv(1, consumer_id) + fv(2, 0) + fb(3, fv(1, ledger) + fv(2, entry))
                + fv(6, txn[1]) + fv(7, txn[0]))
        self.wire.send(frame(base_command(ACK, body + fv(8, self._rid()))))
        _, answer = self._answer({ACK_RESPONSE})
        if 4 in answer:
            raise TxnError(ACK, SERVER_ERRORS[answer[4][0]], answer[5][0].decode())
