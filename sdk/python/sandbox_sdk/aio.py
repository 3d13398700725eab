# SPDX-License-Identifier: Apache-2.0
"""The asyncio flavour: AsyncSandbox has Sandbox's calls as coroutines.

    async with await AsyncSandbox.create(network="none") as sb:
        r = await sb.run("echo hi", on_stdout=print)

The agent connection is an asyncio stream with one reader task that hands frames to their
calls (the same state machines as the threaded client, _calls.py); lifecycle calls run
sandboxctl as asyncio subprocesses. Output callbacks may be plain functions or coroutine
functions (awaited in order on the reader task).
"""

import asyncio
import inspect
import os
import signal as _signal

from . import _calls as c
from . import _host as h
from . import _wire as w
from ._conn import SEND_STALL
from ._http import env_url
from ._remote_aio import AsyncRemoteSandbox
from .errors import ConnectionLostError, SandboxError, SandboxStateError, printable


async def _ctl(args, sandboxctl=None, timeout=None):
    argv = [h.sandboxctl_path(sandboxctl)] + [str(a) for a in args]
    p = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL,
                                             stdout=asyncio.subprocess.PIPE,
                                             stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(p.communicate(), timeout)
    except asyncio.TimeoutError as e:
        p.kill()
        await p.wait()
        raise SandboxError("sandboxctl %s: no answer in %s s" % (args[0], timeout)) from e
    if p.returncode != 0:
        raise h.ctl_error(args, p.returncode, err)
    return out.decode("utf-8", "replace").split()


