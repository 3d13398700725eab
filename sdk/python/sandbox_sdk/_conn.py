# SPDX-License-Identifier: Apache-2.0
"""A connection to a sandbox's agent, kept open for the sandbox's calls, and one-shot
requests to its VMM's api.sock; blocking sockets, no thread of our own in the common case.

The agent connection: connect to the sandbox's vsock.sock, `CONNECT 52\\n`, the VMM's
`OK <port>\\n`, HELLO both ways (docs/agent-protocol.md). Then calls run at once on it, each
with its own id: any thread sends its frames (a lock keeps a frame whole), and the agent's
frames are read by whichever thread is waiting for a call (the "leader"; others wait for
their call's end or for the leader to leave, then one of them leads). Decoded frames go to a
queue first and are handed to their calls one at a time, so a reader interrupted between two
(a KeyboardInterrupt in a callback) leaves the rest for the next. A foreground command thus
costs one frame out and the agent's frames in, read by the thread that wants them: a hand-off
to a reader thread and back cost 0.1 ms natively and over 1 ms in the emulated host
(docs/benchmarks.md, "sdk"). While background commands run and nobody waits, a pump thread
leads, so their output callbacks fire and the agent is never left blocked on us.

A sender whose frame the agent does not take reads meanwhile when nobody else does: the
agent stops reading us while its output for us is unread (docs/agent-protocol.md, "Flow
control"), so feeding a command's stdin while nobody read its output would deadlock both.
A send that makes no progress for SEND_STALL seconds ends the connection.
"""

import collections
import select
import socket
import threading
import time

from . import _wire as w
from .errors import ConnectionLostError, SandboxError, printable

CONNECT_REPLY_MAX = 64
# Reads go into one buffer per connection: a fresh 256 KiB bytes object per recv is a
# malloc above glibc's mmap threshold, i.e. an mmap, page faults and a munmap every read
# (in the emulated host that alone cost ~0.5 ms a command; docs/benchmarks.md).
RECV_CHUNK = 256 << 10
SEND_STALL = 60.0  # seconds a frame may wait for the agent to take a byte, as sandboxctl's
POLL_MAX_MS = 1 << 30  # poll(2) takes an int; longer waits loop
WAIT_MAX = min(threading.TIMEOUT_MAX, 1 << 30)

class _Local(threading.local):
    dispatching = False  # this thread is inside a call's callback


_local = _Local()


def _left(deadline):
    return None if deadline is None else deadline - time.monotonic()


def _poll_ms(left):
    return POLL_MAX_MS if left is None else max(1, min(int(left * 1000), POLL_MAX_MS))


def not_from_callback():
    if _local.dispatching:
        raise SandboxError("a command's output callback cannot call its sandbox (the frames "
                           "it would wait for are behind it): queue the work and call after")


def vsock_handshake(sock, deadline):
    """CONNECT 52 and HELLO on a connected blocking socket, all within `deadline`."""
    def recv(n):
        left = _left(deadline)
        if left <= 0:
            raise ConnectionLostError("no answer from the VMM and agent in time")
        sock.settimeout(left)
        return sock.recv(n)

    sock.settimeout(max(0.001, _left(deadline)))
    sock.sendall(b"CONNECT %d\n" % w.PROTO_VSOCK_PORT)
    line = bytearray()
    while not line.endswith(b"\n"):  # a byte at a time: no frame byte is taken
        b = recv(1)
        if not b or len(line) >= CONNECT_REPLY_MAX:
            raise ConnectionLostError("the VMM refused CONNECT %d (is the agent up?)" %
                                      w.PROTO_VSOCK_PORT)
        line += b
    if not line.startswith(b"OK "):
        raise ConnectionLostError("the VMM answered CONNECT with %r" % bytes(line[:32]))
    sock.sendall(w.hello())
    dec = w.Decoder()
    while True:
        data = recv(4096)
        if not data:
            raise ConnectionLostError("the agent closed the connection at HELLO")
        frames = dec.feed(data)
        if frames:
            msg_type, _, payload = frames[0]
            w.check_hello(msg_type, payload)
            return dec, frames[1:]


