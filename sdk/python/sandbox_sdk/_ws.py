# SPDX-License-Identifier: Apache-2.0
"""A WebSocket client (RFC 6455), standard library only, for the service's /execute/ws
(docs/sdk.md, "Remote mode"; the protocol above it is ../shared/LANGSMITH-API.md 4.2).

What it does: the opening handshake (Sec-WebSocket-Accept checked), masked frames out,
messages in reassembled from fragments, pings answered with pongs, the closing handshake with
its status code. What it refuses, closing with the RFC's code and raising WebSocketError: a
masked frame from the server, reserved bits or opcodes (no extension is negotiated), a control
frame over 125 bytes or fragmented, a continuation without a start or a new message inside
one (1002), text that is not UTF-8 (1007), a message over MESSAGE_MAX (1009). Every read has
a deadline: a peer that stops sending mid-frame cannot hold us.
"""

import base64
import codecs
import hashlib
import os
import select
import socket
import ssl
import struct
import threading
import time

from .errors import ConnectionLostError

MESSAGE_MAX = 1 << 20   # bytes of one message, as the LangSmith Python client's default
HEADER_MAX = 64 << 10   # bytes of the server's handshake answer
_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0, 1, 2, 8, 9, 10
CLOSE_NORMAL, CLOSE_GOING_AWAY, CLOSE_PROTOCOL, CLOSE_BAD_DATA = 1000, 1001, 1002, 1007
CLOSE_TOO_BIG, CLOSE_NO_STATUS, CLOSE_ABNORMAL = 1009, 1005, 1006


class WebSocketError(ConnectionLostError):
    """The WebSocket broke or its peer broke the protocol; `code` is the close code (1006:
    the connection dropped without a closing handshake)."""

    def __init__(self, message, code=CLOSE_ABNORMAL):
        super().__init__(message)
        self.code = code


class HandshakeError(WebSocketError):
    """The server did not upgrade: `status` (its HTTP status, 0 if none) and `body`."""

    def __init__(self, message, status=0, body=b""):
        super().__init__(message)
        self.status, self.body = status, body


class Closed(Exception):
    """The peer closed the connection with `code` and `reason` (raised by recv)."""

    def __init__(self, code, reason):
        super().__init__("closed with %d%s" % (code, ": " + reason if reason else ""))
        self.code, self.reason = code, reason


def _deadline_left(deadline):
    left = deadline - time.monotonic()
    if left <= 0:
        raise socket.timeout("timed out")
    return left


