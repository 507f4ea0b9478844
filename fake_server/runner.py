"""Running a fake: in the current event loop, or in a background thread for sync code.

Example (async)::

    async with serve(FakeCreateOS()) as url:
        ...

Example (sync, e.g. with the official SDK)::

    with BackgroundServer(FakeCreateOS()) as server:
        client = createos.Client(api_key=server.call(server.fake.create_tenant),
                                 base_url=server.url)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, TypeVar

from aiohttp import web

from fake_server.fake import FakeCreateOS
from fake_server.http_protocol import harden_connections

__all__ = ["LOOPBACK", "BackgroundServer", "serve"]

LOOPBACK = "127.0.0.1"
_T = TypeVar("_T")


async def start_site(fake: FakeCreateOS, host: str, port: int) -> tuple[web.AppRunner, str]:
    """Start serving ``fake`` on ``host:port`` (port 0 picks a free one); returns the runner and
    the URL actually bound."""
    runner = web.AppRunner(fake.app(), access_log=None, handle_signals=False, shutdown_timeout=1.0)
    await runner.setup()
    harden_connections(runner, fake)
    site = web.TCPSite(runner, host, port, reuse_address=True)
    await site.start()
    bound_host, bound_port = runner.addresses[0][:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    return runner, f"http://{shown}:{bound_port}"


async def stop_site(fake: FakeCreateOS, runner: web.AppRunner) -> None:
    """Stop serving and end everything the fake still has running."""
    await _stop_accepting(runner)
    await runner.cleanup()
    fake.reset()
    await asyncio.sleep(0)


async def _stop_accepting(runner: web.AppRunner) -> None:
    """Accept no more connections, and let those accepted already join their server before
    the runner closes it (and then them)."""
    # asyncio sets an accepted connection up a loop turn after accepting it. One whose turn
    # came after its server had closed was neither served nor closed (the server refuses to
    # take it, and nothing says so): its client waited on a socket left open until garbage
    # collection. Accepting stops here; the turn below lets those accepted join.
    loop = asyncio.get_running_loop()
    for site in runner.sites:
        server = site._server
        if isinstance(server, asyncio.Server):
            for sock in server.sockets:
                with contextlib.suppress(NotImplementedError):  # a proactor loop (Windows)
                    loop.remove_reader(sock)
    await asyncio.sleep(0)


@contextlib.asynccontextmanager
async def serve(fake: FakeCreateOS, *, host: str = LOOPBACK, port: int = 0) -> AsyncIterator[str]:
    """Serve ``fake`` in the running event loop for the duration of the block; yields its URL."""
    runner, url = await start_site(fake, host, port)
    try:
        yield url
    finally:
        await stop_site(fake, runner)


class BackgroundServer:
    """A fake served by its own event loop in a daemon thread.

    State belongs to that loop: use :meth:`call` (or :meth:`run` for coroutines) to touch the
    fake from another thread, so no two threads ever change it at once.
    """

    def __init__(
        self, fake: FakeCreateOS | None = None, *, host: str = LOOPBACK, port: int = 0
    ) -> None:
        self.fake = fake or FakeCreateOS()
        self.host = host
        self.port = port
        self.url = ""
        self.loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    def start(self) -> BackgroundServer:
        """Start the thread and wait until the server answers."""
        started = threading.Event()
        failure: list[BaseException] = []

        def main() -> None:
            asyncio.set_event_loop(self.loop)
            try:
                self._runner, self.url = self.loop.run_until_complete(
                    start_site(self.fake, self.host, self.port)
                )
            except BaseException as exc:  # reported to the starting thread
                failure.append(exc)
                started.set()
                return
            started.set()
            try:
                self.loop.run_forever()
            finally:
                # Finish the loop on its own thread: the thread calling stop() may be running
                # an event loop of its own (an async test), where run_until_complete() fails.
                _cancel_leftovers(self.loop)
                self.loop.close()

        self._thread = threading.Thread(target=main, name="fake-createos", daemon=True)
        self._thread.start()
        started.wait()
        if failure:
            self._thread.join()
            self.loop.close()
            raise failure[0]
        return self

    def run(self, coroutine: Coroutine[Any, Any, _T], timeout: float | None = None) -> _T:
        """Run a coroutine on the server's loop and return its result (from another thread:
        on the server's own loop, where it would wait for itself forever, ``RuntimeError``)."""
        if self._on_loop_thread():
            coroutine.close()  # never awaited: close it, or Python warns about it
            raise RuntimeError(
                "BackgroundServer.run() was called on the server's own loop, which would wait "
                "for itself forever; await the coroutine there instead"
            )
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def call(self, function: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """Call ``function(*args, **kwargs)`` on the server's loop and return its result."""
        if self._on_loop_thread():
            return function(*args, **kwargs)
        # A plain callback, not a task: this is on every fixture's path, so keep it cheap.
        result: concurrent.futures.Future[_T] = concurrent.futures.Future()

        def invoke() -> None:
            try:
                result.set_result(function(*args, **kwargs))
            except BaseException as exc:  # handed to the calling thread
                result.set_exception(exc)

        self.loop.call_soon_threadsafe(invoke)
        return result.result()

    def _on_loop_thread(self) -> bool:
        return self._thread is not None and threading.current_thread() is self._thread

    def stop(self) -> None:
        """Stop serving, end the loop and join the thread."""
        if self._thread is None:
            return
        if self._runner is not None:
            self.run(stop_site(self.fake, self._runner))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self._thread = None

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _cancel_leftovers(loop: asyncio.AbstractEventLoop) -> None:
    pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())
