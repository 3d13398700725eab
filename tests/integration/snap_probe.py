#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Talk to payload-snap (tests/guests/snap.c) over the VMM's vsock unix socket.

usage: snap_probe.py [--port N] [--wait SEC] [--timeout SEC] SOCKET CMD [CMD...]

Connects to SOCKET (the VMM's --vsock PATH), asks for guest port 1234 ("CONNECT 1234\n",
answered "OK <n>\n"), sends each CMD as one line and prints each reply line. The connect is
retried for up to --wait seconds while the socket is missing or refuses (ECONNREFUSED,
ENOENT), or while the VMM closes the connection before its "OK" (the guest not listening
yet). Every read waits at most --timeout seconds. Exits 0, or 1 with a message on stderr
naming what failed.
"""
import argparse
import errno
import socket
import sys
import time


class ProbeError(Exception):
    pass


class Closed(ProbeError):
    """The other side closed (or reset) the connection."""


def read_line(sock, buf, what, timeout):
    """One line (without its newline) from sock, buffered in buf (a bytearray)."""
    deadline = time.monotonic() + timeout
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            raise ProbeError(f"{what}: no answer in {timeout:g} s")
        sock.settimeout(left)
        try:
            data = sock.recv(4096)
        except socket.timeout:
            raise ProbeError(f"{what}: no answer in {timeout:g} s") from None
        except ConnectionResetError:
            raise Closed(f"{what}: connection reset") from None
        except OSError as e:
            raise ProbeError(f"{what}: {e.strerror or e}") from None
        if not data:
            raise Closed(f"{what}: connection closed" + (f" after {bytes(buf)!r}" if buf else ""))
        buf += data
    line, _, rest = bytes(buf).partition(b"\n")
    buf[:] = rest
    return line.decode("utf-8", "replace")


def connect(path, port, wait, timeout):
    """A socket connected to guest port `port`, past the VMM's "OK <n>" line."""
    deadline = time.monotonic() + wait
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(path)
            sock.sendall(f"CONNECT {port}\n".encode())
            buf = bytearray()
            line = read_line(sock, buf, f"CONNECT {port}", timeout)
            if not line.startswith("OK "):
                raise ProbeError(f"CONNECT {port}: the VMM answered {line!r}")
            return sock, buf
        except OSError as e:
            sock.close()
            if e.errno not in (errno.ECONNREFUSED, errno.ENOENT) or time.monotonic() >= deadline:
                raise ProbeError(f"connect to {path}: {e.strerror or e}") from None
        except Closed:
            sock.close()
            # A refused CONNECT: the VMM closes the socket (the guest sent RST, or is not
            # listening yet, e.g. setting its device up again after a restore).
            if time.monotonic() >= deadline:
                raise
        except ProbeError:
            sock.close()
            raise
        time.sleep(0.1)


def main():
    ap = argparse.ArgumentParser(description="Send commands to payload-snap over vsock.")
    ap.add_argument("socket", help="the VMM's --vsock unix socket")
    ap.add_argument("commands", nargs="+", metavar="CMD", help="a command line (ping, check, ...)")
    ap.add_argument("--port", type=int, default=1234, help="guest port (default 1234)")
    ap.add_argument("--wait", type=float, default=5.0,
                    help="seconds to keep retrying the connect (default 5)")
    ap.add_argument("--timeout", type=float, default=10.0,
                    help="seconds each read may take (default 10)")
    args = ap.parse_args()
    try:
        sock, buf = connect(args.socket, args.port, args.wait, args.timeout)
        with sock:
            for cmd in args.commands:
                try:
                    sock.sendall(cmd.encode() + b"\n")
                except OSError as e:
                    raise ProbeError(f"sending {cmd!r}: {e.strerror or e}") from None
                print(read_line(sock, buf, repr(cmd), args.timeout), flush=True)
    except ProbeError as e:
        print(f"snap_probe: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
