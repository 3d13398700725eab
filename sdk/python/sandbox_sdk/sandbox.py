# SPDX-License-Identifier: Apache-2.0
"""Sandbox: one microVM sandbox, driven from Python (docs/sdk.md).

    with Sandbox.create(image="debian", network="none") as sb:
        r = sb.run("echo hello; uname -r", on_stdout=print)
        sb.files.write("/tmp/x.py", "print(6 * 7)\\n")
        print(sb.run(["python3", "/tmp/x.py"]).stdout)

Lifecycle calls (create, restore, fork, snapshot, suspend, kill) go through sandboxctl, the
one implementation of the host's state (_host.py says why); everything else speaks to the
sandbox's sockets directly over one kept connection (_conn.py).
"""

import signal as _signal
import threading
import time

from . import _calls as c
from . import _host as h
from . import _wire as w
from ._conn import AgentConnection, api_call
from ._http import env_url
from ._remote import RemoteSandbox
from .errors import SandboxError, SandboxStateError


class CommandHandle:
    """A command started with run(..., background=True)."""

    def __init__(self, sandbox, conn, call, check):
        self._sb, self._conn, self._call, self._check = sandbox, conn, call, check

    @property
    def pid(self):
        """Its pid in the guest (None until the agent said STARTED)."""
        return self._call.pid

    @property
    def stdout(self):
        return bytes(self._call.out.buf).decode("utf-8", "replace")

    @property
    def stderr(self):
        return bytes(self._call.err.buf).decode("utf-8", "replace")

    @property
    def done(self):
        return self._call.done

    def wait(self, timeout=None):
        """Its CommandResult once it ends (raises as run() does); TimeoutError if it runs on
        past `timeout` seconds (it keeps running)."""
        if not self._conn.wait(self._call, timeout):
            raise TimeoutError("%s: still running after %s s" %
                               (c.command_text(self._call._command), timeout))
        return self._call.result(self._check)

    def kill(self, sig=_signal.SIGKILL):
        """Send `sig` (default SIGKILL) to its process group. False if it had ended."""
        return self._sb._signal(self._call, sig)

    def send_stdin(self, data):
        """Bytes (or str) to its stdin; needs run(..., stdin=True). Sent on the command's
        own connection: ConnectionLostError if that is gone."""
        data = data.encode() if isinstance(data, str) else bytes(data)
        for i in range(0, len(data), c.WRITE_CHUNK):
            self._send(w.MSG_STDIN, data[i:i + c.WRITE_CHUNK])

    def close_stdin(self):
        self._send(w.MSG_STDIN_CLOSE)

    def _send(self, msg_type, payload=b""):
        if self._call.done:
            raise SandboxError("%s has ended" % c.command_text(self._call._command))
        self._conn.send(msg_type, self._call.id, payload)


