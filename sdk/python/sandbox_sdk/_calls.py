# SPDX-License-Identifier: Apache-2.0
"""The calls on an agent connection, apart from how frames travel: what a call sends, and
the state machine that takes the agent's frames for it until the final one. The threaded
client (sandbox.py) and the asyncio one (aio.py) share these, so both read the protocol the
same way.

Everything the guest sends is bounded here: the output a command's result keeps
(`max_output`, the rest still goes to the callbacks), the bytes a file read takes (the size
the guest's STAT gave, or READ_UNSIZED_MAX for files whose size reads 0), the entries of a
listing (LIST_MAX).
"""

import codecs
import errno
import re
import shlex
import time

from . import _wire as w
from .errors import (CommandExitError, CommandNotFoundError, CommandTimeoutError,
                     SandboxError, agent_error, printable)

OUTPUT_MAX = 64 << 20        # bytes of each stream a CommandResult keeps by default
READ_UNSIZED_MAX = 64 << 20  # as sandboxctl cp's CP_UNSIZED_MAX
LIST_MAX = 1 << 20           # entries of one directory listing
LIST_BYTES = 64 << 20        # bytes of names in one listing
NAME_MAX = 255               # bytes of one name (Linux's NAME_MAX)
READ_MAX = 256 << 20         # bytes a read keeps in memory unless max_bytes says otherwise
WRITE_CHUNK = 256 << 10      # DATA frames of a file write, as sandboxctl cp's


class CommandResult:
    """A finished command: exit_code, stdout and stderr (str; *_bytes raw), signal (the one
    that killed it, 0 if none), timed_out, truncated (output beyond max_output was not kept),
    duration (seconds)."""

    def __init__(self, command, exit_code, stdout, stderr, signal=0, timed_out=False,
                 truncated=False, duration=0.0):
        self._command = command
        self.exit_code = exit_code
        self.stdout_bytes = bytes(stdout)
        self.stderr_bytes = bytes(stderr)
        self.signal = signal
        self.timed_out = timed_out
        self.truncated = truncated
        self.duration = duration

    @property
    def command(self):
        """The command as given: its shell line, or its argv quoted as a shell would."""
        return command_text(self._command)

    @property
    def stdout(self):
        return self.stdout_bytes.decode("utf-8", "replace")

    @property
    def stderr(self):
        return self.stderr_bytes.decode("utf-8", "replace")

    @property
    def ok(self):
        return self.exit_code == 0

    def __repr__(self):
        return "CommandResult(%r, exit_code=%d)" % (self.command, self.exit_code)


def command_text(cmd):
    return cmd if isinstance(cmd, str) else shlex.join(cmd)


class EntryInfo:
    """A file in the guest: name, path, size, mode, uid, gid, mtime; is_dir, is_file,
    is_symlink."""

    def __init__(self, path, name, size, mtime, mode, uid, gid):
        self.path, self.name = path, name
        self.size, self.mtime, self.mode, self.uid, self.gid = size, mtime, mode, uid, gid

    is_dir = property(lambda self: self.mode & 0o170000 == 0o040000)
    is_file = property(lambda self: self.mode & 0o170000 == 0o100000)
    is_symlink = property(lambda self: self.mode & 0o170000 == 0o120000)

    def __repr__(self):
        return "EntryInfo(%r, size=%d, mode=%o)" % (self.path, self.size, self.mode)


class Call:
    """One call: `feed` takes each of its frames and says when the final one came; then
    `error` is an exception or None."""

    def __init__(self):
        self.id = 0
        self.error = None
        self.done = False
        self.overrun = False  # the agent sent beyond this call's bounds
        self.callbacks = False  # feed runs the caller's code

    final = (w.MSG_OK,)  # the frame that ends this call when it succeeds

    def feed(self, msg_type, payload):
        final = msg_type in w.FINAL
        if msg_type == w.MSG_ERROR:
            self.error = agent_error(*w.parse_error(payload))
        elif final and msg_type not in self.final:
            # another call's answer: the agent is confused or hostile; this stream is over
            self.error = SandboxError("the agent ended a call with frame type %d" % msg_type)
            self.overrun = True
        else:
            self.take(msg_type, payload)
        # A call whose frames broke its bounds ends now, and so does the connection: an agent
        # that sends beyond what it said may go on sending (sandboxctl cp stops so too).
        self.done = final or self.overrun
        return self.done

    def take(self, msg_type, payload):
        pass

    def fail(self, exc):
        if not self.done:
            self.error, self.done = exc, True


class SimpleCall(Call):
    """A call answered by one final frame: OK, or `final` (PONG, STAT_REPLY)."""

    def __init__(self, final=w.MSG_OK):
        super().__init__()
        self.final = (final,)

    def take(self, msg_type, payload):
        self.reply = (msg_type, payload)


