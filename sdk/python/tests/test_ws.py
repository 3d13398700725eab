# SPDX-License-Identifier: Apache-2.0
"""The SDK's WebSocket client (sandbox_sdk/_ws.py) against a scripted server on loopback: a
message in fragments with a ping between them, the close handshake, and each protocol breach
refused with its RFC 6455 close code (a masked server frame, reserved bits, a control frame
too long, a continuation without a start, a message over 1 MiB, text not UTF-8, a fragmented
message without end), the upgrade's refusals. Native, no sandbox."""

import base64
import hashlib
import json
import socket
import struct
import threading

import pytest

from sandbox_sdk._ws import (MESSAGE_MAX, OP_TEXT, Closed, HandshakeError, WebSocket,
                             WebSocketError)

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def frame(opcode, payload, fin=True, mask=False, rsv=0, length=None):
    n = len(payload) if length is None else length
    head = bytes([(0x80 if fin else 0) | rsv | opcode])
    mbit = 0x80 if mask else 0
    if n < 126:
        head += bytes([mbit | n])
    elif n < 65536:
        head += bytes([mbit | 126]) + struct.pack(">H", n)
    else:
        head += bytes([mbit | 127]) + struct.pack(">Q", n)
    if mask:
        head += b"\0\0\0\0"
    return head + payload


def read_frame(c):
    """(opcode, unmasked payload) of one client frame; asserts it is masked."""
    b0, b1 = recvn(c, 2)
    assert b1 & 0x80, "a client frame must be masked"
    n = b1 & 0x7F
    if n == 126:
        n = struct.unpack(">H", recvn(c, 2))[0]
    elif n == 127:
        n = struct.unpack(">Q", recvn(c, 8))[0]
    key = recvn(c, 4)
    data = recvn(c, n)
    return b0 & 0x0F, bytes(x ^ key[i % 4] for i, x in enumerate(data))


def recvn(c, n):
    b = b""
    while len(b) < n:
        got = c.recv(n - len(b))
        if not got:
            raise EOFError
        b += got
    return b


def upgrade(c, accept=None):
    """Read a client's upgrade request from `c` and answer 101; its head as text."""
    head = b""
    while b"\r\n\r\n" not in head:
        head += c.recv(1)
    key = [ln.split(":", 1)[1].strip() for ln in head.decode().split("\r\n")
           if ln.lower().startswith("sec-websocket-key:")][0]
    acc = accept or base64.b64encode(hashlib.sha1(key.encode() + GUID).digest())
    c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
              b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + acc + b"\r\n\r\n")
    return head.decode()


class Server:
    """Accepts one client, answers its upgrade (or `refuse`), then runs `script(conn)`."""

    def __init__(self, script, refuse=None, accept=None):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)
        self.port = self.sock.getsockname()[1]
        self.script, self.refuse, self.accept = script, refuse, accept
        self.got = []  # frames the client sent after the upgrade
        self.headers = ""
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        c, _ = self.sock.accept()
        c.settimeout(10)
        if self.refuse:
            head = b""
            while b"\r\n\r\n" not in head:
                head += c.recv(1)
            c.sendall(self.refuse)
            c.close()
            return
        self.headers = upgrade(c, self.accept)
        try:
            self.script(c)
            while True:
                self.got.append(read_frame(c))
        except (EOFError, OSError):
            pass
        c.close()

    def url(self):
        return "ws://127.0.0.1:%d/dp/x/execute/ws" % self.port

    def close_codes(self):
        self.thread.join(10)
        return [struct.unpack(">H", d[:2])[0] for op, d in self.got if op == 8]


