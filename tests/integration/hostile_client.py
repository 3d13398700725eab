#!/usr/bin/env python3
# A raw HTTP/1.1 and WebSocket client for hostile tests (sandboxd_hostile.py): requests
# written byte for byte (no library fixes a malformed one), responses read with bounds, frames
# built with any opcode, length, mask and FIN, and told apart from a server that closed or
# one that is still silent. API_PORT is the port a connection goes to unless told otherwise.
import base64, json, multiprocessing, os, random, socket, struct, time

API_PORT = None


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def connect(src="127.0.0.1", port=None, timeout=5.0):
    s = socket.socket()
    s.settimeout(timeout)
    s.bind((src, 0))
    s.connect(("127.0.0.1", port or API_PORT))
    return s


def read_response(s, limit=8 << 20):
    """One response: (status, headers, body); status None when the server closed first."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        try:
            d = s.recv(65536)
        except (ConnectionResetError, socket.timeout):
            d = b""
        if not d:
            return None, {}, buf
        buf += d
        check(len(buf) < limit, "a response head without end")
    head, body = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    check(len(parts) >= 2 and parts[0].startswith("HTTP/1."), f"not a status line: {lines[0]!r}")
    hdrs = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    n = int(hdrs.get("content-length", "0"))
    while len(body) < n:
        d = s.recv(65536)
        if not d:
            break
        body += d
    return int(parts[1]), hdrs, body


def request(method, path, key=None, body=None, headers=(), src="127.0.0.1", port=None,
            ctype="application/json"):
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
    h = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    if key:
        h.append(f"X-Api-Key: {key}")
    if body is not None:
        h += [f"Content-Type: {ctype}", f"Content-Length: {len(body)}"]
    h += list(headers)
    s = connect(src, port)
    try:
        try:
            s.sendall(("\r\n".join(h) + "\r\n\r\n").encode("latin-1") + (body or b""))
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused at its head and closed before the body was all sent: its answer
            # is already in the socket
        return read_response(s)
    finally:
        s.close()


def read_all(s, secs=2.0):
    """Everything the server sends until it closes (closed True) or is silent for `secs`."""
    s.settimeout(secs)
    out = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                return out, True
            out += d
    except ConnectionResetError:
        return out, True
    except socket.timeout:
        return out, False


def raw(data, src="127.0.0.1", secs=2.0):
    """Send `data` and half-close: (first status, all bytes answered). The server must answer
    or close within `secs` of our end (else Fail: it holds a connection that said all)."""
    s = connect(src)
    try:
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        except OSError:  # the server closed first (EPIPE, ECONNRESET, ENOTCONN)
            pass
        out, closed = read_all(s, secs)
    finally:
        s.close()
    st = int(out[9:12]) if out.startswith(b"HTTP/1.") and len(out) > 12 else None
    check(closed or st, f"{data[:60]!r}...: no answer and not closed {secs} s after the request")
    return st, out


def ws_open(path, key, src="127.0.0.1", port=None):
    """An upgrade: (101, the socket) or (the status, None)."""
    s = connect(src, port)
    k = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {k}\r\n"
               f"Sec-WebSocket-Version: 13\r\nX-Api-Key: {key}\r\n\r\n").encode())
    st, hdrs, rest = read_response(s)
    if st != 101:
        s.close()
        return st, None
    check(rest == b"", "bytes after the 101")
    return 101, s


def ws_frame(opcode, payload, fin=True, mask=True, length=None):
    n = len(payload) if length is None else length
    b0 = (0x80 if fin else 0) | opcode
    m = 0x80 if mask else 0
    if n < 126:
        head = struct.pack("!BB", b0, m | n)
    elif n < 65536:
        head = struct.pack("!BBH", b0, m | 126, n)
    else:
        head = struct.pack("!BBQ", b0, m | 127, n)
    if not mask:
        return head + payload
    mk = os.urandom(4)
    return head + mk + bytes(c ^ mk[i % 4] for i, c in enumerate(payload)) if len(payload) < 4096 \
        else head + mk + xor_big(payload, mk)


def xor_big(payload, mk):
    n = len(payload)
    key = int.from_bytes((mk * (n // 4 + 1))[:n], "big")
    return (int.from_bytes(payload, "big") ^ key).to_bytes(n, "big")


def ws_read(s, secs=3.0):
    """The server's frames until it closes: ([(opcode, payload)], closed); closed is False when
    the connection was still open after `secs`."""
    s.settimeout(secs)
    buf, frames, end = b"", [], time.monotonic() + secs
    while time.monotonic() < end:
        try:
            d = s.recv(65536)
        except ConnectionResetError:
            return frames, True
        except socket.timeout:
            return frames, False
        if not d:
            return frames, True
        buf += d
        while len(buf) >= 2:
            n, off = buf[1] & 0x7f, 2
            if n == 126:
                if len(buf) < 4:
                    break
                n, off = struct.unpack("!H", buf[2:4])[0], 4
            elif n == 127:
                if len(buf) < 10:
                    break
                n, off = struct.unpack("!Q", buf[2:10])[0], 10
            if len(buf) < off + n:
                break
            frames.append((buf[0] & 0x0f, buf[off:off + n]))
            buf = buf[off + n:]
        if frames and frames[-1][0] == 8:
            return frames, True
    return frames, False


def close_code(frames):
    for op, p in frames:
        if op == 8:
            return struct.unpack("!H", p[:2])[0] if len(p) >= 2 else 1005
    return None


def ws_send(s, data):
    try:
        s.sendall(data)
        return True
    except (BrokenPipeError, ConnectionResetError):
        return False


# ---- the daemon's surroundings: ports, the probe, its listening sockets ----

PROBE_TIMEOUT_S = 2.0


def free_port():
    """A port below the ephemeral range (29000-29999: other connections never take it)."""
    for _ in range(200):
        port = random.randrange(29000, 30000)
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            s.close()
    raise Fail("no free port in 29000-29999")


def probe_loop(key, log_path):
    """The probe, in a process of its own (so the cases' own work never delays it): every
    50 ms a new connection from 127.0.0.3 asks GET /api/v2/sandboxes/boxes with the other
    tenant's key; a line "START SECONDS ERROR" each."""
    with open(log_path, "a") as log:
        while True:
            t0, err = time.monotonic(), "-"
            try:
                s = connect("127.0.0.3", timeout=PROBE_TIMEOUT_S)
                s.sendall(f"GET /api/v2/sandboxes/boxes HTTP/1.1\r\nHost: x\r\n"
                          f"X-Api-Key: {key}\r\nConnection: close\r\n\r\n".encode())
                st, _, body = read_response(s)
                s.close()
                if st != 200 or "sandboxes" not in json.loads(body):
                    err = f"status-{st}"
            except (OSError, ValueError, Fail) as e:
                err = (type(e).__name__ + ":" + str(e)).replace(" ", "_")
            log.write(f"{t0:.6f} {time.monotonic() - t0:.6f} {err}\n")
            log.flush()
            time.sleep(0.05)


class Probe:
    def __init__(self, key, log):
        self.log = log
        self.proc = multiprocessing.Process(target=probe_loop, args=(key, self.log), daemon=True)

    def start(self):
        self.proc.start()

    def stop(self):
        self.proc.terminate()
        self.proc.join(5)

    def result(self, t0, t1):
        """Over the probes started in [t0, t1]: (worst seconds, count, errors)."""
        worst, n, errs = 0.0, 0, []
        with open(self.log) as f:
            for ln in f:
                start, secs, err = ln.split()
                if t0 <= float(start) <= t1:
                    worst, n = max(worst, float(secs)), n + 1
                    if err != "-":
                        errs.append(err)
        return worst, n, errs


def listening(pid):
    """{port: [local address, ...]} of the listening TCP sockets process `pid` holds."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    out = {}
    for table in ("tcp", "tcp6"):
        with open(f"/proc/{pid}/net/{table}") as f:
            for ln in list(f)[1:]:
                col = ln.split()
                if col[3] == "0A" and col[9] in inodes:  # LISTEN
                    addr, port = col[1].split(":")
                    out.setdefault(int(port, 16), []).append(addr)
    return out