class Files:
    """sb.files: the guest's files, over the agent connection."""

    def __init__(self, sandbox):
        self._sb = sandbox

    def write(self, path, data, mode=0o644, user=None):
        """Write `data` (bytes, str, or a binary file object read to its end) to `path`,
        atomically (a temporary file renamed at the end), with permission bits `mode`;
        `user` (as run's) owns it."""
        conn = self._sb._conn_ok()
        ids = self._sb._user(user) or (w.PROTO_ID_KEEP, w.PROTO_ID_KEEP, None)
        call = conn.start(c.SimpleCall(), w.MSG_FILE_WRITE,
                          w.file_write_payload(path, mode, ids[0], ids[1]))
        for chunk in c.write_chunks(data):
            if call.done:  # refused at once: later frames would be ignored
                break
            conn.send(w.MSG_DATA, call.id, chunk)
        if not call.done:
            conn.send(w.MSG_END, call.id)
        self._sb._finish(call, 60.0)

    def read(self, path, text=False, max_bytes=None):
        """The file's bytes (str with text=True): a regular file up to the size its lstat
        gives, a symlink or a file whose size reads 0 (/proc's) up to 64 MiB, never more than
        `max_bytes` (default 256 MiB); anything else is refused. On a connection of its own,
        so a guest that sends more than it said loses that one, not the sandbox's."""
        with AgentConnection(self._sb._info.vsock) as conn:
            st = c.entry_from_stat(path, conn.call(c.SimpleCall(w.MSG_STAT_REPLY), w.MSG_STAT,
                                                   w.path_payload(path)).reply[1])
            limit, timeout = c.read_plan(path, st, max_bytes)
            call = conn.call(c.ReadCall(path, limit), w.MSG_FILE_READ, w.path_payload(path),
                             timeout)
        return call.data.decode("utf-8", "replace") if text else bytes(call.data)

    def stat(self, path):
        """EntryInfo of `path` (lstat: a symlink is not followed)."""
        call = self._sb._conn_ok().call(c.SimpleCall(w.MSG_STAT_REPLY), w.MSG_STAT,
                                        w.path_payload(path))
        return c.entry_from_stat(path, call.reply[1])

    def exists(self, path):
        try:
            self.stat(path)
            return True
        except FileNotFoundError:
            return False

    def list(self, path):
        """The entries of a directory, as EntryInfo ("." and ".." left out)."""
        return self._sb._conn_ok().call(c.ListCall(path), w.MSG_LIST,
                                        w.path_payload(path)).entries

    def make_dir(self, path, mode=0o755, parents=True):
        self._sb._conn_ok().call(c.SimpleCall(), w.MSG_MKDIR,
                                 w.mkdir_payload(path, mode, parents))

    def remove(self, path, recursive=False):
        self._sb._conn_ok().call(c.SimpleCall(), w.MSG_REMOVE,
                                 w.remove_payload(path, recursive))