class ReadCall(Call):
    """FILE_READ: DATA frames up to `limit` bytes, then END."""

    final = (w.MSG_END,)

    def __init__(self, path, limit):
        super().__init__()
        self.path, self.limit, self.data = path, limit, bytearray()

    def take(self, msg_type, payload):
        if msg_type == w.MSG_DATA and self.error is None:
            if len(self.data) + len(payload) > self.limit:
                self.error = SandboxError("%s: the guest sent more than the %d bytes its size "
                                          "said: stopped" % (self.path, self.limit))
                self.overrun = True
                return
            self.data += payload


class ListCall(Call):
    """LIST: DIRENT frames, then END. At most LIST_MAX entries and LIST_BYTES of names, each
    a plain name (no "/", NUL, "", "." or ".."; at most NAME_MAX bytes): a name from the
    guest that could climb out of a directory a caller copies into is refused."""

    final = (w.MSG_END,)

    def __init__(self, path):
        super().__init__()
        self.path, self.entries, self.bytes = path.rstrip("/") or "/", [], 0

    def _refuse(self, why):
        self.error = SandboxError("%s: %s" % (self.path, why))
        self.overrun = True

    def take(self, msg_type, payload):
        if msg_type != w.MSG_DIRENT or self.error is not None:
            return
        size, mtime, mode, uid, gid, raw = w.parse_stat(payload)
        self.bytes += len(raw)
        if len(self.entries) >= LIST_MAX or self.bytes > LIST_BYTES:
            return self._refuse("more than %d entries or %d bytes of names" %
                                (LIST_MAX, LIST_BYTES))
        if (not raw or len(raw) > NAME_MAX or b"/" in raw or b"\0" in raw or
                raw in (b".", b"..")):
            return self._refuse("the guest listed an entry named %r" % printable(
                raw[:64].decode("utf-8", "replace")))
        name = raw.decode("utf-8", "replace")
        full = self.path + "/" + name if self.path != "/" else "/" + name
        self.entries.append(EntryInfo(full, name, size, mtime, mode, uid, gid))


def write_chunks(data):
    """A file write's DATA payloads: of bytes or str, or of a binary file object read to its
    end, WRITE_CHUNK bytes each."""
    if isinstance(data, str):
        data = data.encode()
    if isinstance(data, (bytes, bytearray, memoryview)):
        view = memoryview(data)
        return (bytes(view[i:i + WRITE_CHUNK]) for i in range(0, len(view), WRITE_CHUNK))
    return iter(lambda: data.read(WRITE_CHUNK), b"")


def read_plan(path, st, max_bytes):
    """(byte limit, timeout) of a read of `path` whose lstat is `st`, as sandboxctl cp takes
    it: a regular file up to its size; a symlink (its size is its target's name) or a file
    whose size reads 0 (/proc's) up to READ_UNSIZED_MAX; anything else refused. And never
    more than max_bytes (default READ_MAX): what the guest says is a claim, not a bound."""
    cap = READ_MAX if max_bytes is None else max_bytes
    if st.is_file and st.size:
        if st.size > cap:
            raise SandboxError("%s: %d bytes, more than max_bytes=%d" % (path, st.size, cap))
        limit = st.size
    elif st.is_file or st.is_symlink:
        limit = min(READ_UNSIZED_MAX, cap)
    else:
        raise SandboxError("%s is not a regular file (mode %o)" % (path, st.mode))
    return limit, min(60.0 + limit / (1 << 20), 3600.0)


def entry_from_stat(path, payload):
    size, mtime, mode, uid, gid, _ = w.parse_stat(payload)
    return EntryInfo(path, path.rstrip("/").rsplit("/", 1)[-1] or "/", size, mtime, mode, uid,
                     gid)


class _Stream:
    """One output stream: kept up to `cap` bytes, decoded incrementally for the callback."""

    def __init__(self, callback, cap):
        self.callback, self.cap = callback, cap
        self.buf = bytearray()
        self.truncated = False
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace") if callback else None

    def add(self, data):
        room = self.cap - len(self.buf)
        if room >= len(data):
            self.buf += data
        else:
            self.buf += data[:max(room, 0)]
            self.truncated = True
        if self.callback is not None:
            text = self.decoder.decode(data)
            if text:
                self.callback(text)