class _AsyncConnection:
    """AgentConnection's asyncio twin (_conn.py says what the connection is)."""

    @classmethod
    async def open(cls, vsock_path, timeout=10.0):
        self = cls()
        try:
            frames = await asyncio.wait_for(self._handshake(vsock_path), timeout)
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError,
                w.ProtocolError) as e:
            if getattr(self, "_w", None) is not None:
                self._w.close()
            raise ConnectionLostError("cannot reach the agent through %s: %s" %
                                      (vsock_path, str(e) or "no answer in %s s" % timeout)) from e
        except BaseException:
            if getattr(self, "_w", None) is not None:
                self._w.close()
            raise
        self._calls, self._next_id, self._dead = {}, 1, None
        self._task = asyncio.get_running_loop().create_task(self._read_loop(frames))
        return self

    async def _handshake(self, vsock_path):
        """CONNECT 52 and HELLO; the frames that came behind the agent's HELLO."""
        self._w = None
        self._r, self._w = await asyncio.open_unix_connection(vsock_path)
        self._w.write(b"CONNECT %d\n" % w.PROTO_VSOCK_PORT)
        line = b""
        while not line.endswith(b"\n"):  # bounded, a byte at a time: no frame byte taken
            if len(line) >= 64:
                raise ConnectionLostError("the VMM's answer to CONNECT has no end")
            line += await self._r.readexactly(1)
        if not line.startswith(b"OK "):
            raise ConnectionLostError("the VMM answered CONNECT with %r" % line[:32])
        self._w.write(w.hello())
        self._dec = w.Decoder()
        while True:
            data = await self._r.read(4096)
            if not data:
                raise ConnectionLostError("the agent closed the connection at HELLO")
            frames = self._dec.feed(data)
            if frames:
                w.check_hello(frames[0][0], frames[0][2])
                return frames[1:]

    def start(self, call, msg_type, payload=b""):
        if asyncio.current_task() is self._task:
            raise SandboxError("a command's output callback cannot call its sandbox (the "
                               "frames it would wait for are behind it): queue the work")
        if self._dead is not None:
            raise self._dead
        call.event = asyncio.Event()
        call.conn = self
        call.id, self._next_id = self._next_id, self._next_id + 1
        self._calls[call.id] = call
        self.send(msg_type, call.id, payload)
        return call

    def send(self, msg_type, call_id, payload=b""):
        if self._dead is not None:
            raise self._dead
        self._w.write(w.frame(msg_type, call_id, payload))

    async def drain(self):
        """Wait until the agent took what we wrote; SEND_STALL seconds at most, as the
        threaded client's send."""
        try:
            await asyncio.wait_for(self._w.drain(), SEND_STALL)
        except asyncio.TimeoutError as e:
            self._die(ConnectionLostError("the agent took nothing we sent for %.0f s" %
                                          SEND_STALL))
            raise self._dead from e
        except OSError as e:
            self._die(ConnectionLostError("the agent connection broke: %s" % e))
            raise self._dead from e

    async def call(self, call, msg_type, payload=b"", timeout=60.0):
        self.start(call, msg_type, payload)
        await self.drain()
        await self.finish(call, timeout)
        return call

    async def finish(self, call, timeout):
        try:
            await asyncio.wait_for(call.event.wait(), timeout)
        except asyncio.TimeoutError:
            self._calls.pop(call.id, None)
            raise SandboxError("the agent did not answer in %.0f s" % timeout) from None
        if call.error is not None:
            raise call.error

    async def _dispatch(self, frames):
        for msg_type, call_id, payload in frames:
            if call_id == 0:
                if msg_type == w.MSG_ERROR:
                    raise w.ProtocolError("the agent closed the connection: %s" %
                                          printable(w.parse_error(payload)[1]))
                continue
            call = self._calls.get(call_id)
            if call is None:
                continue
            done = call.feed(msg_type, payload)
            pending = getattr(call, "pending", None)
            if pending:  # coroutine callbacks, awaited in order
                call.pending = []
                for coro in pending:
                    try:
                        await coro
                    except (Exception, asyncio.CancelledError) as e:  # kept for wait()
                        if self._dead is not None:
                            raise
                        if isinstance(e, asyncio.CancelledError):
                            e = SandboxError("an output callback of %s was cancelled" %
                                             c.command_text(call._command))
                        call.callback_error = call.callback_error or e
            if done:
                self._calls.pop(call_id, None)
                call.event.set()
                if call.overrun:
                    raise ConnectionLostError("the agent overran a call: connection dropped")

    async def _read_loop(self, early):
        try:
            await self._dispatch(early)
            while True:
                data = await self._r.read(256 << 10)
                if not data:
                    raise ConnectionLostError("the agent closed the connection")
                await self._dispatch(self._dec.feed(data))
        except w.ProtocolError as e:
            self._die(ConnectionLostError("the agent broke the protocol: %s" % e))
        except ConnectionLostError as e:
            self._die(e)
        except OSError as e:
            self._die(ConnectionLostError("the agent connection broke: %s" % e))
        except BaseException as e:  # cancelled, or a callback's SystemExit: no silent death
            self._die(ConnectionLostError("the connection's reader stopped: %r" % (e,)))
            raise

    def _die(self, exc):
        if self._dead is None:
            self._dead = exc
        calls, self._calls = list(self._calls.values()), {}
        for call in calls:
            call.fail(self._dead)
            call.event.set()
        self._w.close()  # the agent sees the end too (and kills what this connection ran)

    @property
    def alive(self):
        return self._dead is None

    async def close(self):
        self._die(ConnectionLostError("the connection was closed"))
        self._task.cancel()
        self._w.close()
        try:
            await self._w.wait_closed()
        except OSError:
            pass


async def _api_call(api_path, req_type, timeout=5.0):
    try:
        r, wr = await asyncio.wait_for(asyncio.open_unix_connection(api_path), timeout)
        try:
            wr.write(w.api_request(req_type, 1))
            hdr = await asyncio.wait_for(r.readexactly(w.API_HDR_LEN), timeout)
            length = w.api_reply_header(hdr, req_type, 1)
            return w.api_reply(await asyncio.wait_for(r.readexactly(length), timeout))
        finally:
            wr.close()
    except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, w.ProtocolError) as e:
        raise ConnectionLostError("the VMM's api.sock does not answer: %s" % e) from e


