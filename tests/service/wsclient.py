#!/usr/bin/env python3
"""A small RFC 6455 client (stdlib only) for the service tests: masked frames, JSON text."""
import base64, json, os, socket, struct, sys

def connect(host, port, path, key):
    s = socket.create_connection((host, port), timeout=60)
    k = base64.b64encode(os.urandom(16)).decode()
    req = (f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           f"Sec-WebSocket-Key: {k}\r\nSec-WebSocket-Version: 13\r\nX-Api-Key: {key}\r\n\r\n")
    s.sendall(req.encode())
    head = b""
    while b"\r\n\r\n" not in head:
        c = s.recv(1)
        if not c:
            raise SystemExit("closed during handshake: %r" % head)
        head += c
    status = head.split(b"\r\n")[0]
    if b" 101 " not in status:
        raise SystemExit("upgrade refused: %r" % head)
    return s

def send(s, obj, opcode=1):
    data = json.dumps(obj).encode() if not isinstance(obj, bytes) else obj
    mask = os.urandom(4)
    hdr = bytes([0x80 | opcode])
    n = len(data)
    if n < 126: hdr += bytes([0x80 | n])
    elif n < 65536: hdr += bytes([0x80 | 126]) + struct.pack(">H", n)
    else: hdr += bytes([0x80 | 127]) + struct.pack(">Q", n)
    s.sendall(hdr + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

def recvn(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c: raise EOFError
        b += c
    return b

def recv(s):
    h = recvn(s, 2)
    op = h[0] & 15
    n = h[1] & 127
    if n == 126: n = struct.unpack(">H", recvn(s, 2))[0]
    elif n == 127: n = struct.unpack(">Q", recvn(s, 8))[0]
    data = recvn(s, n)
    return op, data

if __name__ == "__main__":
    host, port, path, key = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    frames = [json.loads(a) for a in sys.argv[5:]]
    s = connect(host, port, path, key)
    for f in frames:
        send(s, f)
    try:
        while True:
            op, data = recv(s)
            if op == 8:
                code = struct.unpack(">H", data[:2])[0] if len(data) >= 2 else None
                print("CLOSE", code); break
            print(data.decode())
    except EOFError:
        print("EOF")