class WebSocket:
    """One client connection: connect(), send_text(), recv(), close()."""

    def __init__(self, sock):
        self._sock = sock
        self._buf = bytearray()
        self._closed = False  # we sent a close frame
        self._send_lock = threading.Lock()  # a pong from the reader, input from a handle;
        # with TLS, reads too

    @classmethod
    def connect(cls, url, headers=None, timeout=30.0, ssl_context=None):
        """Open a WebSocket to a ws:// or wss:// URL, sending `headers` with the upgrade;
        HandshakeError when the server answers anything but 101."""
        for k, v in (headers or {}).items():
            if ":" in str(k) or any(c in str(k) + str(v) for c in "\r\n\0"):
                raise ValueError("header %r: no CR, LF or NUL (nor ':' in a name)" % k)
        scheme, _, rest = url.partition("://")
        if scheme not in ("ws", "wss"):
            raise ValueError("not a WebSocket URL: %r" % url)
        hostport, slash, path = rest.partition("/")
        path = "/" + path if slash else "/"
        host, port = hostport, 443 if scheme == "wss" else 80
        if hostport.startswith("["):
            host, _, p = hostport[1:].partition("]")
            port = int(p[1:]) if p.startswith(":") else port
        elif ":" in hostport:
            host, p = hostport.rsplit(":", 1)
            port = int(p)
        deadline = time.monotonic() + timeout
        try:
            sock = socket.create_connection((host, port), timeout)
        except OSError as e:
            raise WebSocketError("cannot connect to %s: %s" % (hostport, e)) from e
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if scheme == "wss":
                sock = (ssl_context or ssl.create_default_context()).wrap_socket(
                    sock, server_hostname=host)
            self = cls(sock)
            self._handshake(hostport, path, headers or {}, deadline)
            return self
        except BaseException:
            sock.close()
            raise

    def _handshake(self, hostport, path, headers, deadline):
        key = base64.b64encode(os.urandom(16))
        lines = ["GET %s HTTP/1.1" % path, "Host: %s" % hostport, "Upgrade: websocket",
                 "Connection: Upgrade", "Sec-WebSocket-Key: %s" % key.decode(),
                 "Sec-WebSocket-Version: 13"]
        lines += ["%s: %s" % kv for kv in headers.items()]
        self._sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"), deadline)
        try:
            while b"\r\n\r\n" not in self._buf:
                if len(self._buf) > HEADER_MAX:
                    raise HandshakeError("the server's answer to the upgrade has no end")
                self._fill(deadline)
        except (OSError, EOFError) as e:
            raise HandshakeError("the upgrade got no answer: %s" % (e or "closed")) from e
        head, _, rest = bytes(self._buf).partition(b"\r\n\r\n")
        self._buf = bytearray(rest)
        status_line, *fields = head.decode("latin-1").split("\r\n")
        parts = status_line.split(" ", 2)
        status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
        hdrs = {}
        for f in fields:
            k, _, v = f.partition(":")
            hdrs[k.strip().lower()] = v.strip()
        if status != 101:
            raise HandshakeError("WebSocket upgrade refused: %s" % status_line[:200], status,
                                 self._body(hdrs, deadline))
        want = base64.b64encode(hashlib.sha1(key + _GUID).digest()).decode()
        if (hdrs.get("upgrade", "").lower() != "websocket" or
                hdrs.get("sec-websocket-accept") != want):
            raise HandshakeError("the server's 101 is not a WebSocket upgrade", 101)
        if hdrs.get("sec-websocket-extensions") or hdrs.get("sec-websocket-protocol"):
            raise HandshakeError("the server chose an extension or protocol we did not offer",
                                 101)

    def _body(self, hdrs, deadline):
        """Up to 64 KiB of a refusal's body (its JSON says why), best effort."""
        try:
            n = min(int(hdrs.get("content-length", "0")), HEADER_MAX)
            while len(self._buf) < n:
                self._fill(min(deadline, time.monotonic() + 2.0))
            return bytes(self._buf[:n])
        except (ValueError, OSError, EOFError):
            return bytes(self._buf[:HEADER_MAX])

    def _sendall(self, data, deadline):
        try:
            self._sock.settimeout(_deadline_left(deadline))
            self._sock.sendall(data)
        except OSError as e:
            raise WebSocketError("the connection broke while sending: %s" % e) from e

    def _fill(self, deadline):
        if isinstance(self._sock, ssl.SSLSocket):
            # OpenSSL's connection is not to be read and written by two threads at once (a
            # handle's input beside the reader): wait for data unlocked, read it locked.
            if not self._sock.pending():
                ready, _, _ = select.select([self._sock], [], [], _deadline_left(deadline))
                if not ready:
                    raise socket.timeout("timed out")
            with self._send_lock:
                self._sock.settimeout(_deadline_left(deadline))
                data = self._sock.recv(256 << 10)
        else:
            self._sock.settimeout(_deadline_left(deadline))
            data = self._sock.recv(256 << 10)
        if not data:
            raise EOFError("the server closed the connection")
        self._buf += data

    def _take(self, n, deadline):
        while len(self._buf) < n:
            self._fill(deadline)
        data = bytes(self._buf[:n])
        del self._buf[:n]
        return data

    def send(self, opcode, payload, timeout=60.0):
        """One frame, masked, FIN set."""
        n = len(payload)
        head = bytes([0x80 | opcode])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        body = bytes(payload)
        if n:
            m = int.from_bytes((mask * (n // 4 + 1))[:n], "big")
            body = (int.from_bytes(body, "big") ^ m).to_bytes(n, "big")
        with self._send_lock:
            self._sendall(head + mask + body, time.monotonic() + timeout)

    def send_text(self, text, timeout=60.0):
        self.send(OP_TEXT, text.encode("utf-8"), timeout)

    def ping(self, data=b""):
        self.send(OP_PING, data)

    def _fail(self, code, why):
        """Close with `code` (best effort) and raise: the peer broke the protocol."""
        self.close(code, why)
        raise WebSocketError("the server broke the WebSocket protocol: %s" % why, code)

    def _frame(self, deadline):
        b0, b1 = self._take(2, deadline)
        fin, rsv, opcode = b0 & 0x80, b0 & 0x70, b0 & 0x0F
        if b1 & 0x80:
            self._fail(CLOSE_PROTOCOL, "a masked frame from the server")
        if rsv:
            self._fail(CLOSE_PROTOCOL, "reserved bits set (no extension was agreed)")
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack(">H", self._take(2, deadline))[0]
        elif n == 127:
            n = struct.unpack(">Q", self._take(8, deadline))[0]
        if opcode >= 8:
            if not fin or n > 125:
                self._fail(CLOSE_PROTOCOL, "a control frame fragmented or over 125 bytes")
            if opcode not in (OP_CLOSE, OP_PING, OP_PONG):
                self._fail(CLOSE_PROTOCOL, "unknown control opcode %d" % opcode)
        elif opcode not in (OP_CONT, OP_TEXT, OP_BINARY):
            self._fail(CLOSE_PROTOCOL, "unknown data opcode %d" % opcode)
        if n > MESSAGE_MAX:
            self._fail(CLOSE_TOO_BIG, "a frame of %d bytes (at most %d)" % (n, MESSAGE_MAX))
        return bool(fin), opcode, self._take(n, deadline)

    def recv(self, timeout):
        """The next message as (opcode, bytes) (OP_TEXT's checked as UTF-8). Pings are
        answered, pongs passed up as (OP_PONG, data) so a caller can tell the peer is alive.
        Raises Closed on the peer's close (answered), socket.timeout when nothing whole came
        within `timeout` seconds, WebSocketError on a broken connection or protocol."""
        deadline = time.monotonic() + timeout
        opcode, parts, size = None, [], 0
        decoder = None
        try:
            while True:
                fin, op, data = self._frame(deadline)
                if op == OP_PING:
                    self.send(OP_PONG, data)
                    continue
                if op == OP_PONG:
                    if opcode is None:
                        return OP_PONG, data
                    continue
                if op == OP_CLOSE:
                    self._on_close(data)
                if op == OP_CONT and opcode is None:
                    self._fail(CLOSE_PROTOCOL, "a continuation frame without a message")
                if op != OP_CONT and opcode is not None:
                    self._fail(CLOSE_PROTOCOL, "a new message inside a fragmented one")
                if opcode is None:
                    opcode = op
                    if op == OP_TEXT:
                        decoder = codecs.getincrementaldecoder("utf-8")("strict")
                size += len(data)
                if size > MESSAGE_MAX:
                    self._fail(CLOSE_TOO_BIG, "a message over %d bytes" % MESSAGE_MAX)
                if decoder is not None:
                    try:
                        decoder.decode(data, final=fin)
                    except UnicodeDecodeError:
                        self._fail(CLOSE_BAD_DATA, "a text message that is not UTF-8")
                parts.append(data)
                if fin:
                    return opcode, b"".join(parts)
        except EOFError as e:
            raise WebSocketError("the connection dropped without a close (1006)") from e
        except socket.timeout:
            if parts:  # a message started and did not end in time: the stream is lost
                self.abort()
                raise WebSocketError("a fragmented message did not end within %.0f s" %
                                     timeout) from None
            raise
        except ssl.SSLError as e:
            raise WebSocketError("TLS failed: %s" % e) from e
        except OSError as e:
            if isinstance(e, socket.timeout):
                raise
            raise WebSocketError("the connection broke: %s" % e) from e

    def _on_close(self, data):
        if len(data) == 1:
            self._fail(CLOSE_PROTOCOL, "a close frame of one byte")
        code = struct.unpack(">H", data[:2])[0] if len(data) >= 2 else CLOSE_NO_STATUS
        try:
            reason = data[2:].decode("utf-8")
        except UnicodeDecodeError:
            self._fail(CLOSE_BAD_DATA, "a close reason that is not UTF-8")
        if len(data) >= 2 and not (1000 <= code <= 1014 and code not in (1004, 1005, 1006)
                                   or 3000 <= code <= 4999):
            self._fail(CLOSE_PROTOCOL, "close code %d is not one a peer may send" % code)
        self.close(code if len(data) >= 2 else CLOSE_NORMAL)
        raise Closed(code, reason)

    def close(self, code=CLOSE_NORMAL, reason=""):
        """Send a close frame (once) and end the connection; errors are ignored."""
        if not self._closed:
            self._closed = True
            try:
                self.send(OP_CLOSE, struct.pack(">H", code) + reason.encode()[:123], 2.0)
            except (OSError, WebSocketError):
                pass
        self.abort()

    def abort(self):
        self._closed = True
        try:
            self._sock.close()
        except OSError:
            pass
