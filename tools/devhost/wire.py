"""The pool's wire format, shared by tools/devhost/server.py (in L1) and tools/devhost/pool (on
the host): frames of one type byte, a 4-byte big-endian length, and the payload.

Host to L1:  R request (JSON: argv, env, cwd, id), I input tar chunk (an empty one ends the
             tar), K kill (JSON: signal), Q quit (the server drains and exits).
L1 to host:  H hello (JSON: pid, boot), O stdout chunk, E stderr chunk, T output tar chunk (an
             empty one ends it), X exit (JSON: status).
Both ends are ours and the channel is loopback on the host; the bounds are still checked, so a
corrupt stream ends the connection with a message instead of a huge allocation.
"""

import json
import struct

MAX_FRAME = 1 << 20
HEADER = struct.Struct(">cI")


class WireError(Exception):
    pass


def send(sock, kind, payload=b""):
    if isinstance(payload, (dict, list)):
        payload = json.dumps(payload).encode()
    if len(payload) > MAX_FRAME:
        raise WireError("frame of %d bytes is over the %d-byte bound" % (len(payload), MAX_FRAME))
    sock.sendall(HEADER.pack(kind, len(payload)) + payload)


def _exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def recv(sock):
    """The next frame as (kind, payload), or (None, b"") at the end of the stream."""
    head = _exact(sock, HEADER.size)
    if head is None:
        return None, b""
    kind, n = HEADER.unpack(head)
    if n > MAX_FRAME:
        raise WireError("frame of %d bytes is over the %d-byte bound" % (n, MAX_FRAME))
    payload = _exact(sock, n)
    if payload is None:
        raise WireError("the stream ended inside a frame")
    return kind, payload


def load(payload):
    try:
        return json.loads(payload.decode())
    except (UnicodeDecodeError, ValueError) as e:
        raise WireError("bad JSON in a frame: %s" % e) from None


class TarWriter:
    """A file-like sink for tarfile's stream mode that sends chunks of kind `kind`."""

    def __init__(self, sock, kind, lock=None):
        self.sock, self.kind, self.lock, self.buf = sock, kind, lock, bytearray()

    def write(self, data):
        self.buf += data
        while len(self.buf) >= 256 << 10:
            self._flush(256 << 10)
        return len(data)

    def _flush(self, n):
        chunk, self.buf = bytes(self.buf[:n]), self.buf[n:]
        if self.lock:
            with self.lock:
                send(self.sock, self.kind, chunk)
        else:
            send(self.sock, self.kind, chunk)

    def close(self):
        if self.buf:
            self._flush(len(self.buf))
        self._flush(0)  # the end of the tar


class TarReader:
    """A file-like source for tarfile's stream mode over chunks of kind `kind` (an empty chunk
    ends it); `other` gets any other frame that arrives meanwhile."""

    def __init__(self, sock, kind, other=None):
        self.sock, self.kind, self.other, self.buf, self.done = sock, kind, other, b"", False

    def read(self, n=-1):
        while not self.done and (n < 0 or len(self.buf) < n):
            kind, payload = recv(self.sock)
            if kind is None:
                raise WireError("the stream ended inside a tar")
            if kind != self.kind:
                if self.other is None:
                    raise WireError("frame %r inside a tar" % kind)
                self.other(kind, payload)
                continue
            if not payload:
                self.done = True
            self.buf += payload
        if n < 0:
            out, self.buf = self.buf, b""
        else:
            out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def drain(self):
        while not self.done:
            self.read(1 << 20)
