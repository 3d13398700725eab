# SPDX-License-Identifier: Apache-2.0
"""A connection to a sandbox's agent, kept open for the sandbox's calls, and one-shot
requests to its VMM's api.sock; blocking sockets and one reader thread.

The agent connection: connect to the sandbox's vsock.sock, `CONNECT 52\\n`, the VMM's
`OK <port>\\n`, HELLO both ways (docs/agent-protocol.md). Then calls run at once on it, each
with its own id: any thread sends its frames (a lock keeps a frame whole), and one reader
thread decodes what the agent sends and hands each frame to its call, waking the caller at
the call's final frame. So a call costs one frame out, the agent's frames in, and one wake-up;
output callbacks run on the reader thread as the bytes arrive.
"""

import socket
import threading
import time

from . import _wire as w
from .errors import ConnectionLostError, SandboxError

CONNECT_REPLY_MAX = 64
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
        self._calls = {}
        self._next_id = 1
        self._dead = None
        self._early = early
        self._reader = threading.Thread(target=self._read_loop, name="sandbox-agent",
                                        daemon=True)
        self._reader.start()

    # ---- calls ----

    def start(self, call, msg_type, payload=b""):
        """Register `call` under a new id and send its first frame."""
        call.event = threading.Event()
        with self._lock:
            if self._dead is not None:
                raise self._dead
            call.id = self._next_id
            self._next_id += 1
            self._calls[call.id] = call
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
        """True once the call ended (its final frame, or the connection's end)."""
        return call.event.wait(timeout)

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

    # ---- the reader ----

    def _dispatch(self, frames):
        for msg_type, call_id, payload in frames:
            if call_id == 0:
                if msg_type == w.MSG_ERROR:
                    err, msg = w.parse_error(payload)
                    raise w.ProtocolError("the agent closed the connection: %s" % msg)
                continue
            with self._lock:
                call = self._calls.get(call_id)
            if call is None:  # a call we gave up on; its late frames are dropped
                continue
            if call.feed(msg_type, payload):
                with self._lock:
                    self._calls.pop(call_id, None)
                call.event.set()
                if call.overrun:
                    raise ConnectionLostError("the agent overran a call: connection dropped")

    def _read_loop(self):
        try:
            self._dispatch(self._early)
            while True:
                data = self._sock.recv(RECV_CHUNK)
                if not data:
                    raise ConnectionLostError("the agent closed the connection")
                self._dispatch(self._dec.feed(data))
        except w.ProtocolError as e:
            self._die(ConnectionLostError("the agent broke the protocol: %s" % e))
        except ConnectionLostError as e:
            self._die(e)
        except OSError as e:
            self._die(ConnectionLostError("the agent connection broke: %s" % e))

    def _die(self, exc):
        with self._lock:
            if self._dead is None:
                self._dead = exc
            calls, self._calls = list(self._calls.values()), {}
        for call in calls:
            call.fail(self._dead)
            call.event.set()
        try:  # the agent sees the end too (and kills what this connection ran)
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    @property
    def alive(self):
        return self._dead is None

    def close(self):
        self._die(ConnectionLostError("the connection was closed"))
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        if self._reader is not threading.current_thread():
            self._reader.join(5)


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