class AgentConnection:
    def __init__(self, vsock_path, timeout=10.0):
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.settimeout(timeout)
            self._sock.connect(vsock_path)
            self._dec, early = vsock_handshake(self._sock, time.monotonic() + timeout)
        except (OSError, w.ProtocolError) as e:
            self._sock.close()
            raise ConnectionLostError("cannot reach the agent through %s: %s" %
                                      (vsock_path, e)) from e
        except BaseException:
            self._sock.close()
            raise
        self._sock.settimeout(None)
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)  # a call ended, or the leader left
        self._reading = False  # a thread leads (reads the socket); under _lock
        self._followers = 0  # threads waiting on _cv; under _lock
        self._rbuf = memoryview(bytearray(RECV_CHUNK))  # the leader's read buffer
        self._frames = collections.deque(early)  # decoded, not yet handed to their calls
        self._calls = {}
        self._next_id = 1
        self._dead = None
        self._pump = None  # the background pump thread, while it runs
        self._idle = _Never()

    # ---- calls ----

    def start(self, call, msg_type, payload=b"", background=False):
        """Register `call` under a new id and send its first frame. A background call keeps
        the pump thread going until it ends."""
        if _local.dispatching:
            not_from_callback()
        call.conn = self
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
        self._send_frame(w.frame(msg_type, call.id, payload))
        return call

    def send(self, msg_type, call_id, payload=b""):
        """Send one frame whole; read the agent's frames meanwhile if it does not take ours
        and nobody else reads. ConnectionLostError when the agent took nothing for
        SEND_STALL seconds or the socket broke (the connection then ends)."""
        not_from_callback()
        self._send_frame(w.frame(msg_type, call_id, payload))

    def _send_frame(self, data):
        with self._send_lock:
            if self._dead is not None:
                raise self._dead
            sent = 0
            try:
                try:  # the common case: the socket takes it all at once
                    sent = self._sock.send(data, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    pass
                if sent == len(data):
                    return
                view = memoryview(data)
                stall = time.monotonic() + SEND_STALL
                while sent < len(view):
                    try:
                        sent += self._sock.send(view[sent:], socket.MSG_DONTWAIT)
                        stall = time.monotonic() + SEND_STALL
                        continue
                    except BlockingIOError:
                        pass
                    if self._dead is not None:
                        raise self._dead
                    if time.monotonic() > stall:
                        raise ConnectionLostError("the agent took no byte of our frame for "
                                                  "%.0f s" % SEND_STALL)
                    self._wait_writable(stall)
            except (ConnectionLostError, OSError) as e:
                self._die(e if isinstance(e, ConnectionLostError) else
                          ConnectionLostError("the agent connection broke: %s" % e))
                raise self._dead from e
            except BaseException:  # KeyboardInterrupt & co.: a frame cut short is the end
                if sent:
                    self._die(ConnectionLostError("a frame to the agent was cut short"))
                raise

    def _wait_writable(self, stall):
        with self._lock:
            lead = not self._reading
            if lead:
                self._reading = True
        try:
            p = select.poll()
            p.register(self._sock, select.POLLOUT | (select.POLLIN if lead else 0))
            for _, ev in p.poll(min(_poll_ms(_left(stall)), 1000)):
                if ev & select.POLLIN and lead:
                    self._read(socket.MSG_DONTWAIT)
                    self._drain(None)
                elif ev & (select.POLLERR | select.POLLHUP):
                    raise ConnectionLostError("the agent connection broke")
        finally:
            if lead:
                self._unlead()

    def wait(self, call, timeout=None):
        """True once the call ended (its final frame, or the connection's end: then its
        error is the connection's); False when `timeout` seconds passed first."""
        if call.done:
            return True
        if _local.dispatching:
            not_from_callback()
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                if call.done:
                    return True
                if self._dead is not None:
                    call.fail(self._dead)
                    return True
                left = _left(deadline)
                if left is not None and left <= 0:
                    return False
                if self._reading:
                    self._followers += 1
                    self._cv.wait(WAIT_MAX if left is None else min(left, WAIT_MAX))
                    self._followers -= 1
                    continue
                self._reading = True
            try:
                self._lead(call, deadline)
            finally:
                self._unlead()

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
        self._calls.pop(call.id, None)

    # ---- reading ----

    def _unlead(self):
        with self._lock:
            self._reading = False
            if self._followers:
                self._cv.notify_all()

    def _lead(self, call, deadline):
        """Hand out queued frames and read more until `call` ends or the deadline passes.
        Without a deadline a plain blocking recv (one system call a read); with one, poll
        first. _die's shutdown ends either."""
        poller = None
        while not call.done and self._dead is None:
            if self._frames:
                self._drain(call)
                continue
            flags = 0
            if deadline is not None:
                left = _left(deadline)
                if left <= 0:
                    return
                if poller is None:
                    poller = select.poll()
                    poller.register(self._sock, select.POLLIN)
                if not poller.poll(_poll_ms(left)):
                    continue
                flags = socket.MSG_DONTWAIT
            self._read(flags)

    def _read(self, flags):
        try:
            n = self._sock.recv_into(self._rbuf, RECV_CHUNK, flags)
            if not n:
                raise ConnectionLostError("the agent closed the connection")
            self._frames.extend(self._dec.feed(self._rbuf[:n]))
        except BlockingIOError:
            return
        except w.ProtocolError as e:
            self._die(ConnectionLostError("the agent broke the protocol: %s" % e))
        except ConnectionLostError as e:
            self._die(e)
        except OSError as e:
            self._die(ConnectionLostError("the agent connection broke: %s" % e))

    def _drain(self, until):
        """Hand queued frames to their calls, one at a time, until `until` ends."""
        while self._frames and self._dead is None and not (until is not None and until.done):
            msg_type, call_id, payload = self._frames.popleft()
            if call_id == 0:
                if msg_type == w.MSG_ERROR:
                    self._die(ConnectionLostError("the agent closed the connection: %s" %
                                                  printable(w.parse_error(payload)[1])))
                continue
            call = self._calls.get(call_id)  # one dict operation: atomic, no lock needed
            if call is None:  # a call we gave up on; its late frames are dropped
                continue
            if call.callbacks:  # the user's code runs in feed: it must not call us back
                _local.dispatching = True
                try:
                    done = call.feed(msg_type, payload)
                finally:
                    _local.dispatching = False
            else:
                done = call.feed(msg_type, payload)
            if done:
                self._calls.pop(call_id, None)
                with self._lock:  # under the lock: a follower checks done, then waits
                    if self._followers:
                        self._cv.notify_all()
                if call.overrun:
                    self._die(ConnectionLostError("the agent overran a call (%s): connection "
                                                  "dropped" % call.error))

    def _pump_loop(self):
        """Lead while background calls run, so their output flows with nobody waiting."""
        try:
            while True:
                with self._lock:
                    if self._dead is not None or not any(
                            getattr(c, "background", False) for c in self._calls.values()):
                        return
                try:
                    self.wait(self._idle, 0.2)
                except BaseException:  # a callback's SystemExit & co.: the others go on
                    pass
        finally:
            with self._lock:
                self._pump = None

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

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _Never:
    """A call that never ends: what the pump thread waits for."""

    done = False

    def fail(self, exc):
        pass


def api_call(api_path, req_type, timeout=5.0):
    """One api.sock request, all within `timeout`: (error, status dict or None)."""
    deadline = time.monotonic() + timeout
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(api_path)
        s.sendall(w.api_request(req_type, 1))
        hdr = _recv_exact(s, w.API_HDR_LEN, deadline)
        length = w.api_reply_header(hdr, req_type, 1)
        return w.api_reply(_recv_exact(s, length, deadline))
    except (OSError, w.ProtocolError) as e:
        raise ConnectionLostError("the VMM's api.sock does not answer: %s" % e) from e
    finally:
        s.close()


def _recv_exact(s, n, deadline):
    buf = bytearray()
    while len(buf) < n:
        left = _left(deadline)
        if left <= 0:
            raise ConnectionLostError("the VMM's api.sock did not answer in time")
        s.settimeout(left)
        b = s.recv(n - len(buf))
        if not b:
            raise ConnectionLostError("the VMM closed api.sock mid-reply")
        buf += b
    return bytes(buf)
