# SPDX-License-Identifier: Apache-2.0
"""A connection to a sandbox's agent, kept open for the sandbox's calls, and one-shot
requests to its VMM's api.sock; blocking sockets, no thread of our own in the common case.

The agent connection: connect to the sandbox's vsock.sock, `CONNECT 52\n`, the VMM's
`OK <port>\n`, HELLO both ways (docs/agent-protocol.md). Then calls run at once on it, each
with its own id: any thread sends its frames (a lock keeps a frame whole), and the agent's
frames are read by whichever thread is waiting for a call (the "leader"; others wait for
their call's end or for the leader to leave, then one of them leads). Each frame goes to its
call's state machine; a frame may end another thread's call. So a foreground command costs
one frame out and the agent's frames in, read by the thread that wants them: a hand-off to a
reader thread and back cost 0.1 ms natively and over 1 ms in the emulated host (measured,
docs/sdk.md). While background commands run and nobody waits, a pump thread leads, so their
output callbacks fire and the agent is never left blocked on us.
"""

import select
import socket
import threading
import time

from . import _wire as w
from .errors import ConnectionLostError, SandboxError

CONNECT_REPLY_MAX = 64
# Reads go into one buffer per connection: a fresh 256 KiB bytes object per recv is a
# malloc above glibc's mmap threshold, i.e. an mmap, page faults and a munmap every read
# (in the emulated host that alone cost ~0.5 ms a command; docs/sdk.md).
RECV_CHUNK = 256 << 10


def _deadline_left(deadline):
    return max(0.0, deadline - time.monotonic())


def vsock_handshake(sock, deadline):
    """CONNECT 52 and HELLO on a connected blocking socket; raises on failure."""
    sock.settimeout(_deadline_left(deadline) or 0.001)
    sock.sendall(b"CONNECT %d\n" % w.PROTO_VSOCK_PORT)
    line = bytearray()
    while not line.endswith(b"\n"):  # a byte at a time: no frame byte is taken
        b = sock.recv(1)
        if not b or len(line) >= CONNECT_REPLY_MAX:
            raise ConnectionLostError("the VMM refused CONNECT %d (is the agent up?)" %
                                      w.PROTO_VSOCK_PORT)
        line += b
    if not line.startswith(b"OK "):
        raise ConnectionLostError("the VMM answered CONNECT with %r" % bytes(line[:32]))
    sock.sendall(w.hello())
    dec = Decoder()
    while True:
        sock.settimeout(_deadline_left(deadline) or 0.001)
        data = sock.recv(4096)
        if not data:
            raise ConnectionLostError("the agent closed the connection at HELLO")
        frames = dec.feed(data)
        if frames:
            msg_type, _, payload = frames[0]
            w.check_hello(msg_type, payload)
            return dec, frames[1:]


Decoder = w.Decoder