def test_fragments_and_ping_then_close():
    def script(c):
        c.sendall(frame(1, b'{"type":', fin=False) + frame(9, b"hi") +
                  frame(0, b'"started",', fin=False) + frame(0, b'"pid":1}') +
                  frame(8, struct.pack(">H", 1000) + b"bye"))
    s = Server(script)
    ws = WebSocket.connect(s.url(), {"X-Api-Key": "k1"}, 10)
    op, data = ws.recv(10)
    assert op == OP_TEXT and json.loads(data) == {"type": "started", "pid": 1}
    with pytest.raises(Closed) as e:
        ws.recv(10)
    assert (e.value.code, e.value.reason) == (1000, "bye")
    assert "X-Api-Key: k1" in s.headers
    s.thread.join(10)
    assert (10, b"hi") in s.got, "the ping was not answered with its payload"
    assert s.close_codes() == [1000]


def test_text_out_is_masked():
    s = Server(lambda c: None)
    ws = WebSocket.connect(s.url(), {}, 10)
    ws.send_text('{"type":"kill"}')
    ws.close()
    s.thread.join(10)
    assert s.got[0] == (1, b'{"type":"kill"}') and s.close_codes() == [1000]


@pytest.mark.parametrize("data,code", [
    (frame(1, b"{}", mask=True), 1002),                  # masked from the server
    (frame(1, b"{}", rsv=0x40), 1002),                   # reserved bit, no extension
    (frame(9, b"x" * 126, length=126), 1002),            # control frame over 125 bytes
    (frame(9, b"x", fin=False), 1002),                   # fragmented control frame
    (frame(0, b"{}"), 1002),                             # continuation without a start
    (frame(1, b"{", fin=False) + frame(1, b"}"), 1002),  # a new message inside one
    (frame(3, b"{}"), 1002),                             # reserved data opcode
    (frame(1, b"", length=MESSAGE_MAX + 1), 1009),       # over 1 MiB, body never sent
    (frame(1, b"\xff\xfe"), 1007),                       # text that is not UTF-8
    (frame(8, b"\x03"), 1002),                           # a close frame of one byte
    (frame(8, struct.pack(">H", 1005)), 1002),           # a code no peer may send
])
def test_breaches_close_with_their_code(data, code):
    s = Server(lambda c: c.sendall(data))
    ws = WebSocket.connect(s.url(), {}, 10)
    with pytest.raises(WebSocketError) as e:
        ws.recv(5)
    assert e.value.code == code
    assert s.close_codes() == [code]


def test_big_message_in_fragments_over_the_bound():
    chunk = b"a" * (600 << 10)
    s = Server(lambda c: c.sendall(frame(1, chunk, fin=False) + frame(0, chunk)))
    ws = WebSocket.connect(s.url(), {}, 10)
    with pytest.raises(WebSocketError) as e:
        ws.recv(10)
    assert e.value.code == 1009


def test_fragmented_without_end_is_bounded():
    s = Server(lambda c: c.sendall(frame(1, b"{", fin=False)))
    ws = WebSocket.connect(s.url(), {}, 10)
    with pytest.raises(WebSocketError):
        ws.recv(1.0)


def test_silence_is_a_timeout_and_a_drop_is_1006():
    gate = threading.Event()

    def script(c):
        gate.wait(10)
        c.shutdown(socket.SHUT_RDWR)
    s = Server(script)
    ws = WebSocket.connect(s.url(), {}, 10)
    with pytest.raises(socket.timeout):
        ws.recv(0.3)
    gate.set()
    with pytest.raises(WebSocketError) as e:
        ws.recv(5)
    assert e.value.code == 1006


def test_upgrade_refused_and_bad_accept():
    body = b'{"detail":{"error":"Unauthorized","message":"bad key"}}'
    s = Server(None, refuse=b"HTTP/1.1 401 Unauthorized\r\nContent-Length: %d\r\n\r\n%s" %
               (len(body), body))
    with pytest.raises(HandshakeError) as e:
        WebSocket.connect(s.url(), {}, 10)
    assert e.value.status == 401 and e.value.body == body
    s = Server(lambda c: None, accept=b"d3Jvbmc=")
    with pytest.raises(HandshakeError) as e:
        WebSocket.connect(s.url(), {}, 10)
    assert e.value.status == 101
    with pytest.raises(ValueError):
        WebSocket.connect("ws://127.0.0.1:1/x", {"X-Bad": "a\r\nInjected: 1"}, 1)