def _wrap(callback, call_ref):
    """A callback for the state machine: coroutine results are queued for the reader task."""
    if callback is None:
        return None

    def cb(text):
        r = callback(text)
        if inspect.isawaitable(r):
            call_ref[0].pending = getattr(call_ref[0], "pending", None) or []
            call_ref[0].pending.append(r)
    return cb


class AsyncCommandHandle:
    def __init__(self, sandbox, call, check):
        self._sb, self._call, self._check = sandbox, call, check

    pid = property(lambda self: self._call.pid)
    stdout = property(lambda self: bytes(self._call.out.buf).decode("utf-8", "replace"))
    stderr = property(lambda self: bytes(self._call.err.buf).decode("utf-8", "replace"))
    done = property(lambda self: self._call.event.is_set())

    async def wait(self, timeout=None):
        try:
            await asyncio.wait_for(asyncio.shield(self._call.event.wait()), timeout)
        except asyncio.TimeoutError:
            raise TimeoutError("%s: still running after %s s" %
                               (c.command_text(self._call._command), timeout)) from None
        return self._call.result(self._check)

    async def kill(self, sig=_signal.SIGKILL):
        return await self._sb._signal(self._call, sig)

    async def send_stdin(self, data):
        """On the command's own connection (ConnectionLostError if that is gone)."""
        data = data.encode() if isinstance(data, str) else bytes(data)
        for i in range(0, len(data), c.WRITE_CHUNK):
            await self._send(w.MSG_STDIN, data[i:i + c.WRITE_CHUNK])

    async def close_stdin(self):
        await self._send(w.MSG_STDIN_CLOSE)

    async def _send(self, msg_type, payload=b""):
        if self._call.event.is_set():
            raise SandboxError("%s has ended" % c.command_text(self._call._command))
        self._call.conn.send(msg_type, self._call.id, payload)
        await self._call.conn.drain()


class AsyncFiles:
    def __init__(self, sandbox):
        self._sb = sandbox

    async def write(self, path, data, mode=0o644, user=None):
        """As Files.write: bytes, str, or a binary file object read to its end."""
        conn = await self._sb._conn_ok()
        ids = await self._sb._user(user) or (w.PROTO_ID_KEEP, w.PROTO_ID_KEEP, None)
        call = conn.start(c.SimpleCall(), w.MSG_FILE_WRITE,
                          w.file_write_payload(path, mode, ids[0], ids[1]))
        for chunk in c.write_chunks(data):
            if call.event.is_set():
                break
            conn.send(w.MSG_DATA, call.id, chunk)
            await conn.drain()
        if not call.event.is_set():
            conn.send(w.MSG_END, call.id)
            await conn.drain()
        await conn.finish(call, 60.0)

    async def read(self, path, text=False, max_bytes=None):
        """As Files.read, on a connection of its own."""
        conn = await _AsyncConnection.open(self._sb._info.vsock)
        try:
            st = c.entry_from_stat(path, (await conn.call(
                c.SimpleCall(w.MSG_STAT_REPLY), w.MSG_STAT, w.path_payload(path))).reply[1])
            limit, timeout = c.read_plan(path, st, max_bytes)
            call = await conn.call(c.ReadCall(path, limit), w.MSG_FILE_READ,
                                   w.path_payload(path), timeout)
        finally:
            await conn.close()
        return call.data.decode("utf-8", "replace") if text else bytes(call.data)

    async def stat(self, path):
        conn = await self._sb._conn_ok()
        call = await conn.call(c.SimpleCall(w.MSG_STAT_REPLY), w.MSG_STAT, w.path_payload(path))
        return c.entry_from_stat(path, call.reply[1])

    async def exists(self, path):
        try:
            await self.stat(path)
            return True
        except FileNotFoundError:
            return False

    async def list(self, path):
        conn = await self._sb._conn_ok()
        return (await conn.call(c.ListCall(path), w.MSG_LIST, w.path_payload(path))).entries

    async def make_dir(self, path, mode=0o755, parents=True):
        conn = await self._sb._conn_ok()
        await conn.call(c.SimpleCall(), w.MSG_MKDIR, w.mkdir_payload(path, mode, parents))

    async def remove(self, path, recursive=False):
        conn = await self._sb._conn_ok()
        await conn.call(c.SimpleCall(), w.MSG_REMOVE, w.remove_payload(path, recursive))


