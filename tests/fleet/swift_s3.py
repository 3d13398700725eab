#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A one-machine Swift with its S3 API (the s3api middleware, tempauth): the fleet tests'
object store (docs/fleet.md), started by the test that needs it and gone with it.

    swift_s3.py DIR [--host 127.0.0.1] [--port P]

DIR (made if missing, on a filesystem with user xattrs: ext4, not tmpfs before Linux 6.6)
holds the configuration, the rings and the one device. One proxy (S3 API at
http://HOST:P/, path-style, region us-east-1) and one account, container and object server
on the three ports after it, each a single process (workers = 0), logs in DIR/log/. Prints
one line once the four servers answer:

    swift-s3 endpoint=http://HOST:P access=test:tester secret=testing region=us-east-1

and runs until stdin ends or SIGTERM, then stops the servers. Exits 1 (the servers' log on
stderr) when they do not answer within 60 s. Only Debian's swift packages: no network beyond
HOST.
"""
import argparse
import os
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from services import Servers  # noqa: E402

PY = "/usr/bin/python3"  # Debian's, which has the swift modules (not a pyenv python)
ACCESS, SECRET, REGION = "test:tester", "testing", "us-east-1"
START_S = 60


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def configure(d, host, port):
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
    for name in ("account", "container", "object"):
        b = os.path.join(d, "%s.builder" % name)
        if os.path.exists(os.path.join(d, "%s.ring.gz" % name)):
            continue
        for argv in (["create", "4", "1", "1"],
                     ["add", "r1z1-%s:%d/d1" % (host, ports[name]), "1"],
                     ["rebalance"]):
            p = subprocess.run(["swift-ring-builder", b] + argv, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
            if p.returncode not in (0, 1):  # 1: a warning (rebalance of a one-device ring)
                sys.exit("swift_s3.py: swift-ring-builder %s: %s" % (
                    " ".join(argv), p.stdout.decode()[-500:]))
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
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=18080)
    a = ap.parse_args()
    d = os.path.abspath(a.dir)
    os.makedirs(d, exist_ok=True)
    ports = configure(d, a.host, a.port)
    srv = Servers("swift_s3.py")
    for name in ("account", "container", "object", "proxy"):
        srv.start([PY, "/usr/bin/swift-%s-server" % name,
                   os.path.join(d, "%s-server.conf" % name), "--verbose"],
                  os.path.join(d, "log", "%s.log" % name))
    srv.serve(lambda: all(answers(a.host, p) for p in ports.values()), START_S,
              "swift-s3 endpoint=http://%s:%d access=%s secret=%s region=%s" % (
                  a.host, ports["proxy"], ACCESS, SECRET, REGION))

if __name__ == "__main__":
    main()
