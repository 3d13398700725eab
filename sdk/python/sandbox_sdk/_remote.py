# SPDX-License-Identifier: Apache-2.0
"""RemoteSandbox: a sandbox of the sandbox service (sandboxd), driven over its HTTP API, the
LangSmith Sandboxes API (../shared/LANGSMITH-API.md 2-5; docs/sdk.md, "Remote mode").

The same calls as Sandbox (sandbox.py), with the same results and exceptions: lifecycle calls
are the control plane under {api_url}/api/v2/sandboxes (_http.py), commands the dataplane's
WebSocket (_remote_exec.py), files its /upload and /download (_remote_files.py). A local call
the API has no equivalent for (fork, pause, an argv command, a file's mode or owner) raises
RemoteUnsupportedError naming it.
"""

import signal as _signal
import threading
import time
import urllib.parse

from . import _calls as c
from ._http import Service, error_of
from ._remote_exec import RemoteCall, execute_frame
from ._remote_files import RemoteFiles
from ._ws import WebSocket
from .errors import (ConnectionLostError, RemoteUnsupportedError, SandboxError,
                     SandboxStateError, ServiceError)

READY_WAIT = 180.0      # seconds a start waits for `ready` (the LangSmith clients: 120)
SNAPSHOT_WAIT = 600.0   # seconds a capture waits for `ready` (theirs: 300)
POLL = 0.5              # seconds between two polls of a status
STARTED_WAIT = 180.0    # seconds a background run waits for `started` (a stopped box wakes)
# The API's statuses in the local SDK's words (docs/sdk.md): a stopped box keeps its memory
# in its snapshot and the next start (or any dataplane request) brings it back, as resume()
# does a suspended local one.
_STATUS = {"ready": "running", "stopped": "suspended"}


def _unsupported(what, why=""):
    raise RemoteUnsupportedError("%s: not available in remote mode (the service's API has no "
                                 "equivalent)%s" % (what, "; " + why if why else ""))


class RemoteCommandHandle:
    """A command started with run(..., background=True) in a remote sandbox: CommandHandle's
    calls, and `command_id` (a later reconnect(command_id) attaches to it)."""

    def __init__(self, call, check):
        self._call, self._check = call, check

    pid = property(lambda self: self._call.pid)
    done = property(lambda self: self._call.done)
    command_id = property(lambda self: self._call.command_id)
    stdout = property(lambda self: bytes(self._call.out.buf).decode("utf-8", "replace"))
    stderr = property(lambda self: bytes(self._call.err.buf).decode("utf-8", "replace"))

    def wait(self, timeout=None):
        if not self._call.wait(timeout):
            raise TimeoutError("%s: still running after %s s" %
                               (c.command_text(self._call._command), timeout))
        return self._call.result(self._check)

    def kill(self, sig=_signal.SIGKILL):
        """Kill its process group (SIGKILL: the API's kill has no other signal)."""
        if c.signal_number(sig) != _signal.SIGKILL:
            _unsupported("kill(sig=%s)" % sig, "the API's kill is SIGKILL of the process group")
        return self._call.kill()

    def send_stdin(self, data):
        """Text (or UTF-8 bytes) to its stdin; needs run(..., stdin=True)."""
        self._call.send_input(data)

    def close_stdin(self):
        self._call.send({"type": "close_stdin"})


