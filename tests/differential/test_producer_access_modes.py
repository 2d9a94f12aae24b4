"""Producer access modes (Shared, Exclusive, WaitForExclusive, ExclusiveWithFencing) in every
pairing, the topic epoch in PRODUCER_SUCCESS, and the dead-letter producer's
initial_subscription_name, on raw frames so each answer is seen as the broker sends it."""

import os
import sys

import pulsar
import pytest
import requests

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from hostile_wire import (  # noqa: E402
    CLOSE_PRODUCER,
    ERROR,
    PRODUCER,
    PRODUCER_SUCCESS,
    WireClient,
    base_command,
    entry,
    error_name,
    fb,
    frame,
    fv,
    send_frame,
)

SHARED, EXCLUSIVE, WAIT, FENCING = 0, 1, 2, 3
MODES = {"Shared": SHARED, "Exclusive": EXCLUSIVE, "WaitForExclusive": WAIT,
         "ExclusiveWithFencing": FENCING}


def producer_frame(topic, producer_id, request_id, mode, name, initial_subscription=None):
    body = fb(1, topic) + fv(2, producer_id) + fv(3, request_id) + fb(4, name) + fv(10, mode)
    if initial_subscription:
        body += fb(13, initial_subscription)
    return frame(base_command(PRODUCER, body))


def connect(broker):
    c = WireClient(int(broker.service_url.rsplit(":", 1)[1]), timeout=15)
    c.handshake()
    return c


def answer(c):
    """(kind, body) of the next PRODUCER answer: "ready", "queued" or the error name."""
    while True:
        got = c.recv_command()
        assert got is not None, "connection closed"
        ctype, body = got
        if ctype == PRODUCER_SUCCESS:
            return ("ready" if body.get(6, [1]) == [1] else "queued"), body
        if ctype == ERROR:
            return error_name(body, 2), body
        assert ctype not in (CLOSE_PRODUCER,), f"unexpected {got}"


def open_producer(c, topic, pid, mode, name):
    c.send(producer_frame(topic, pid, pid, mode, name))
    return answer(c)


# (holder, newcomer) -> what the newcomer gets, as Pulsar's AbstractTopic decides.
EXPECTED = {
    ("Shared", "Shared"): "ready",
    ("Shared", "Exclusive"): "ProducerFenced",
    ("Shared", "WaitForExclusive"): "queued",
    ("Shared", "ExclusiveWithFencing"): "ready",
    ("Exclusive", "Shared"): "ProducerBusy",
    ("Exclusive", "Exclusive"): "ProducerFenced",
    ("Exclusive", "WaitForExclusive"): "queued",
    ("Exclusive", "ExclusiveWithFencing"): "ready",
    ("WaitForExclusive", "Shared"): "ProducerBusy",
    ("WaitForExclusive", "Exclusive"): "ProducerFenced",
    ("WaitForExclusive", "WaitForExclusive"): "queued",
    ("WaitForExclusive", "ExclusiveWithFencing"): "ready",
    ("ExclusiveWithFencing", "Shared"): "ProducerBusy",
    ("ExclusiveWithFencing", "Exclusive"): "ProducerFenced",
    ("ExclusiveWithFencing", "WaitForExclusive"): "queued",
    ("ExclusiveWithFencing", "ExclusiveWithFencing"): "ready",
}


@pytest.mark.parametrize("holder,newcomer", sorted(EXPECTED))
def test_access_mode_pairs(broker, topic, holder, newcomer):
    a, b = connect(broker), connect(broker)
    try:
        kind, first = open_producer(a, topic, 1, MODES[holder], "holder")
        assert kind == "ready"
        if holder != "Shared":
            assert 5 in first, "an exclusive producer gets the topic epoch"
        kind, second = open_producer(b, topic, 2, MODES[newcomer], "newcomer")
        assert kind == EXPECTED[(holder, newcomer)], second
        if newcomer == "ExclusiveWithFencing":
            # The holder is fenced out without being told; its next send closes its connection
            # (Pulsar's behaviour). The epoch moved past the holder's.
            if holder != "Shared":
                assert second[5][0] > first[5][0]
            a.send(send_frame(1, 0, entry("holder", 0, b"late")))
            assert a.wait_closed(10)
        if kind == "queued":
            # Admitted, with a newer epoch, once the holder leaves.
            a.close()
            a = None
            kind, admitted = answer(b)
            assert kind == "ready"
            assert 5 in admitted
            if holder != "Shared":
                assert admitted[5][0] > first[5][0]
    finally:
        for c in (a, b):
            if c:
                c.close()


def test_fencing_fails_the_waiting_producer(broker, topic):
    a, w, f = connect(broker), connect(broker), connect(broker)
    try:
        assert open_producer(a, topic, 1, EXCLUSIVE, "ex")[0] == "ready"
        assert open_producer(w, topic, 1, WAIT, "waiter")[0] == "queued"
        kind, _ = open_producer(f, topic, 1, FENCING, "fencer")
        assert kind == "ready"
        assert answer(w)[0] == "ProducerFenced"
        a.send(send_frame(1, 0, entry("ex", 0, b"late")))
        assert a.wait_closed(10)
    finally:
        for c in (a, w, f):
            c.close()


@pytest.mark.admin
def test_initial_subscription_is_created_with_the_producer(broker, topic, admin_url):
    c = connect(broker)
    try:
        c.send(producer_frame(topic, 1, 1, SHARED, "dlq-producer", initial_subscription="init-sub"))
        assert answer(c)[0] == "ready"
        subs = requests.get(
            f"{admin_url}/admin/v2/persistent/{topic.split('://', 1)[1]}/subscriptions",
            timeout=30).json()
        assert subs == ["init-sub"]
    finally:
        c.close()
    # Messages sent now wait for the subscription (it starts at the earliest message).
    client = pulsar.Client(broker.service_url)
    try:
        p = client.create_producer(topic)
        p.send(b"dead-lettered")
        consumer = client.subscribe(topic, "init-sub")
        assert consumer.receive(10_000).data() == b"dead-lettered"
    finally:
        client.close()
