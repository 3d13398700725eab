#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A one-machine Swift with its S3 API (the s3api middleware, tempauth): the fleet tests'
object store (docs/fleet.md), started by the test that needs it and gone with it.

    swift_s3.py DIR [--host 127.0.0.1] [--port P]

DIR (made if missing) holds the configuration, the rings and the one device. It must be on
a filesystem with user xattrs (the object server keeps an object's metadata in them; without
them every PUT fails with 507): ext4, ext2, not tmpfs before Linux 6.6. Checked at the start.
On our hosts /var/tmp is ext4 (tests/fleet/store.sh uses it), /tmp may be tmpfs. In the
emulated host (tools/devhost, Linux 6.1) /, /tmp, /var/tmp, /run, /out and /dev/shm are all
tmpfs: there only the input disk has them, i.e. the build dir and the `run --add` paths at
their host paths (ext4; but its free space is a quarter of what was shared plus 16 MB, and
this Swift takes ~30 MB for store.sh's checks), or a file system of the test's own (store.sh
makes an ext2 in a sparse file on /var/tmp and loop-mounts it).

One proxy (S3 API at http://HOST:P/, path-style, region us-east-1) and one account,
container and object server on the three ports after it, each a single process
(workers = 0), logs in DIR/log/. Prints one line once the four servers answer:

    swift-s3 endpoint=http://HOST:P access=test:tester secret=testing region=us-east-1

and runs until stdin ends or SIGTERM, then stops the servers. Exits 1 (the servers' log on
stderr) when they do not answer within START_S. Only Debian's swift packages: no network
beyond HOST. The servers run on this Python when it has the swift modules (in the emulated
host: python3 at /opt/python, with swift.ext4's site directory), else on Debian's
/usr/bin/python3 (a pyenv python3 has none).
"""
import argparse
import importlib.util
import os
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from services import Servers  # noqa: E402

ACCESS, SECRET, REGION = "test:tester", "testing", "us-east-1"
# The rings made and the four servers answering: natively ~2 s; in the emulated host (QEMU
# TCG, each server importing ~600 modules) 17 s with 2 vCPUs, 29 s with one (the pool's).
START_S = 120


def python():
    """The interpreter for swift's scripts: this one when it can import swift, else
    Debian's (which has the swift modules), whatever python3 ran this script."""
    if sys.executable and importlib.util.find_spec("swift") is not None:
        return sys.executable
    return "/usr/bin/python3"


def check_xattrs(d):
    """Exit with a message when d's filesystem has no user xattrs."""
    try:
        os.setxattr(d, "user.swift-s3-check", b"1")
        os.removexattr(d, "user.swift-s3-check")
    except OSError as e:
        sys.exit("swift_s3.py: %s has no user xattrs (%s), which Swift's object server needs: "
                 "use a directory on ext4 (see --help)" % (d, e.strerror))


# The rings (one device each, 2^4 partitions, one replica), made by swift's own builder in
# one process: what swift-ring-builder's create, add and rebalance do, less its backups. Its
# nine runs took ~35 s of the start in the emulated host (~4 s each, most of it Python's own
# start and swift's imports).
RINGS = """
import os, sys
from swift.common.ring import RingBuilder
d, host = sys.argv[1:3]
for arg in sys.argv[3:]:
    name, port = arg.split(":")
    b = RingBuilder(4, 1, 1)
    b.add_dev({"region": 1, "zone": 1, "ip": host, "port": int(port), "replication_ip": host,
               "replication_port": int(port), "device": "d1", "weight": 1.0, "meta": ""})
    b.rebalance()
    b.validate()
    b.save(os.path.join(d, name + ".builder"))
    b.get_ring().save(os.path.join(d, name + ".ring.gz"))
"""


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def configure(d, host, port, py):
    """The configuration files, rings and device under d; the four ports."""
    ports = {"proxy": port, "account": port + 1, "container": port + 2, "object": port + 3}
    for sub in ("srv/d1", "log", "run"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
    write(os.path.join(d, "swift.conf"),
          "[swift-hash]\nswift_hash_path_suffix = sandbox-fleet-test\n"
          "swift_hash_path_prefix = sandbox-fleet-test\n"
          "[storage-policy:0]\nname = Policy-0\ndefault = yes\n")
    common = ("[DEFAULT]\nswift_dir = {d}\ndevices = {d}/srv\nmount_check = false\n"
              "bind_ip = {host}\nbind_port = {port}\nworkers = 0\nlog_facility = LOG_LOCAL0\n"
              "log_name = {name}\nuser = root\n")
    for name, app in (("account", "account"), ("container", "container"), ("object", "object")):
        write(os.path.join(d, "%s-server.conf" % name),
              common.format(d=d, host=host, port=ports[name], name=name) +
              "[pipeline:main]\npipeline = %s-server\n"
              "[app:%s-server]\nuse = egg:swift#%s\n" % (name, name, app) +
              ("[%s-replicator]\n[%s-auditor]\n" % (name, name)) +
              ("[container-sync]\n[container-updater]\n" if name == "container" else "") +
              ("[object-updater]\n" if name == "object" else ""))
    write(os.path.join(d, "proxy-server.conf"),
          common.format(d=d, host=host, port=port, name="proxy") +
          "[pipeline:main]\n"
          "pipeline = catch_errors gatekeeper proxy-logging cache listing_formats s3api "
          "tempauth copy slo dlo proxy-logging proxy-server\n"
          "[app:proxy-server]\nuse = egg:swift#proxy\naccount_autocreate = true\n"
          "[filter:tempauth]\nuse = egg:swift#tempauth\n"
          "user_test_tester = %s .admin\n" % SECRET +
          "[filter:s3api]\nuse = egg:swift#s3api\nlocation = %s\n" % REGION +
          "[filter:catch_errors]\nuse = egg:swift#catch_errors\n"
          "[filter:gatekeeper]\nuse = egg:swift#gatekeeper\n"
          "[filter:proxy-logging]\nuse = egg:swift#proxy_logging\n"
          "[filter:listing_formats]\nuse = egg:swift#listing_formats\n"
          "[filter:copy]\nuse = egg:swift#copy\n"
          "[filter:slo]\nuse = egg:swift#slo\n"
          "[filter:dlo]\nuse = egg:swift#dlo\n"
          # tempauth wants a cache in the request; with no memcached its entries are simply
          # not kept (S3 requests are checked by their signature each time): a port nothing
          # listens on, on this machine's loopback
          "[filter:cache]\nuse = egg:swift#memcache\nmemcache_servers = %s:%d\n" % (
              host, port + 4))
    todo = [n for n in ("account", "container", "object")
            if not os.path.exists(os.path.join(d, "%s.ring.gz" % n))]
    if todo:
        p = subprocess.run([py, "-c", RINGS, d, host] +
                           ["%s:%d" % (n, ports[n]) for n in todo],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if p.returncode != 0:
            sys.exit("swift_s3.py: making the rings: %s" % p.stdout.decode()[-1000:])
    return ports


def answers(host, port):
    """Whether the proxy answers an HTTP request (any status)."""
    try:
        with socket.create_connection((host, port), timeout=2) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            return s.recv(12).startswith(b"HTTP/1.")
    except OSError:
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=18080)
    a = ap.parse_args()
    d = os.path.abspath(a.dir)
    os.makedirs(d, exist_ok=True)
    check_xattrs(d)
    py = python()
    ports = configure(d, a.host, a.port, py)
    srv = Servers("swift_s3.py")
    for name in ("account", "container", "object", "proxy"):
        srv.start([py, "/usr/bin/swift-%s-server" % name,
                   os.path.join(d, "%s-server.conf" % name), "--verbose"],
                  os.path.join(d, "log", "%s.log" % name))
    srv.serve(lambda: all(answers(a.host, p) for p in ports.values()), START_S,
              "swift-s3 endpoint=http://%s:%d access=%s secret=%s region=%s" % (
                  a.host, ports["proxy"], ACCESS, SECRET, REGION))

if __name__ == "__main__":
    main()
