# SPDX-License-Identifier: Apache-2.0
"""A command in a remote sandbox: one command session of the service's {D}/execute/ws
(../shared/LANGSMITH-API.md 4.2 and 5; docs/sdk.md, "Remote mode").

A RemoteCall owns its session by its command_id. It sends `execute` once; a socket that drops
before `started` is re-issued with the same id (the service attaches to the command that id
already names, never starts a second), one that drops after it is reattached with `reconnect`
from the byte offsets received so far, so nothing is lost or repeated. Reattaching gives up
after RECONNECT_TRIES failures in a row (a `started` or a chunk resets the count), with the
LangSmith clients' backoff; after a kill, at most RECONNECT_TRIES more sockets in all (a
service that never sends the exit cannot keep us reattaching). `input`, `close_stdin` and
`kill` go on the current socket, once the service said `started`.

Bounds: a message is at most 1 MiB (_ws.py); what a result keeps of each stream is
`max_output` (the rest still reaches the callbacks); a socket silent for PING_AFTER seconds is
pinged, and one silent for SILENT_MAX is taken as dropped and reattached.
"""

import errno
import json
import math
import socket
import threading
import time
import uuid

from . import _calls as c
from ._ws import Closed, HandshakeError, WebSocketError
from .errors import (CommandTimeoutError, ConnectionLostError, SandboxError,
                     SandboxNotFoundError, ServiceError, agent_error, printable)

RECONNECT_TRIES = 5      # failures in a row before a reattach gives up (as the JS client)
RECONNECT_BUDGET = 120.0  # seconds of re-issues of an execute before `started`
PING_AFTER = 30.0        # seconds of silence before we ping (as the Python client)
SILENT_MAX = 60.0        # seconds of silence, ping unanswered, that count as a drop
INPUT_CHUNK = 64 << 10   # bytes of one input frame (far below the 1 MiB message bound)
KILL_WAIT = 10.0         # seconds kill() waits for the exit


