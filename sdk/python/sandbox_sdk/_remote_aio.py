# SPDX-License-Identifier: Apache-2.0
"""The asyncio flavour of remote mode: AsyncRemoteSandbox has RemoteSandbox's calls as
coroutines (docs/sdk.md, "Remote mode").

Each call runs the threaded client's (_remote.py) on a worker thread (asyncio.to_thread), so
the two flavours speak the protocol through one implementation. Output callbacks may be
coroutine functions: the worker thread hands each to the event loop and waits for it, so
they run on the loop, in order. Cancelling a run kills its command.
"""

import asyncio
import functools
import inspect

from . import _calls as c
from ._remote import RemoteSandbox


def _on_loop(callback, loop):
    """A callback for the worker thread: a coroutine it returns runs on `loop`, awaited."""
    if callback is None:
        return None

    def cb(text):
        r = callback(text)
        if inspect.isawaitable(r):
            asyncio.run_coroutine_threadsafe(_awaited(r), loop).result()
    return cb


async def _awaited(aw):
    return await aw


async def _thread(fn, *args, **kw):
    return await asyncio.get_running_loop().run_in_executor(
        None, functools.partial(fn, *args, **kw))


class AsyncRemoteCommandHandle:
    def __init__(self, handle):
        self._h = handle

    pid = property(lambda self: self._h.pid)
    done = property(lambda self: self._h.done)
    command_id = property(lambda self: self._h.command_id)
    stdout = property(lambda self: self._h.stdout)
    stderr = property(lambda self: self._h.stderr)

    async def wait(self, timeout=None):
        return await _thread(self._h.wait, timeout)

    async def kill(self, sig=9):
        return await _thread(self._h.kill, sig)

    async def send_stdin(self, data):
        await _thread(self._h.send_stdin, data)

    async def close_stdin(self):
        await _thread(self._h.close_stdin)


class AsyncRemoteFiles:
    def __init__(self, files):
        self._f = files

    def __getattr__(self, name):
        fn = getattr(self._f, name)
        if name.startswith("_") or not callable(fn):
            raise AttributeError(name)
        return functools.partial(_thread, fn)


class AsyncRemoteSandbox:
    """RemoteSandbox's calls as coroutines."""

    def __init__(self, sandbox):
        self._sb = sandbox
        self.files = AsyncRemoteFiles(sandbox.files)

    @classmethod
    async def create(cls, *args, **kw):
        return cls(await _thread(RemoteSandbox.create, *args, **kw))

    @classmethod
    async def connect(cls, *args, **kw):
        return cls(await _thread(RemoteSandbox.connect, *args, **kw))

    @classmethod
    async def restore(cls, *args, **kw):
        return cls(await _thread(RemoteSandbox.restore, *args, **kw))

    @staticmethod
    async def remove_snapshot(*args, **kw):
        await _thread(RemoteSandbox.remove_snapshot, *args, **kw)

    id = property(lambda self: self._sb.id)
    name = property(lambda self: self._sb.name)
    image = property(lambda self: self._sb.image)

    def __getattr__(self, name):
        if name in ("snapshot", "suspend", "resume", "stop", "start", "status", "kill",
                    "close", "refresh", "fork", "pause", "ping"):
            return functools.partial(_thread, getattr(self._sb, name))
        raise AttributeError(name)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await _thread(self._sb.close)

    async def run(self, cmd, on_stdout=None, on_stderr=None, timeout=None, background=False,
                  check=True, max_output=c.OUTPUT_MAX, **kw):
        if kw.get("stdin") is True and not background:
            raise ValueError("stdin=True needs background=True (then send_stdin); give the "
                             "bytes to feed instead")
        loop = asyncio.get_running_loop()
        h = await _thread(self._sb.run, cmd, _on_loop(on_stdout, loop),
                          _on_loop(on_stderr, loop), timeout, background=True, check=check,
                          max_output=max_output, **kw)
        handle = AsyncRemoteCommandHandle(h)
        if background:
            return handle
        try:
            return await asyncio.shield(handle.wait(
                None if timeout is None else timeout + c.TIMEOUT_GRACE))
        except asyncio.CancelledError:
            await _thread(h.kill)
            raise
        except TimeoutError:
            await _thread(h.kill)
            return await handle.wait(5.0)

    async def reconnect(self, command_id, on_stdout=None, on_stderr=None, **kw):
        loop = asyncio.get_running_loop()
        return AsyncRemoteCommandHandle(await _thread(
            self._sb.reconnect, command_id, _on_loop(on_stdout, loop),
            _on_loop(on_stderr, loop), **kw))
