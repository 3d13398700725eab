#!/usr/bin/env python3
"""The hostile guest of the network tests (net_linux.sh): runs inside a sandbox (Debian image,
as root) and tries what a guest program or a hostile guest kernel would. Each subcommand prints
one line and exits 0 when the attempt got through, 1 when it was stopped, 2 on a usage error.

  dns SERVER NAME        a UDP A query to SERVER:53: prints rcode and the answers
  tcp HOST PORT [SEND]   connect, send SEND (if given), print the first line received
  udp IP PORT            send a datagram, wait 2 s for any answer
  icmp IP                an ICMP echo request (raw socket), wait 2 s for the reply
  raw6                   an IPv6 frame (ICMPv6 echo to the gateway's link-local) by AF_PACKET
  rawether TYPE          a frame of ethertype TYPE (hex) to the gateway's MAC by AF_PACKET
  spoofip IP PORT        a TCP SYN from 10.0.2.3 (not ours) by AF_PACKET, wait for a SYN-ACK
  setmac MAC             set eth0's MAC (live)
  idle IP PORT           connect and send nothing: prints the seconds until the proxy closes
  burst N IP PORT        open N connections at once, close them, then one normal request
  garbage IP PORT        send garbage, print what comes back (nothing expected)
"""
import fcntl
import os
import select
import socket
import struct
import sys
import time

GW_MAC = bytes.fromhex("025342000001")


def dns(server, name):
    q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
    for label in name.rstrip(".").split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\x00" + struct.pack(">HH", 1, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(3)
    s.sendto(q, (server, 53))
    try:
        r, _ = s.recvfrom(4096)
    except socket.timeout:
        print("timeout")
        return 1
    rcode = r[3] & 0xF
    an = struct.unpack(">H", r[6:8])[0]
    # answers: skip the question, then read A records (names are pointers in our servers)
    off = 12
    while r[off] != 0:
        off += 1 + r[off]
    off += 5
    addrs = []
    for _ in range(an):
        if r[off] & 0xC0 == 0xC0:
            off += 2
        else:
            while r[off] != 0:
                off += 1 + r[off]
            off += 1
        typ, _, _, rdlen = struct.unpack(">HHIH", r[off:off + 10])
        off += 10
        if typ == 1 and rdlen == 4:
            addrs.append(socket.inet_ntoa(r[off:off + 4]))
        off += rdlen
    print("rcode=%d answers=%s" % (rcode, ",".join(addrs) or "-"))
    return 0 if rcode == 0 and addrs else 1


def tcp(host, port, send=None):
    try:
        s = socket.create_connection((host, int(port)), timeout=10)
        if send:
            s.sendall(send.encode().decode("unicode_escape").encode())
        line = s.makefile("rb").readline()
    except OSError as e:
        print("refused: %s" % e)
        return 1
    if not line:
        print("closed")
        return 1
    print("got: %s" % line.decode(errors="replace").strip())
    return 0


def udp(ip, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    try:
        s.sendto(b"udp escape attempt\n", (ip, int(port)))
        data = s.recv(4096)
    except OSError as e:
        print("no answer: %s" % e)
        return 1
    print("answer: %r" % data[:64])
    return 0


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def icmp(ip):
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    s.settimeout(2)
    hdr = struct.pack("!BBHHH", 8, 0, 0, 0x4242, 1) + b"ping"
    hdr = hdr[:2] + struct.pack("!H", csum(hdr)) + hdr[4:]
    s.sendto(hdr, (ip, 0))
    deadline = time.time() + 2
    while time.time() < deadline:
        try:
            data, addr = s.recvfrom(4096)
        except socket.timeout:
            break
        ihl = (data[0] & 0xF) * 4
        if addr[0] == ip and data[ihl] == 0:
            print("echo reply from %s" % ip)
            return 0
    print("no reply")
    return 1


def eth0():
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind(("eth0", 0))
    mac = s.getsockname()[4]
    return s, mac


def raw6():
    s, mac = eth0()
    src = bytes.fromhex("fe80000000000000") + mac[:3] + b"\xff\xfe" + mac[3:]
    dst = bytes.fromhex("ff020000000000000000000000000001")
    body = struct.pack("!BBHHH", 128, 0, 0, 1, 1) + b"v6"
    ip6 = struct.pack("!IHBB", 6 << 28, len(body), 58, 64) + src + dst
    frame = bytes.fromhex("333300000001") + mac + b"\x86\xdd" + ip6 + body
    for _ in range(3):
        s.send(frame)
    print("sent 3 IPv6 frames")
    return 0


def rawether(typ):
    s, mac = eth0()
    frame = GW_MAC + mac + struct.pack("!H", int(typ, 16)) + b"\0" * 46
    for _ in range(3):
        s.send(frame)
    print("sent 3 frames of ethertype %s" % typ)
    return 0


def spoofip(ip, port):
    s, mac = eth0()
    src, dst = socket.inet_aton("10.0.2.3"), socket.inet_aton(ip)
    tcph = struct.pack("!HHIIBBHHH", 40000, int(port), 1, 0, 5 << 4, 2, 65535, 0, 0)
    pseudo = src + dst + struct.pack("!BBH", 0, 6, len(tcph))
    tcph = tcph[:16] + struct.pack("!H", csum(pseudo + tcph)) + tcph[18:]
    iph = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcph), 1, 0, 64, 6, 0, src, dst)
    iph = iph[:10] + struct.pack("!H", csum(iph)) + iph[12:]
    s.send(GW_MAC + mac + b"\x08\x00" + iph + tcph)
    s.settimeout(2)
    deadline = time.time() + 2
    while time.time() < deadline:
        try:
            f = s.recv(2048)
        except socket.timeout:
            break
        if f[12:14] == b"\x08\x00" and f[23] == 6 and f[30:34] == src:
            print("an answer to the spoofed address")
            return 0
    print("no answer")
    return 1


def setmac(mac):
    # virtio-net changes its MAC live (IFF_LIVE_ADDR_CHANGE): eth0 stays up, its routes stay.
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    hw = struct.pack("16sH6s8s", b"eth0", 1, bytes.fromhex(mac.replace(":", "")), b"")
    fcntl.ioctl(s, 0x8924, hw)  # SIOCSIFHWADDR
    print("eth0 is now %s" % mac)
    return 0


def idle(ip, port):
    t0 = time.time()
    s = socket.create_connection((ip, int(port)), timeout=60)
    s.settimeout(60)
    try:
        s.recv(1)
    except OSError:
        pass
    print("closed after %.1f s" % (time.time() - t0))
    return 0


def burst(n, ip, port):
    socks = []
    for _ in range(int(n)):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect((ip, int(port)))
        except BlockingIOError:
            pass
        except OSError:
            s.close()
            continue
        socks.append(s)
    time.sleep(1)
    for s in socks:
        s.close()
    print("opened %d connections" % len(socks))
    return 0


def garbage(ip, port):
    s = socket.create_connection((ip, int(port)), timeout=15)
    s.sendall(b"\x00\xff garbage \x01\x02\r\n\r\n" * 4)
    s.settimeout(15)
    try:
        data = s.recv(4096)
    except OSError:
        data = b""
    print("got %r" % data[:80])
    return 0 if data and not data.startswith(b"HTTP/1.1 4") else 1


def main():
    cmds = {"dns": dns, "tcp": tcp, "udp": udp, "icmp": icmp, "raw6": raw6,
            "rawether": rawether, "spoofip": spoofip, "setmac": setmac, "idle": idle,
            "burst": burst, "garbage": garbage}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        print(__doc__)
        return 2
    return cmds[sys.argv[1]](*sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
