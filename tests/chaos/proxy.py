"""A TCP proxy on loopback between clients and one broker port, with network faults on demand.

The broker advertises the proxy's address (advertisedListeners), so clients reach it only
through here. Faults:

- stall(seconds): nothing is forwarded either way for that long (bytes wait in the kernel's
  buffers, as on a link with a long delay); then everything flows again, streams intact.
- partition(seconds): bytes are dropped both ways and new connections are accepted but get
  nothing; when it ends every connection that lived through it is reset, as a partition ends
  with the peers' timeouts. A connection that lost bytes never forwards another one: TCP
  delivers a stream whole or not at all, and forwarding after a gap would splice frames (a
  SEND's command with a later message's payload) that no real network makes.
- reset(): every open connection is closed at once.

Thread: start()/stop() and the fault calls from any thread; the proxy runs its own asyncio loop
in a daemon thread.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time


class Proxy:
    def __init__(self, target_port: int, listen_port: int = 0) -> None:
        self.target_port = target_port
        self.port = listen_port or _free_port()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="chaos-proxy", daemon=True)
        self._server: asyncio.AbstractServer | None = None
        self._conns: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._stall_until = 0.0
        self._drop_until = 0.0
        self._ready = threading.Event()
        self.connections = 0  # accepted so far

    # --- control (any thread) ----------------------------------------------------------------

    def start(self) -> Proxy:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("proxy did not start")
        return self

    def stop(self) -> None:
        def shut() -> None:
            if self._server:
                self._server.close()
            self._reset_all()
            self._loop.stop()
        self._loop.call_soon_threadsafe(shut)
        self._thread.join(10)

    def set_target(self, port: int) -> None:
        """New connections go to `port` (a broker restarted on another port)."""
        self.target_port = port

    def stall(self, seconds: float) -> None:
        self._stall_until = time.monotonic() + seconds

    def partition(self, seconds: float) -> None:
        self._drop_until = time.monotonic() + seconds
        self._loop.call_soon_threadsafe(self._loop.call_later, seconds, self._reset_all)

    def reset(self) -> None:
        self._loop.call_soon_threadsafe(self._reset_all)

    # --- the loop ------------------------------------------------------------------------------

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._accept, "127.0.0.1", self.port))
        self._ready.set()
        self._loop.run_forever()

    def _reset_all(self) -> None:
        for client_w, broker_w in list(self._conns):
            for w in (client_w, broker_w):
                try:
                    w.transport.abort()
                except Exception:  # noqa: BLE001 (already gone)
                    pass
        self._conns.clear()

    async def _accept(self, client_r: asyncio.StreamReader,
                      client_w: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            broker_r, broker_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            client_w.transport.abort()
            return
        pair = (client_w, broker_w)
        self._conns.add(pair)
        lost = [False]  # bytes dropped on this connection (either way)
        await asyncio.gather(self._pump(client_r, broker_w, pair, lost),
                             self._pump(broker_r, client_w, pair, lost), return_exceptions=True)
        self._conns.discard(pair)
        for w in pair:
            w.transport.abort()

    async def _pump(self, r: asyncio.StreamReader, w: asyncio.StreamWriter,
                    pair: tuple[asyncio.StreamWriter, asyncio.StreamWriter],
                    lost: list[bool]) -> None:
        while True:
            now = time.monotonic()
            if now < self._stall_until:
                await asyncio.sleep(min(0.05, self._stall_until - now))
                continue
            data = await r.read(65536)
            if not data:
                break
            if time.monotonic() < self._drop_until:
                lost[0] = True  # lost on the way
                continue
            if lost[0]:
                continue  # nothing after a gap: the reset at the partition's end closes it
            w.write(data)
            await w.drain()
        for x in pair:
            x.transport.abort()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