class RemoteSandbox:
    """A sandbox of the service. RemoteSandbox.create gives one this object owns: leaving its
    `with` block (or kill()) deletes it; connect() attaches to one that exists."""

    def __init__(self, service, box, owned=False):
        self._svc, self._box, self._owned = service, box, owned
        self._lock = threading.Lock()
        self.files = RemoteFiles(self)

    # ---- lifecycle ----

    @classmethod
    def create(cls, image=None, cpus=None, memory=None, network=None, name=None, timeout=60,
               ttl=None, disk_size=None, cold=False, api_url=None, api_key=None, snapshot=None,
               idle_ttl=None, proxy_config=None, ssl_context=None):
        """A new sandbox of the service's default image, or of `snapshot` (its name or id).
        cpus, memory (MiB), disk_size (GiB, or "10G"), name, timeout (seconds to ready) as
        Sandbox.create; idle_ttl (seconds, a multiple of 60; 0: never stopped for idleness)
        and proxy_config (the API's) are the service's own."""
        if image is not None:
            _unsupported("create(image=%r)" % image, "the service boots its default image; "
                         "give snapshot= (a snapshot made from an image) instead")
        if ttl is not None:
            _unsupported("create(ttl=...)", "the API's sandboxes stop when idle (idle_ttl=) "
                         "and live until deleted")
        if cold:
            _unsupported("create(cold=True)")
        if network not in (None, "proxy"):
            _unsupported("create(network=%r)" % (network,), "a remote sandbox's egress is the "
                         "service's proxy, its rules proxy_config=")
        svc = Service(api_url, api_key, ssl_context)
        body = {"wait_for_ready": True, "timeout": int(timeout or 60)}
        if name is not None:
            body["name"] = name
        if snapshot is not None:
            body["snapshot_name"] = snapshot
        if cpus is not None:
            body["vcpus"] = int(cpus)
        if memory is not None:
            body["mem_bytes"] = int(memory) << 20
        if disk_size is not None:
            body["fs_capacity_bytes"] = _gib(disk_size) << 30
        if idle_ttl is not None:
            body["idle_ttl_seconds"] = int(idle_ttl)
        if proxy_config is not None:
            body["proxy_config"] = proxy_config
        box = svc.call("POST", "/boxes", body, what="snapshot", timeout=int(timeout or 60) + 30)
        return cls(svc, box, owned=True)

    @classmethod
    def connect(cls, ref, api_url=None, api_key=None, ssl_context=None):
        """The existing sandbox of that name or id (SandboxNotFoundError)."""
        svc = Service(api_url, api_key, ssl_context)
        return cls(svc, svc.call("GET", "/boxes/" + _q(ref)), owned=False)

    @classmethod
    def restore(cls, snapshot, name=None, api_url=None, api_key=None, ssl_context=None):
        """A new sandbox from snapshot `snapshot` (its name or id)."""
        return cls.create(name=name, snapshot=snapshot, api_url=api_url, api_key=api_key,
                          ssl_context=ssl_context, timeout=180)

    @staticmethod
    def remove_snapshot(name, api_url=None, api_key=None, ssl_context=None):
        Service(api_url, api_key, ssl_context).call("DELETE", "/snapshots/" + _q(name),
                                                    what="snapshot")

    def snapshot(self, name):
        """Capture this sandbox's disk as snapshot `name` and wait until it is ready; it runs
        on."""
        snap = self._svc.call("POST", "/boxes/%s/snapshot" % _q(self.id), {"name": name})
        sid = snap.get("id") if isinstance(snap, dict) else None
        if not isinstance(sid, str) or not sid:
            raise ServiceError("the capture's answer has no snapshot id")
        end = time.monotonic() + SNAPSHOT_WAIT
        while snap.get("status") not in ("ready", "failed"):
            if time.monotonic() > end:
                raise ServiceError("snapshot %s: not ready after %.0f s" % (name, SNAPSHOT_WAIT))
            time.sleep(POLL)
            snap = self._svc.call("GET", "/snapshots/" + _q(sid), what="snapshot")
        if snap["status"] == "failed":
            raise ServiceError("snapshot %s failed: %s" % (name, snap.get("status_message")), 0,
                               "SnapshotFailed")
        return name

    def fork(self, n=1):
        _unsupported("fork()", "snapshot() then create(snapshot=...)")

    def pause(self):
        _unsupported("pause()", "suspend() stops the sandbox keeping its memory")

    def ping(self):
        _unsupported("ping()")

    def suspend(self):
        """Stop it (the API's stop: its memory kept in its snapshot, its VMM ended) and wait
        until it is stopped."""
        self._svc.call("POST", "/boxes/%s/stop" % _q(self.id), {})
        self._wait_status("stopped")

    def resume(self):
        """Start a stopped sandbox and wait until it is ready."""
        self._svc.call("POST", "/boxes/%s/start" % _q(self.id), {})
        self._wait_status("ready")

    stop, start = suspend, resume

    def status(self):
        """running, suspended (the API's stopped), provisioning or failed."""
        st = self._svc.call("GET", "/boxes/%s/status" % _q(self.id)).get("status", "")
        return _STATUS.get(st, st)

    def refresh(self):
        """The sandbox's object as the service has it now (a dict)."""
        self._box = self._svc.call("GET", "/boxes/" + _q(self.id))
        return dict(self._box)

    def kill(self):
        """Delete the sandbox: its VM, its commands, its disk."""
        self._svc.call("DELETE", "/boxes/" + _q(self.id))
        self._owned = False

    def close(self):
        """Delete the sandbox if this object owns it; drop kept connections."""
        try:
            if self._owned:
                self.kill()
        finally:
            self._svc.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    id = property(lambda self: self._box.get("id", ""))
    name = property(lambda self: self._box.get("name", ""))
    image = property(lambda self: self._box.get("image") or self._box.get("snapshot_id") or "")

    def __repr__(self):
        return "RemoteSandbox(%r)" % self.name

    @staticmethod
    def list(api_url=None, api_key=None, ssl_context=None):
        """The workspace's sandboxes, as the service's objects (dicts)."""
        got = Service(api_url, api_key, ssl_context).call("GET", "/boxes")
        return list(got.get("sandboxes") or []) if isinstance(got, dict) else []

    # ---- commands ----

    def run(self, cmd, on_stdout=None, on_stderr=None, timeout=None, env=None, cwd=None,
            user=None, stdin=None, background=False, check=True, max_output=c.OUTPUT_MAX,
            pty=False, command_id=None):
        """As Sandbox.run, `cmd` a shell command line. pty=True runs it on a terminal (stdout
        and stderr merged); command_id names the command (a run with a known id attaches to
        it). stdin is text (or UTF-8 bytes): the API's input frames carry text."""
        if stdin is True and not background:
            raise ValueError("stdin=True needs background=True (then send_stdin); give the "
                             "bytes to feed instead")
        call = RemoteCall(self, None, cmd, on_stdout, on_stderr, max_output, command_id)
        call._frame = execute_frame(cmd, env, cwd, user, timeout, pty, stdin is not None,
                                    call.command_id)
        return self._drive(call, stdin, background, check, timeout)

    def reconnect(self, command_id, on_stdout=None, on_stderr=None, check=True,
                  max_output=c.OUTPUT_MAX):
        """A handle on the command `command_id` (one this or another client started), its
        output replayed from the start (SandboxNotFoundError once the service forgot it)."""
        call = RemoteCall(self, None, command_id, on_stdout, on_stderr, max_output, command_id)
        return self._drive(call, None, True, check, None)

    def _drive(self, call, stdin, background, check, timeout):
        handle = RemoteCommandHandle(call, check)
        if background or stdin not in (None, True):
            threading.Thread(target=call.run, daemon=True,
                             name="sandbox-cmd-" + call.command_id[:8]).start()
        if background or stdin not in (None, True):
            # as the LangSmith clients' run(wait=False): back once the command started, so
            # pid is known and input reaches it
            if not call.wait_started(STARTED_WAIT):
                call._kill_quietly()
                raise ConnectionLostError("%s: not started after %.0f s" %
                                          (call.command_id, STARTED_WAIT))
        if stdin not in (None, True) and not call.done:
            call.send_input(stdin)
            call.send({"type": "close_stdin"})
        if background:
            return handle
        try:
            if stdin is None:
                call.run()
            elif not call.wait(None if timeout is None else timeout + c.TIMEOUT_GRACE):
                call.kill()
        except BaseException:
            call._kill_quietly()
            raise
        return call.result(check)

    # ---- internals ----

    def _dataplane(self):
        dp = self._box.get("dataplane_url")
        if not isinstance(dp, str) or not dp.startswith(("http://", "https://")):
            raise SandboxStateError("%s has no dataplane_url (is it ready?)" % self.name)
        # The key goes to the dataplane too: never in clear when the service is reached by TLS
        if self._svc.url.startswith("https://") and not dp.startswith("https://"):
            raise ServiceError("%s: the service is https but its dataplane_url is not (%s): "
                               "the API key is not sent there" % (self.name, dp[:200]))
        return dp

    def _ws_connect(self):
        return WebSocket.connect(self._svc.ws_url(self._dataplane()) + "/execute/ws",
                                 self._svc.headers(), 30.0, self._svc.ssl_context)

    def _ws_refused(self, e):
        """The exception for an upgrade the service refused (HandshakeError e)."""
        if e.status in (401, 403, 404, 429, 400):
            return error_of(e.status, e.body)
        return ServiceError("%s: %s" % (self.name, e), e.status)

    def _wait_status(self, want):
        end = time.monotonic() + READY_WAIT
        while True:
            st = self._svc.call("GET", "/boxes/%s/status" % _q(self.id))
            got = st.get("status") if isinstance(st, dict) else None
            if got == want:
                return
            if got == "failed":
                raise SandboxError("%s failed: %s" % (self.name, st.get("status_message")))
            if time.monotonic() > end:
                raise SandboxError("%s: still %s after %.0f s (waiting for %s)" %
                                   (self.name, got, READY_WAIT, want))
            time.sleep(POLL)


def _q(ref):
    return urllib.parse.quote(str(ref), safe="")


def _gib(size):
    """GiB of disk_size: an int (GiB) or "N[G]" ("10G", "10")."""
    s = str(size).strip().upper().rstrip("B").rstrip("I")
    s = s[:-1] if s.endswith("G") else s
    if not s.isdigit() or int(s) <= 0:
        raise ValueError("disk_size: give GiB as an int or \"NG\", got %r" % (size,))
    return int(s)