class AsyncSandbox:
    """Sandbox's calls as coroutines (sandbox.py documents each)."""

    def __init__(self, info, owned=False, sandboxctl=None):
        self._info, self._owned, self._ctl = info, owned, sandboxctl
        self._conn = None
        self._defaults = None
        self._passwd = None
        self._lock = asyncio.Lock()
        self.files = AsyncFiles(self)

    @classmethod
    async def create(cls, image=None, cpus=None, memory=None, network=None, name=None,
                     timeout=60, ttl=None, disk_size=None, cold=False, sandboxctl=None,
                     api_url=None, api_key=None, **remote):
        if env_url(api_url):  # remote mode: an AsyncRemoteSandbox (_remote_aio.py)
            return await AsyncRemoteSandbox.create(image, cpus, memory, network, name,
                                                   timeout, ttl, disk_size, cold, api_url,
                                                   api_key, **remote)
        if remote:
            raise TypeError("%s: remote mode's only (give api_url)" % ", ".join(remote))
        args = h.create_args(image, cpus, memory, network, name, timeout, ttl, disk_size, cold)
        out = await _ctl(args, sandboxctl, (timeout or 60) + 60)
        return cls(h.resolve(out[-1]), True, sandboxctl)

    @classmethod
    async def connect(cls, ref, sandboxctl=None, api_url=None, api_key=None):
        if env_url(api_url):
            return await AsyncRemoteSandbox.connect(ref, api_url, api_key)
        return cls(h.resolve(ref), False, sandboxctl)

    @classmethod
    async def restore(cls, snapshot, name=None, sandboxctl=None, api_url=None, api_key=None):
        if env_url(api_url):
            return await AsyncRemoteSandbox.restore(snapshot, name, api_url, api_key)
        args = ["restore"] + (["--name", name] if name else []) + [snapshot]
        out = await _ctl(args, sandboxctl, 180)
        return cls(h.resolve(out[-1]), True, sandboxctl)

    @staticmethod
    async def remove_snapshot(name, sandboxctl=None, api_url=None, api_key=None):
        if env_url(api_url):
            return await AsyncRemoteSandbox.remove_snapshot(name, api_url, api_key)
        await _ctl(["snapshot", "rm", name], sandboxctl, 60)

    async def fork(self, n=1):
        out = await _ctl(["fork", "-n", int(n), self.id], self._ctl, 120 + 30 * int(n))
        return [AsyncSandbox(h.resolve(i), True, self._ctl) for i in out]

    async def snapshot(self, name):
        await _ctl(["snapshot", self.id, name], self._ctl, 300)
        return name

    async def pause(self):
        await self._api(w.API_PAUSE)

    async def resume(self):
        if h.state(self._info) == "suspended":
            await _ctl(["resume", self.id], self._ctl, 180)
            return
        await self._api(w.API_RESUME)

    async def suspend(self):
        await self._drop_conn()
        await _ctl(["suspend", self.id], self._ctl, 300)

    async def status(self):
        st = h.state(self._info)
        if st:
            return st
        try:
            err, status = await _api_call(self._info.api, w.API_STATUS, 2.0)
        except SandboxError:
            return "dead"
        return status["state"] if not err and status else "dead"

    async def kill(self):
        await self._drop_conn()
        await _ctl(["rm", "-f", self.id], self._ctl, 60)
        self._owned = False

    async def close(self):
        if self._owned:
            await self.kill()
        await self._drop_conn()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    id = property(lambda self: self._info.id)
    name = property(lambda self: self._info.name)
    image = property(lambda self: self._info.image)

    async def run(self, cmd, on_stdout=None, on_stderr=None, timeout=None, env=None, cwd=None,
                  user=None, stdin=None, background=False, check=True,
                  max_output=c.OUTPUT_MAX):
        if stdin is True and not background:
            raise ValueError("stdin=True needs background=True (then send_stdin); give the "
                             "bytes to feed instead")
        ids = await self._user(user)
        text, payload = c.exec_request(self._exec_defaults(), cmd, env, cwd, ids, timeout,
                                       stdin is not None, False)
        ref = [None]
        call = c.ExecCall(text, _wrap(on_stdout, ref), _wrap(on_stderr, ref), max_output)
        ref[0] = call
        conn = await self._conn_ok()
        conn.start(call, w.MSG_EXEC, payload)
        handle = AsyncCommandHandle(self, call, check)
        limit = None if timeout is None else timeout + c.TIMEOUT_GRACE
        ended = True
        try:
            await conn.drain()
            if stdin is not None and stdin is not True:
                await handle.send_stdin(stdin)
                await handle.close_stdin()
            if background:
                return handle
            try:
                await asyncio.wait_for(asyncio.shield(call.event.wait()), limit)
            except asyncio.TimeoutError:  # the agent did not end it: we do, and stop soon
                ended = False
                self._kill_quietly(call)
                try:
                    await asyncio.wait_for(call.event.wait(), 5.0)
                except asyncio.TimeoutError:
                    pass
                conn._calls.pop(call.id, None)
        except BaseException:  # cancelled: the command goes too
            if not call.event.is_set():
                self._kill_quietly(call)
                conn._calls.pop(call.id, None)
            raise
        return call.result(check, timed_out=not ended)

    @staticmethod
    def _kill_quietly(call):
        try:
            call.conn.start(c.SimpleCall(), w.MSG_SIGNAL,
                            w.signal_payload(call.id, _signal.SIGKILL))
        except Exception:
            pass

    async def ping(self):
        conn = await self._conn_ok()
        call = await conn.call(c.SimpleCall(w.MSG_PONG), w.MSG_PING, timeout=10.0)
        return int.from_bytes(call.reply[1][:8], "little")

    async def _conn_ok(self):
        async with self._lock:
            if self._conn is not None and self._conn.alive:
                return self._conn
            st = h.state(self._info)
            if st:
                raise SandboxStateError("%s is %s" % (self.id, st))
            if self._conn is not None:
                await self._conn.close()
            self._conn = await _AsyncConnection.open(self._info.vsock)
            return self._conn

    async def _drop_conn(self):
        async with self._lock:
            if self._conn is not None:
                await self._conn.close()
                self._conn = None

    def _exec_defaults(self):
        if self._defaults is None:
            self._defaults = h.ExecDefaults(self._info)
        return self._defaults

    async def _user(self, user):
        if c.needs_passwd(user):
            if self._passwd is None:
                group = ""
                if await self.files.exists("/etc/group"):
                    group = await self.files.read("/etc/group", True, 1 << 20)
                self._passwd = (await self.files.read("/etc/passwd", True, 1 << 20), group)
            return c.parse_user(user, *self._passwd)
        return c.parse_user(user)

    async def _signal(self, call, sig):
        if call.event.is_set():
            return False
        conn = call.conn
        try:
            await conn.call(c.SimpleCall(), w.MSG_SIGNAL,
                            w.signal_payload(call.id, c.signal_number(sig)), 10.0)
        except SandboxError as e:
            if c.no_such_errno(e):
                return False
            raise
        return True

    async def _api(self, req):
        st = h.state(self._info)
        if st:
            raise SandboxStateError("%s is %s" % (self.id, st))
        err, _ = await _api_call(self._info.api, req)
        if err:
            raise SandboxError("%s: the VMM refused: %s" % (self.id, os.strerror(-err)))


async def wait_all(handles, timeout=None):
    """Wait for several background commands; their results in order."""
    return list(await asyncio.wait_for(asyncio.gather(*(h.wait() for h in handles)), timeout))