class ExecCall(Call):
    """EXEC: STARTED, STDOUT/STDERR as produced (to the callbacks, and kept up to
    max_output), EXIT."""

    final = (w.MSG_EXIT,)

    def __init__(self, command, on_stdout, on_stderr, max_output):
        super().__init__()
        self._command = command  # a shell line or an argv list (command_text renders it)
        self.callbacks = on_stdout is not None or on_stderr is not None
        self.out = _Stream(on_stdout, max_output)
        self.err = _Stream(on_stderr, max_output)
        self.pid = None
        self.exit = None
        self.started_at = time.monotonic()
        self.callback_error = None

    def take(self, msg_type, payload):
        try:
            if msg_type == w.MSG_STDOUT:
                self.out.add(payload)
            elif msg_type == w.MSG_STDERR:
                self.err.add(payload)
        except Exception as e:  # a callback's: kept for wait(), the stream goes on
            if self.callback_error is None:
                self.callback_error = e
        if msg_type == w.MSG_STARTED:
            self.pid = w.parse_started(payload)
        elif msg_type == w.MSG_EXIT:
            self.exit = w.parse_exit(payload)

    def result(self, check, timed_out=False):
        """The CommandResult, or the exception to raise for it."""
        if self.callback_error is not None:
            raise self.callback_error
        if self.error is not None:
            raise self.error
        code, signo, flags = self.exit if self.exit else (137, 9, 0)
        timed_out = timed_out or bool(flags & w.EXIT_TIMED_OUT)
        res = CommandResult(self._command, code, self.out.buf, self.err.buf, signo, timed_out,
                            self.out.truncated or self.err.truncated,
                            time.monotonic() - self.started_at)
        if timed_out:
            raise CommandTimeoutError(res, "%s: timed out after %.1f s and was killed" %
                                      (printable(res.command), res.duration))
        if check and code == 127:
            why = printable(res.stderr.strip()[:200])
            raise CommandNotFoundError(res, "%s: command not found%s" % (
                printable(res.command), ": " + why if why else ""))
        if check and code != 0:
            raise CommandExitError(res)
        return res


def parse_user(user, passwd=None, group=None):
    """(uid, gid, home or None) for user=: an int uid, "UID[:GID]", "root", or a name looked
    up in the guest's /etc/passwd text (and a ":GROUP" in /etc/group)."""
    if user is None:
        return None
    if isinstance(user, int):
        return user, user, None
    name, _, grp = str(user).partition(":")
    uid = gid = home = None
    if _DIGITS.match(name):
        uid = int(name)
    elif name == "root":
        uid, gid, home = 0, 0, "/root"
    else:
        for line in (passwd or "").split("\n"):
            f = line.split(":")
            if len(f) >= 6 and f[0] == name and _DIGITS.match(f[2]) and _DIGITS.match(f[3]):
                uid, gid = int(f[2]), int(f[3])
                home = f[5] if f[5].startswith("/") and "\0" not in f[5] else None
                break
        else:
            raise SandboxError("user %r: not in the guest's /etc/passwd" % name)
    if _DIGITS.match(grp):
        gid = int(grp)
    elif grp:
        for line in (group or "").split("\n"):
            f = line.split(":")
            if len(f) >= 3 and f[0] == grp and _DIGITS.match(f[2]):
                gid = int(f[2])
                break
        else:
            raise SandboxError("group %r: not in the guest's /etc/group" % grp)
    if gid is None:
        gid = uid
    if not (0 <= uid < 0xFFFFFFFF and 0 <= gid < 0xFFFFFFFF):
        raise ValueError("user %r: uid and gid must be below 4294967295" % (user,))
    return uid, gid, home


def needs_passwd(user):
    if user is None or isinstance(user, int):
        return False
    name, _, grp = str(user).partition(":")
    return not (_DIGITS.match(name) or name == "root") or bool(grp and not _DIGITS.match(grp))


def exec_request(defaults, cmd, env, cwd, user, timeout, stdin, pty):
    """(the command for messages, EXEC payload) for run()'s arguments over the sandbox's
    defaults. cmd is a shell command line (run by sh -c) or an argv list; None runs the
    image's entrypoint + cmd."""
    if cmd is None:
        argv = defaults.entrypoint + defaults.cmd
        if not argv:
            raise ValueError("this sandbox's image has no entrypoint or cmd: give a command")
    elif isinstance(cmd, str):
        argv = ["/bin/sh", "-c", cmd]
    else:
        argv = [str(a) for a in cmd]
    text = cmd if isinstance(cmd, str) else argv
    timeout_ms = 0
    if timeout is not None:
        if timeout <= 0:
            raise ValueError("timeout: give seconds > 0")
        timeout_ms = max(1, int(timeout * 1000))
    if user is None and not env and not pty:  # the sandbox's own defaults: encoded once
        block, uid, gid = defaults.block()
        return text, w.exec_payload(argv, None, cwd if cwd is not None else defaults.cwd, uid,
                                    gid, timeout_ms, stdin=stdin, block=block)
    envd, uid, gid = defaults.environment(user)
    if pty:
        envd.setdefault("TERM", "xterm")
    for k, v in (env or {}).items():
        if not k or "=" in k:
            raise ValueError("env: %r is not a variable name" % (k,))
        envd[k] = str(v)
    payload = w.exec_payload(argv, ["%s=%s" % kv for kv in envd.items()],
                             cwd if cwd is not None else defaults.cwd, uid, gid, timeout_ms,
                             stdin=stdin, pty=pty)
    return text, payload


_DIGITS = re.compile(r"[0-9]{1,10}\Z")

# Beyond the agent's own timeout, how long a run waits for its EXIT (as exec.c's grace).
TIMEOUT_GRACE = 15.0


def signal_number(sig):
    import signal as _signal
    if isinstance(sig, str):
        name = sig.upper()
        return int(getattr(_signal, name if name.startswith("SIG") else "SIG" + name))
    return int(sig)


def no_such_errno(exc):
    return getattr(exc, "errno", None) == errno.ESRCH
