"""A TCP proxy on loopback between the workers and PostgreSQL that can stall: paused, it
stops forwarding bytes both ways (and holds new connections) without closing anything, as a
network partition does; resumed, the queued bytes flow again. The workers' fencing must
then refuse whatever they report for leases that expired meanwhile. Cut, it drops every
connection and closes new ones at once, as a server that went away does; mended, it
forwards again."""

from __future__ import annotations

import asyncio
import socket
import threading

CHUNK = 65536


class StallProxy:
    def __init__(self, upstream_host: str, upstream_port: int):
        self.upstream = (upstream_host, upstream_port)
        self.loop = asyncio.new_event_loop()
        self._flowing: asyncio.Event | None = None
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0
        self.connections = 0
        self._cut = False
        self._thread = threading.Thread(target=self.loop.run_forever, name="chaos-proxy",
                                        daemon=True)

    def start(self) -> int:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self.loop).result(10)
        return self.port

    async def _listen(self):
        self._flowing = asyncio.Event()
        self._flowing.set()
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self._server = await asyncio.start_server(self._serve, sock=sock)
        self.port = sock.getsockname()[1]

    async def _pump(self, reader, writer):
        try:
            while True:
                data = await reader.read(CHUNK)
                if not data:
                    break
                # A pause holds the bytes already read here until the resume: none is lost,
                # none is delivered meanwhile.
                await self._flowing.wait()
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            try:
                writer.close()
            except (ConnectionError, OSError, RuntimeError):
                pass

    async def _serve(self, client_reader, client_writer):
        self.connections += 1
        if self._cut:
            client_writer.close()
            return
        await self._flowing.wait()
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            client_writer.close()
            return
        self._writers.update((client_writer, up_writer))
        try:
            await asyncio.gather(self._pump(client_reader, up_writer),
                                 self._pump(up_reader, client_writer))
        finally:
            self._writers.difference_update((client_writer, up_writer))

    def _call(self, fn):
        self.loop.call_soon_threadsafe(fn)

    def pause(self) -> None:
        self._call(self._flowing.clear)

    def resume(self) -> None:
        self._call(self._flowing.set)

    def cut(self) -> None:
        """Returns once every connection is dropped."""
        async def drop():
            self._cut = True
            for w in list(self._writers):
                w.close()

        asyncio.run_coroutine_threadsafe(drop(), self.loop).result(5)

    def mend(self) -> None:
        async def forward():
            self._cut = False

        asyncio.run_coroutine_threadsafe(forward(), self.loop).result(5)

    def close(self) -> None:
        if not self.loop.is_running():
            return

        async def shut():
            self._flowing.set()
            if self._server is not None:
                self._server.close()
            for w in list(self._writers):
                w.close()
            # Connections still being served (or accepted a moment ago, their pumps not yet
            # started) end here, not with the loop: a pump never started would be reported
            # as a coroutine never awaited.
            serving = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in serving:
                task.cancel()
            await asyncio.gather(*serving, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(shut(), self.loop).result(5)
        except Exception:  # noqa: BLE001 - closing at exit must not mask the run's outcome
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self.loop.close()
