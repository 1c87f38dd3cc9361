"""A small threaded TCP proxy for the tests: it forwards connections to PostgreSQL until told to
stall, and then forwards nothing more without closing either side.

That is how a connection dies without a FIN: a NAT or a load balancer drops its state, a cable is
pulled. Both ends keep an open socket, writes still succeed (the proxy's kernel acknowledges them),
and nothing ever arrives. ``stall()`` black-holes every connection open at that moment for good,
and every new one until ``resume()`` (a new connection is accepted, then never answered, as a
silent network treats a new handshake); after ``resume()`` new connections are forwarded again.
"""

from __future__ import annotations

import selectors
import socket
import threading


class _Pair:
    """One client connection and its upstream, forwarded both ways until black-holed."""

    def __init__(self, client: socket.socket, upstream: socket.socket | None) -> None:
        self.client = client
        self.upstream = upstream
        self.dead = upstream is None

    def close(self) -> None:
        for sock in (self.client, self.upstream):
            if sock is not None:
                sock.close()


class StallingProxy:
    """Forwards 127.0.0.1:``port`` to ``target`` (host, port) until ``stall()``."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._server.getsockname()[1]
        self._lock = threading.Lock()
        self._pairs: list[_Pair] = []
        self._stalled = False
        self._closed = threading.Event()
        #: How many connections the proxy accepted, forwarded or not.
        self.accepted = 0
        self._threads = [threading.Thread(target=self._accept, name="test-proxy-accept", daemon=True)]
        self._threads[0].start()

    def stall(self) -> None:
        """Stop forwarding: every open connection for good, new ones until resume()."""
        with self._lock:
            self._stalled = True
            for pair in self._pairs:
                pair.dead = True

    def resume(self) -> None:
        """Forward new connections again (the stalled ones stay silent)."""
        with self._lock:
            self._stalled = False

    def close(self) -> None:
        """Close the proxy and every connection through it."""
        self._closed.set()
        self._server.close()
        for thread in self._threads:
            thread.join(timeout=5)
        with self._lock:
            for pair in self._pairs:
                pair.close()

    def _accept(self) -> None:
        self._server.settimeout(0.1)
        while not self._closed.is_set():
            try:
                client, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self.accepted += 1
                stalled = self._stalled
            upstream = None if stalled else socket.create_connection(self.target)
            pair = _Pair(client, upstream)
            with self._lock:
                self._pairs.append(pair)
            if upstream is not None:
                thread = threading.Thread(target=self._forward, args=(pair,), name="test-proxy", daemon=True)
                self._threads.append(thread)
                thread.start()

    def _forward(self, pair: _Pair) -> None:
        assert pair.upstream is not None
        peers = {pair.client: pair.upstream, pair.upstream: pair.client}
        with selectors.DefaultSelector() as selector:
            for sock in peers:
                selector.register(sock, selectors.EVENT_READ)
            while not self._closed.is_set():
                ready = selector.select(0.1)
                # Checked after the wait: once stalled, nothing more is read, so whatever either
                # side sends stays unanswered in the proxy's buffers.
                if pair.dead:
                    return
                for key, _ in ready:
                    source = key.fileobj
                    assert isinstance(source, socket.socket)
                    try:
                        data = source.recv(65536)
                        if data:
                            peers[source].sendall(data)
                            continue
                    except OSError:
                        pass
                    # A side closed (FIN or reset): close both, as a proxy does.
                    pair.close()
                    return