class Sandbox:
    """A sandbox. Sandbox.create/restore and fork give one this object owns: leaving its
    `with` block (or kill()) removes it. Sandbox.connect attaches to one that exists; close()
    then only drops the connection."""

    def __init__(self, info, owned=False, sandboxctl=None):
        self._info = info
        self._owned = owned
        self._ctl = sandboxctl
        self._conn = None
        self._defaults = None
        self._passwd = None
        self._lock = threading.Lock()
        self.files = Files(self)

    # ---- lifecycle ----

    @classmethod
    def create(cls, image=None, cpus=None, memory=None, network=None, name=None, timeout=60,
               ttl=None, disk_size=None, cold=False, sandboxctl=None, api_url=None,
               api_key=None, **remote):
        """A new sandbox (sandboxctl create: a warm create restores the image's ready
        snapshot). network: "proxy" (default: the egress proxy's default policy), "none",
        or a policy {"allow": [...], "deny": [...], "deny_all": True, ...}. With api_url (or
        $SANDBOX_API_URL) and api_key, a RemoteSandbox of that service (_remote.py)."""
        if env_url(api_url):
            return RemoteSandbox.create(image, cpus, memory, network, name, timeout, ttl,
                                        disk_size, cold, api_url, api_key, **remote)
        if remote:
            raise TypeError("%s: remote mode's only (give api_url)" % ", ".join(remote))
        args = h.create_args(image, cpus, memory, network, name, timeout, ttl, disk_size, cold)
        out = h.ctl(args, sandboxctl, timeout=(timeout or 60) + 60)
        return cls(h.resolve(out[-1]), owned=True, sandboxctl=sandboxctl)

    @classmethod
    def connect(cls, ref, sandboxctl=None, api_url=None, api_key=None):
        """The existing sandbox of id, unique id prefix or name (SandboxNotFoundError)."""
        if env_url(api_url):
            return RemoteSandbox.connect(ref, api_url, api_key)
        return cls(h.resolve(ref), owned=False, sandboxctl=sandboxctl)

    @classmethod
    def restore(cls, snapshot, name=None, sandboxctl=None, api_url=None, api_key=None):
        """A new sandbox going on from snapshot `snapshot`'s moment."""
        if env_url(api_url):
            return RemoteSandbox.restore(snapshot, name, api_url, api_key)
        args = ["restore"] + (["--name", name] if name else []) + [snapshot]
        out = h.ctl(args, sandboxctl, timeout=180)
        return cls(h.resolve(out[-1]), owned=True, sandboxctl=sandboxctl)

    def fork(self, n=1):
        """`n` copies of this running sandbox, each with its own disk layer and identity
        (its RNG reseeded, its clock stepped); this one runs on."""
        out = h.ctl(["fork", "-n", int(n), self.id], self._ctl, timeout=120 + 30 * int(n))
        return [Sandbox(h.resolve(i), owned=True, sandboxctl=self._ctl) for i in out]

    def snapshot(self, name):
        """Snapshot this sandbox as `name` (memory, devices, disk); it runs on."""
        h.ctl(["snapshot", self.id, name], self._ctl, timeout=300)
        return name

    @staticmethod
    def remove_snapshot(name, sandboxctl=None, api_url=None, api_key=None):
        """Remove snapshot `name` (refused while a sandbox or snapshot depends on it)."""
        if env_url(api_url):
            return RemoteSandbox.remove_snapshot(name, api_url, api_key)
        h.ctl(["snapshot", "rm", name], sandboxctl, timeout=60)

    def pause(self):
        """Park the vCPUs: a paused sandbox uses no CPU. Its connection stays open."""
        self._api(w.API_PAUSE)

    def resume(self):
        """Run a paused sandbox again, or bring a suspended one back."""
        if h.state(self._info) == "suspended":
            h.ctl(["resume", self.id], self._ctl, timeout=180)
            return
        self._api(w.API_RESUME)

    def suspend(self):
        """Snapshot to disk and end the VMM: no memory, no CPU until resume()."""
        self._drop_conn()
        h.ctl(["suspend", self.id], self._ctl, timeout=300)

    def status(self):
        """running, paused, suspended, stopped or dead."""
        st = h.state(self._info)
        if st:
            return st
        try:
            err, status = api_call(self._info.api, w.API_STATUS, 2.0)
        except SandboxError:
            return "dead"
        return status["state"] if not err and status else "dead"

    def kill(self):
        """Remove the sandbox: its VM ends, its directory and disk go."""
        self._drop_conn()
        h.ctl(["rm", "-f", self.id], self._ctl, timeout=60)
        self._owned = False

    def close(self):
        """Drop the connection; remove the sandbox if this object owns it."""
        if self._owned:
            self.kill()
        self._drop_conn()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    id = property(lambda self: self._info.id)
    name = property(lambda self: self._info.name)
    image = property(lambda self: self._info.image)

    def __repr__(self):
        return "Sandbox(%r)" % self.id

    # ---- commands ----

    def run(self, cmd, on_stdout=None, on_stderr=None, timeout=None, env=None, cwd=None,
            user=None, stdin=None, background=False, check=True, max_output=c.OUTPUT_MAX):
        """Run `cmd` (a shell command line for sh -c, or an argv list; None: the image's
        entrypoint) and return its CommandResult. Output goes to on_stdout/on_stderr (str
        chunks) as it is produced, on the thread that waits (for a background command nobody
        waits for, on the connection's pump thread). timeout
        (seconds) kills its process group: CommandTimeoutError. check: a non-zero status
        raises CommandExitError (127: CommandNotFoundError). stdin: bytes/str to feed it
        (then EOF), or True with background=True to use send_stdin. background=True returns
        a CommandHandle at once."""
        if stdin is True and not background:
            raise ValueError("stdin=True needs background=True (then send_stdin); give the "
                             "bytes to feed instead")
        ids = self._user(user)
        text, payload = c.exec_request(self._exec_defaults(), cmd, env, cwd, ids, timeout,
                                       stdin is not None, False)
        call = c.ExecCall(text, on_stdout, on_stderr, max_output)
        conn = self._conn_ok()
        conn.start(call, w.MSG_EXEC, payload, background=background)
        handle = CommandHandle(self, conn, call, check)
        limit = None if timeout is None else timeout + c.TIMEOUT_GRACE
        try:
            if stdin is not None and stdin is not True:
                handle.send_stdin(stdin)
                handle.close_stdin()
            if background:
                return handle
            ended = conn.wait(call, limit)
            if not ended:  # the agent did not end it: we do, and stop waiting soon after
                kill = self._kill_quietly(call)
                conn.wait(call, 5.0)
                conn.forget(call)
                if kill is not None:
                    conn.forget(kill)
        except BaseException:  # KeyboardInterrupt and friends: the command goes too
            if not call.done:
                self._kill_quietly(call)
                conn.forget(call)
            raise
        return call.result(check, timed_out=not ended)

    def ping(self):
        """The guest's uptime in ms, over the agent connection."""
        call = self._conn_ok().call(c.SimpleCall(w.MSG_PONG), w.MSG_PING, timeout=10.0)
        return int.from_bytes(call.reply[1][:8], "little")

    # ---- internals ----

    def _conn_ok(self):
        conn = self._conn
        if conn is not None and conn.alive:  # the common case, without the lock
            return conn
        with self._lock:
            if self._conn is not None and self._conn.alive:
                return self._conn
            st = h.state(self._info)
            if st:
                raise SandboxStateError("%s is %s" % (self.id, st))
            if self._conn is not None:
                self._conn.close()
            self._conn = AgentConnection(self._info.vsock)
            return self._conn

    def _drop_conn(self):
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _exec_defaults(self):
        if self._defaults is None:
            self._defaults = h.ExecDefaults(self._info)
        return self._defaults

    def _user(self, user):
        if user is None:
            return None
        if not c.needs_passwd(user):
            return c.parse_user(user)
        if self._passwd is not None:  # a user added since the last lookup: read again
            try:
                return c.parse_user(user, *self._passwd)
            except SandboxError:
                pass
        group = ""
        if self.files.exists("/etc/group"):
            group = self.files.read("/etc/group", text=True, max_bytes=1 << 20)
        self._passwd = (self.files.read("/etc/passwd", text=True, max_bytes=1 << 20), group)
        return c.parse_user(user, *self._passwd)

    def _finish(self, call, timeout):
        conn = call.conn
        if not conn.wait(call, timeout):
            conn.forget(call)
            raise SandboxError("the agent did not answer in %.0f s" % timeout)
        if call.error is not None:
            raise call.error

    def _signal(self, call, sig):
        """SIGNAL on the command's own connection, waiting for the answer: False if it had
        ended."""
        if call.done:
            return False
        try:
            call.conn.call(c.SimpleCall(), w.MSG_SIGNAL,
                           w.signal_payload(call.id, c.signal_number(sig)), 10.0)
        except SandboxError as e:
            if c.no_such_errno(e) or call.done:
                return False
            raise
        return True

    @staticmethod
    def _kill_quietly(call):
        """SIGKILL without waiting for the answer and without raising: for the paths that
        already have their own outcome (a timeout, an interrupt)."""
        try:
            return call.conn.start(c.SimpleCall(), w.MSG_SIGNAL,
                                   w.signal_payload(call.id, _signal.SIGKILL))
        except Exception:
            return None

    def _api(self, req):
        st = h.state(self._info)
        if st:
            raise SandboxStateError("%s is %s" % (self.id, st))
        err, _ = api_call(self._info.api, req)
        if err:
            import os
            raise SandboxError("%s: the VMM refused: %s" % (self.id, os.strerror(-err)))


def wait_all(handles, timeout=None):
    """Wait for several background commands; their results in order."""
    end = None if timeout is None else time.monotonic() + timeout
    return [hd.wait(None if end is None else max(0.0, end - time.monotonic()))
            for hd in handles]
