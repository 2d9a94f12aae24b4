"""Slowloris on the binary protocol. As Pulsar (PulsarHandler's keep-alive task), the broker
closes a connection that has not sent CONNECT within keepAliveIntervalSeconds, and a connected
one whose PING went unanswered for an interval, counting complete frames only: trickling the
bytes of a frame that never completes does not keep a connection open. A quiet client that
answers PINGs, and the official client, stay connected. The broker here runs with
keepAliveIntervalSeconds=1 so the suite stays fast."""

import os
import socket
import struct
import time

import pytest

from hostile_wire import (
    CONNECTED,
    PING,
    CounterDelta,
    HostileBroker,
    WireClient,
    active_connections,
    base_command,
    bystander,
    connect_frame,
    frame,
    protocol_errors,
    wait_until,
)

INTERVAL = 1


@pytest.fixture(scope="module")
def broker():
    b = HostileBroker(settings=[f"keepAliveIntervalSeconds={INTERVAL}"])
    b.start()
    yield b
    b.close()


def closed_within(sock, seconds):
    """True when the broker closes sock within `seconds` (anything it sends is skipped)."""
    sock.settimeout(seconds)
    deadline = time.time() + seconds
    try:
        while time.time() < deadline:
            sock.settimeout(max(deadline - time.time(), 0.01))
            if not sock.recv(4096):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False
    return False


def test_no_connect_is_dropped(broker):
    with bystander(broker.endpoint, "silent"):
        d = CounterDelta(lambda: protocol_errors(broker.admin_url, "handshake_timeout"))
        silent = socket.create_connection(("127.0.0.1", broker.port))
        half = socket.create_connection(("127.0.0.1", broker.port))
        half.sendall(b"\x00\x00")  # half a size field, never finished
        start = time.time()
        assert closed_within(silent, 3 * INTERVAL + 2)
        assert closed_within(half, 3 * INTERVAL + 2)
        assert time.time() - start < 3 * INTERVAL + 2
        assert d.moved(at_least=2)
        silent.close()
        half.close()


def test_trickled_frame_is_dropped(broker):
    """Connected, then a frame announced as 1000 bytes arrives one byte at a time."""
    with bystander(broker.endpoint, "trickle"):
        d = CounterDelta(lambda: protocol_errors(broker.admin_url, "keepalive_timeout"))
        c = WireClient(broker.port)
        c.handshake()
        c.send(struct.pack(">II", 1000, 996))
        start = time.time()
        closed = False
        while time.time() - start < 4 * INTERVAL + 3:
            try:
                c.send(b"\x00")
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            c.sock.settimeout(0.2)
            try:
                if c.sock.recv(4096) == b"":  # PINGs are read and ignored
                    closed = True
                    break
            except socket.timeout:
                pass
            except ConnectionResetError:
                closed = True
                break
        assert closed, "the broker should drop a connection that never finishes a frame"
        assert d.moved()
        c.close()


def test_quiet_clients_that_answer_pings_stay(broker):
    """A connected client that sends nothing but answers PINGs is kept, also while many
    slowloris connections are being dropped around it."""
    baseline = active_connections(broker.admin_url)
    with bystander(broker.endpoint, "quiet"):
        quiet = WireClient(broker.port)
        quiet.handshake()
        lorises = []
        for i in range(50):
            s = socket.create_connection(("127.0.0.1", broker.port))
            if i % 2:
                s.sendall(connect_frame()[:7])  # half a CONNECT
            lorises.append(s)
        pings = 0
        quiet.sock.settimeout(0.5)
        deadline = time.time() + 3 * INTERVAL + 1.5
        while time.time() < deadline:
            try:
                got = quiet.recv_command()
            except socket.timeout:
                continue
            assert got is not None, "the quiet client was dropped although it answered PINGs"
            if got[0] == PING:
                pings += 1
                quiet.send(frame(base_command(19, b"")))  # PONG
        assert pings >= 1
        quiet.sock.settimeout(5)
        assert quiet.alive()
        for s in lorises:
            assert closed_within(s, 2 * INTERVAL + 2)
            s.close()
        quiet.close()
    assert wait_until(lambda: active_connections(broker.admin_url) <= baseline, 5)


@pytest.mark.skipif(bool(os.environ.get("MAGNETAR_SANITIZED")),
                    reason="a 512-descriptor limit is too tight for a sanitizer runtime's own "
                           "files and timing; the release stage runs it")
def test_connection_flood_beyond_the_fd_limit():
    """More connections than the broker has file descriptors: accepting pauses a second after
    each failure (as Netty's acceptor) instead of spinning and flooding the log, and service
    resumes once the flood goes away."""
    b = HostileBroker(nofile=512)
    b.start()
    try:
        with bystander(b.endpoint, "flood"):
            flood = []
            for _ in range(600):
                flood.append(socket.create_connection(("127.0.0.1", b.port), timeout=5))
            time.sleep(0.5)
            size = os.path.getsize(b.log_path)
            time.sleep(2)
            grown = os.path.getsize(b.log_path) - size
            assert grown < 20000, f"{grown} bytes of log in 2 s while out of descriptors"
            for s in flood:
                s.close()
        c = WireClient(b.port)
        c.handshake()
        c.close()
    finally:
        b.close()


def test_silent_peer_is_closed_at_two_intervals():
    """Pulsar's rule, timed: every tick sends a PING, busy or idle, and the next tick closes a
    connection that sent no complete frame since. A peer silent from its CONNECT on is closed at
    the second tick (2 intervals after accept), one without CONNECT at the first. With an
    interval of 2 s the windows are apart from what the old rule did (6 s: it pinged only
    connections idle for a whole interval)."""
    interval = 2
    b = HostileBroker(settings=[f"keepAliveIntervalSeconds={interval}"])
    b.start()
    try:
        start = time.time()
        c = WireClient(b.port)
        c.send(connect_frame())
        got = c.recv_command()
        assert got is not None and got[0] == CONNECTED
        pings = 0
        c.sock.settimeout(4 * interval)
        while True:  # PINGs are read, never answered
            got = c.recv_command()
            if got is None:
                break
            pings += got[0] == PING
        closed_after = time.time() - start
        assert pings == 1, f"{pings} PINGs before the close"
        assert 2 * interval - 0.5 <= closed_after <= 2 * interval + 1.0, closed_after
        c.close()
    finally:
        b.close()


def test_no_connect_is_closed_at_one_interval():
    interval = 2
    b = HostileBroker(settings=[f"keepAliveIntervalSeconds={interval}"])
    b.start()
    try:
        start = time.time()
        silent = socket.create_connection(("127.0.0.1", b.port))
        assert closed_within(silent, 3 * interval)
        elapsed = time.time() - start
        assert interval - 0.5 <= elapsed <= interval + 1.0, elapsed
        silent.close()
    finally:
        b.close()