class RemoteCall:
    """One command session: its streams, offsets, pid and outcome."""

    def __init__(self, sandbox, frame, command, on_stdout, on_stderr, max_output,
                 command_id=None):
        self._sb = sandbox
        self._frame = frame  # the execute frame (None: attach to an existing command)
        self._command = command
        self.command_id = command_id or uuid.uuid4().hex
        self.out = c._Stream(on_stdout, max_output)
        self.err = c._Stream(on_stderr, max_output)
        self.offsets = {"stdout": 0, "stderr": 0}
        self.pid = None
        self.exit_code = None
        self.error = None
        self.timed_out = False
        self.callback_error = None
        self.started_at = time.monotonic()
        self._ws = None
        self._send_lock = threading.Lock()
        self._ended = threading.Event()
        self._started = threading.Event()  # the first `started` came (or the call ended)
        self._killed = False
        self._progress = False

    @property
    def done(self):
        return self._ended.is_set()

    # ---- the session's loop ----

    def run(self):
        """Drive the session until it ends (exit, error, or the service lost): on the caller's
        thread for a blocking run, on a thread of its own for a background one."""
        try:
            self._loop()
        except BaseException as e:  # the caller's exception (KeyboardInterrupt): kill it
            if not isinstance(e, SandboxError):
                self._kill_quietly()
            if self.error is None:
                self.error = e if isinstance(e, SandboxError) else ConnectionLostError(
                    "the command's stream stopped: %r" % (e,))
            if not isinstance(e, SandboxError):
                raise
        finally:
            ws, self._ws = self._ws, None
            if ws is not None:
                ws.close()
            self._ended.set()
            self._started.set()

    def _loop(self):
        first, fails, begun, killed_drops = self._frame, 0, time.monotonic(), 0
        while True:
            attach = first is None or self.pid is not None
            msg = ({"type": "reconnect", "command_id": self.command_id,
                    "stdout_offset": self.offsets["stdout"],
                    "stderr_offset": self.offsets["stderr"]} if attach else first)
            try:
                ws = self._sb._ws_connect()
            except HandshakeError as e:
                if e.status in (500, 502, 503, 504) and fails < RECONNECT_TRIES:
                    fails = self._backoff(fails)
                    continue
                raise self._sb._ws_refused(e) from None
            except WebSocketError:
                if fails >= RECONNECT_TRIES or self._killed:
                    raise
                fails = self._backoff(fails)
                continue
            going_away = False
            try:
                # (published after the first frame: the service takes input after it)
                with self._send_lock:
                    ws.send_text(json.dumps(msg))
                    if self._killed:  # a kill() while no socket was up: say it again
                        ws.send_text('{"type":"kill"}')
                    self._ws = ws
                if self._read(ws, attach):
                    return
                why = "the stream ended without an exit"
            except Closed as e:
                why = "closed with %d" % e.code
                going_away = e.code == 1001  # the service restarts or hands off
            except (WebSocketError, socket.timeout) as e:
                why = str(e) or "no answer"
            with self._send_lock:
                self._ws = None
            ws.abort()
            if self._progress:  # a started or a chunk since the last drop
                self._progress, fails = False, 0
            if self._killed:  # after a kill, only RECONNECT_TRIES more sockets in all
                killed_drops += 1
                if killed_drops > RECONNECT_TRIES:
                    raise ConnectionLostError("%s: no exit after kill, %d sockets later (last:"
                                              " %s)" % (self.command_id, killed_drops, why))
            if self.pid is None and time.monotonic() - begun > RECONNECT_BUDGET:
                raise ConnectionLostError("%s: the service never started it (%s)" %
                                          (self.command_id, why))
            if fails >= RECONNECT_TRIES:
                raise ConnectionLostError("%s: the stream broke %d times in a row (last: %s)"
                                          % (self.command_id, fails, why))
            # (after a 1001, at once: the service asked us to come back)
            fails = fails + 1 if going_away else self._backoff(fails)

    @staticmethod
    def _backoff(fails):
        time.sleep(min(0.5 * 2 ** fails, 8.0))
        return fails + 1

    def _read(self, ws, attach):
        """Frames until exit or error (True), or a clean close mid-stream (False)."""
        silent = 0.0
        first = True
        while True:
            try:
                op, data = ws.recv(PING_AFTER)
            except socket.timeout:
                silent += PING_AFTER
                if silent >= SILENT_MAX:
                    raise WebSocketError("no frame and no pong for %.0f s" % silent)
                ws.ping()
                continue
            silent = 0.0
            if op != 1:  # pongs, and binary frames the protocol does not use
                continue
            try:
                m = json.loads(data)
            except ValueError:
                raise WebSocketError("a frame that is not JSON: %r" % data[:80]) from None
            if not isinstance(m, dict):
                continue
            kind = m.get("type")
            if first and kind not in ("started", "error"):
                raise ServiceError("expected 'started', got %r" % printable(str(kind)[:40]))
            first = False
            if kind == "started":
                pid = m.get("pid")
                self.pid = pid if isinstance(pid, int) else self.pid or 0
                self._progress = True
                self._started.set()
            elif kind in ("stdout", "stderr"):
                self._chunk(kind, m)
            elif kind == "exit":
                code = m.get("exit_code")
                if not isinstance(code, int):
                    raise ServiceError("an exit frame without an exit_code")
                self.exit_code = code
                return True
            elif kind == "error":
                self._error(m, attach)
                return True

    def _chunk(self, kind, m):
        text, off = m.get("data"), m.get("offset", 0)
        if not isinstance(text, str) or not isinstance(off, int) or off < 0:
            raise ServiceError("a %s frame without its data or offset" % kind)
        data = text.encode("utf-8", "surrogatepass")
        have = self.offsets[kind]
        if off + len(data) <= have:  # all of it replayed
            return
        if off < have:
            data = data[have - off:]
            off = have
        self.offsets[kind] = off + len(data)
        self._progress = True
        try:
            (self.out if kind == "stdout" else self.err).add(data)
        except Exception as e:  # a callback's: kept for the result, the stream goes on
            if self.callback_error is None:
                self.callback_error = e

    def _error(self, m, attach):
        etype = str(m.get("error_type") or "CommandError")
        msg = printable(str(m.get("error") or etype))[:1000]
        if etype == "CommandTimeout":
            self.timed_out = True
        elif attach and etype in ("CommandNotFound", "SessionExpired"):
            self.error = SandboxNotFoundError("command %s: %s" % (self.command_id, msg))
        elif etype == "CommandNotFound":
            self.error = agent_error(errno.ENOENT, msg)
        else:
            self.error = ServiceError(msg, 0, etype)

    # ---- what a handle sends ----

    def send(self, msg):
        """A frame on the current socket; ConnectionLostError if there is none now."""
        data = json.dumps(msg)
        with self._send_lock:
            ws = self._ws
            if ws is None or self.done:
                raise ConnectionLostError("%s: no stream to the command now (it ended, or "
                                          "it is being reattached)" % self.command_id)
            ws.send_text(data)

    def send_input(self, data):
        if isinstance(data, (bytes, bytearray, memoryview)):
            try:
                data = bytes(data).decode("utf-8")
            except UnicodeDecodeError:
                raise ValueError("remote stdin is text: the API's input frame carries "
                                 "UTF-8 only") from None
        for i in range(0, len(data), INPUT_CHUNK // 4):
            self.send({"type": "input", "data": data[i:i + INPUT_CHUNK // 4]})

    def kill(self):
        """Kill the command's process group (False if it had ended); waits for its exit."""
        if self.done:
            return False
        self._killed = True
        try:
            self.send({"type": "kill"})
        except ConnectionLostError:
            pass  # the loop says it again on its next socket
        self._ended.wait(KILL_WAIT)
        return True

    def _kill_quietly(self):
        self._killed = True
        try:
            self.send({"type": "kill"})
        except Exception:
            pass

    def wait(self, timeout):
        return self._ended.wait(timeout)

    def wait_started(self, timeout):
        """Until the service said `started` (or the call ended): input sent before it would
        reach no process yet."""
        return self._started.wait(timeout)

    def result(self, check):
        """The CommandResult, or the exception to raise for it (as _calls.ExecCall's)."""
        if self.callback_error is not None:
            raise self.callback_error
        if self.error is not None:
            raise self.error
        code = self.exit_code if self.exit_code is not None else 137
        res = c.CommandResult(self._command, code, self.out.buf, self.err.buf,
                              code - 128 if 128 < code < 160 and self._killed else 0,
                              self.timed_out, self.out.truncated or self.err.truncated,
                              time.monotonic() - self.started_at)
        if self.timed_out:
            raise CommandTimeoutError(res, "%s: timed out after %.1f s and was killed" %
                                      (printable(res.command), res.duration))
        if check and code == 127:
            from .errors import CommandNotFoundError
            why = printable(res.stderr.strip()[:200])
            raise CommandNotFoundError(res, "%s: command not found%s" % (
                printable(res.command), ": " + why if why else ""))
        if check and code != 0:
            from .errors import CommandExitError
            raise CommandExitError(res)
        return res


def execute_frame(command, env, cwd, user, timeout, pty, stdin_open, command_id):
    """The `execute` frame of run()'s arguments: user (with env and cwd) goes as run_config,
    since the API takes a user only there and refuses run_config beside env or cwd."""
    if not isinstance(command, str):
        from .errors import RemoteUnsupportedError
        raise RemoteUnsupportedError(
            "run(argv list or None): not available in remote mode (the API's execute takes "
            "a shell command line); give the command as one string (shlex.join(argv))")
    if timeout is not None and timeout <= 0:
        raise ValueError("timeout: give seconds > 0")
    f = {"type": "execute", "command": command,
         "timeout_seconds": 0 if timeout is None else max(1, math.ceil(timeout)),
         "shell": "/bin/sh", "idle_timeout_seconds": 300, "kill_on_disconnect": False,
         "ttl_seconds": 600, "command_id": command_id}
    envd = {}
    for k, v in (env or {}).items():
        if not k or "=" in k:
            raise ValueError("env: %r is not a variable name" % (k,))
        envd[k] = str(v)
    if user is not None:
        rc = {"user": str(user)}
        if envd:
            rc["env_vars"] = envd
        if cwd is not None:
            rc["work_dir"] = cwd
        f["run_config"] = rc
    else:
        if envd:
            f["env"] = envd
        if cwd is not None:
            f["cwd"] = cwd
    if pty:
        f["pty"] = True
    if not stdin_open and not pty:
        f["close_stdin"] = True
    return f