class AgentConnection:
    def __init__(self, vsock_path, timeout=10.0):
        deadline = time.monotonic() + timeout
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.settimeout(timeout)
            self._sock.connect(vsock_path)
            self._dec, early = vsock_handshake(self._sock, deadline)
        except (OSError, w.ProtocolError) as e:
            self._sock.close()
            raise ConnectionLostError("cannot reach the agent through %s: %s" %
                                      (vsock_path, e)) from e
        self._sock.settimeout(None)
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)  # a call ended, or the leader left
        self._reading = False  # a thread leads (reads the socket); under _lock
        self._followers = 0  # threads waiting on _cv; under _lock
        self._rbuf = memoryview(bytearray(RECV_CHUNK))  # the leader's read buffer
        self._calls = {}
        self._next_id = 1
        self._dead = None
        self._pump = None  # the background pump thread, while it runs
        self._idle = _Never()
        try:
            self._dispatch(early)
        except (w.ProtocolError, ConnectionLostError) as e:
            self._die(ConnectionLostError("the agent broke the protocol: %s" % e))
            raise self._dead from e

    # ---- calls ----

    def start(self, call, msg_type, payload=b"", background=False):
        """Register `call` under a new id and send its first frame. A background call keeps
        the pump thread going until it ends."""
        call.background = background
        with self._lock:
            if self._dead is not None:
                raise self._dead
            call.id = self._next_id
            self._next_id += 1
            self._calls[call.id] = call
            if background and self._pump is None:
                self._pump = threading.Thread(target=self._pump_loop, name="sandbox-pump",
                                              daemon=True)
                self._pump.start()
        self.send(msg_type, call.id, payload)
        return call

    def send(self, msg_type, call_id, payload=b""):
        data = w.frame(msg_type, call_id, payload)
        try:
            with self._send_lock:
                self._sock.sendall(data)
        except OSError as e:
            self._die(ConnectionLostError("the agent connection broke: %s" % e))
            raise self._dead from e

    def wait(self, call, timeout=None):
        """True once the call ended (its final frame, or the connection's end); False when
        `timeout` seconds passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not call.done:
            left = None if deadline is None else deadline - time.monotonic()
            if self._dead is not None or (left is not None and left <= 0):
                return call.done
            with self._lock:
                lead = not self._reading
                if lead:
                    self._reading = True
                elif not call.done:
                    self._followers += 1
                    self._cv.wait(left)
                    self._followers -= 1
                    continue
            try:
                self._lead(call, deadline)
            finally:
                with self._lock:
                    self._reading = False
                    if self._followers:
                        self._cv.notify_all()
        return True

    def call(self, call, msg_type, payload=b"", timeout=60.0):
        """Start a call and wait for its end; raises its error."""
        self.start(call, msg_type, payload)
        if not self.wait(call, timeout):
            self.forget(call)
            raise SandboxError("the agent did not answer in %.0f s" % timeout)
        if call.error is not None:
            raise call.error
        return call

    def forget(self, call):
        with self._lock:
            self._calls.pop(call.id, None)

    # ---- reading ----

    def _lead(self, call, deadline):
        """Read and dispatch frames until `call` ends or the deadline passes. Without a
        deadline a plain blocking recv (one system call a read: in the emulated host each
        costs tens of microseconds); with one, poll first. _die's shutdown ends either."""
        poller = None
        while not call.done and self._dead is None:
            flags = 0
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                if poller is None:
                    poller = select.poll()
                    poller.register(self._sock, select.POLLIN)
                if not poller.poll(max(1, int(left * 1000))):
                    continue
                flags = socket.MSG_DONTWAIT
            try:
                n = self._sock.recv_into(self._rbuf, RECV_CHUNK, flags)
                if not n:
                    raise ConnectionLostError("the agent closed the connection")
                self._dispatch(self._dec.feed(self._rbuf[:n]))
            except BlockingIOError:
                continue
            except w.ProtocolError as e:
                self._die(ConnectionLostError("the agent broke the protocol: %s" % e))
            except ConnectionLostError as e:
                self._die(e)
            except OSError as e:
                self._die(ConnectionLostError("the agent connection broke: %s" % e))

    def _dispatch(self, frames):
        for msg_type, call_id, payload in frames:
            if call_id == 0:
                if msg_type == w.MSG_ERROR:
                    err, msg = w.parse_error(payload)
                    raise w.ProtocolError("the agent closed the connection: %s" % msg)
                continue
            call = self._calls.get(call_id)  # one dict operation: atomic, no lock needed
            if call is None:  # a call we gave up on; its late frames are dropped
                continue
            if call.feed(msg_type, payload):
                self._calls.pop(call_id, None)
                with self._lock:  # under the lock: a follower checks done, then waits
                    if self._followers:
                        self._cv.notify_all()
                if call.overrun:
                    raise ConnectionLostError("the agent overran a call: connection dropped")

    def _pump_loop(self):
        """Lead while background calls run, so their output flows with nobody waiting."""
        while True:
            with self._lock:
                if self._dead is not None or not any(
                        getattr(c, "background", False) for c in self._calls.values()):
                    self._pump = None
                    return
            self.wait(self._idle, 0.2)

    def _die(self, exc):
        with self._lock:
            if self._dead is None:
                self._dead = exc
            calls, self._calls = list(self._calls.values()), {}
            for call in calls:
                call.fail(self._dead)
            self._cv.notify_all()
        try:  # the agent sees the end too (and kills what this connection ran)
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    @property
    def alive(self):
        return self._dead is None

    def close(self):
        self._die(ConnectionLostError("the connection was closed"))
        pump = self._pump
        if pump is not None and pump is not threading.current_thread():
            pump.join(5)
        self._sock.close()


class _Never:
    """A call that never ends: what the pump thread waits for."""

    done = False


def api_call(api_path, req_type, timeout=5.0):
    """One api.sock request: (error, status dict or None)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(api_path)
        s.sendall(w.api_request(req_type, 1))
        hdr = _recv_exact(s, w.API_HDR_LEN)
        length = w.api_reply_header(hdr, req_type, 1)
        return w.api_reply(_recv_exact(s, length))
    except (OSError, w.ProtocolError) as e:
        raise ConnectionLostError("the VMM's api.sock does not answer: %s" % e) from e
    finally:
        s.close()


def _recv_exact(s, n):
    buf = bytearray()
    while len(buf) < n:
        b = s.recv(n - len(buf))
        if not b:
            raise ConnectionLostError("the VMM closed api.sock mid-reply")
        buf += b
    return bytes(buf)
