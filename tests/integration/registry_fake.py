#!/usr/bin/env python3
# The servers oci_pull.sh pulls against, on loopback only, each printing its port to PORTFILE
# once it listens:
#   token DIR USER PASSWORD    a registry token server (the Docker token auth spec): Basic
#                              USER:PASSWORD gets a JWT (RS256, signed by openssl with
#                              DIR/key.pem, its cert DIR/cert.pem in the x5c header) granting
#                              the scope asked; anything else 401. Logs each request's
#                              Authorization to DIR/token.log
#   liar LAYOUT                a registry serving the OCI layout LAYOUT's one image, lying:
#                              /v2/lie/manifests/<digest> answers another manifest's bytes,
#                              /v2/badlayer/ serves a layer with one byte flipped,
#                              /v2/dcd/ a manifest under a false Docker-Content-Digest,
#                              /v2/redir/ (Basic auth) redirects blobs to another origin (the
#                              "blob store",
#                              on a port of its own) and /v2/basic/ wants Basic USER:PASSWORD
#                              from the environment; it logs every Authorization it gets to
#                              LAYOUT/../liar.log, the store its own to LAYOUT/../store.log
#   silent                     accepts connections and never says a byte
#
# usage: registry_fake.py PORTFILE MODE ARGS...
import base64
import hashlib
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.parse


def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def listen_port(srv, portfile):
    with open(portfile + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(portfile + ".tmp", portfile)


class Quiet(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send(self, code, body=b"", ctype="application/json", headers=()):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


def token_server(portfile, d, user, password):
    der = subprocess.run(["openssl", "x509", "-in", os.path.join(d, "cert.pem"), "-outform",
                          "DER"], check=True, capture_output=True).stdout
    want = "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()

    class H(Quiet):
        def do_GET(self):
            auth = self.headers.get("Authorization", "")
            with open(os.path.join(d, "token.log"), "a") as f:
                f.write("%s %s\n" % (self.path, auth))
            if auth != want:
                self.send(401, b'{"details":"bad credentials: %s"}' % auth.encode())
                return
            q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            access = []
            for scope in q.get("scope", []):
                for one in scope.split(" "):
                    typ, name, actions = one.split(":")
                    access.append({"type": typ, "name": name, "actions": actions.split(",")})
            now = int(time.time())
            hdr = {"typ": "JWT", "alg": "RS256", "x5c": [base64.b64encode(der).decode()]}
            claims = {"iss": "test-issuer", "sub": user, "aud": q.get("service", [""])[0],
                      "exp": now + 600, "nbf": now - 10, "iat": now,
                      "jti": hashlib.sha256(os.urandom(16)).hexdigest(), "access": access}
            signing = (b64url(json.dumps(hdr).encode()) + "." +
                       b64url(json.dumps(claims).encode())).encode()
            sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign",
                                  os.path.join(d, "key.pem")], input=signing, check=True,
                                 capture_output=True).stdout
            tok = signing.decode() + "." + b64url(sig)
            self.send(200, json.dumps({"token": tok, "expires_in": 600}).encode())

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    listen_port(srv, portfile)
    srv.serve_forever()


def liar(portfile, layout):
    top = os.path.dirname(os.path.abspath(layout))
    blobs = os.path.join(layout, "blobs", "sha256")
    index = json.load(open(os.path.join(layout, "index.json")))
    mdesc = [m for m in index["manifests"]
             if m.get("platform", {}).get("architecture") == "amd64"][0]
    man_bytes = open(os.path.join(blobs, mdesc["digest"][7:]), "rb").read()
    man = json.loads(man_bytes)
    other = b'{"schemaVersion":2,"manifests":[]}'
    basic = "Basic " + base64.b64encode(os.environ.get("LIAR_BASIC", "").encode()).decode()

    def blob(digest):
        p = os.path.join(blobs, digest[7:])
        return open(p, "rb").read() if os.path.exists(p) else None

    # the blob store a registry redirects to: another origin, which must see no credential
    class Store(Quiet):
        def do_GET(self):
            with open(os.path.join(top, "store.log"), "a") as f:
                f.write("%s %s\n" % (self.path, self.headers.get("Authorization", "")))
            b = blob(self.path.rsplit("/", 1)[1])
            self.send(200 if b else 404, b or b"", "application/octet-stream")

    store = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Store)
    threading.Thread(target=store.serve_forever, daemon=True).start()

    class H(Quiet):
        def do_GET(self):
            auth = self.headers.get("Authorization", "")
            with open(os.path.join(top, "liar.log"), "a") as f:
                f.write("%s %s\n" % (self.path, auth))
            parts = self.path.split("/")
            if self.path == "/v2/":
                self.send(200, b"{}")
                return
            repo, kind, ref = parts[2], parts[3], parts[4]
            if repo in ("basic", "redir") and auth != basic:
                self.send(401, b'{"errors":[{"code":"UNAUTHORIZED","message":"%s"}]}' %
                          auth.encode(), headers=[("WWW-Authenticate", 'Basic realm="fake"')])
                return
            if kind == "manifests":
                body = man_bytes
                hdrs = [("Docker-Content-Digest", mdesc["digest"])]
                if repo == "lie" and ref.startswith("sha256:"):
                    body = other  # not the bytes of the digest asked
                if repo == "dcd":
                    hdrs = [("Docker-Content-Digest", "sha256:" + "0" * 64)]
                self.send(200, body, man["mediaType"], hdrs)
                return
            b = blob(ref)
            if b is None:
                self.send(404, b'{"errors":[{"code":"BLOB_UNKNOWN"}]}')
                return
            if repo == "redir":
                self.send(307, b"", headers=[
                    ("Location", "http://127.0.0.1:%d/store/%s" % (store.server_address[1],
                                                                   ref))])
                return
            if repo == "badlayer" and ref == man["layers"][-1]["digest"]:
                b = b[:-1] + bytes([b[-1] ^ 1])  # its size, one byte off
            self.send(200, b, "application/octet-stream")

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    listen_port(srv, portfile)
    srv.serve_forever()


def silent(portfile):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    with open(portfile + ".tmp", "w") as f:
        f.write(str(s.getsockname()[1]))
    os.rename(portfile + ".tmp", portfile)
    held = []
    while True:
        c, _ = s.accept()
        held.append(c)  # never read, never answered, never closed


if __name__ == "__main__":
    portfile, mode = sys.argv[1], sys.argv[2]
    if mode == "token":
        token_server(portfile, *sys.argv[3:6])
    elif mode == "liar":
        liar(portfile, sys.argv[3])
    elif mode == "silent":
        silent(portfile)
    else:
        sys.exit("registry_fake.py: unknown mode " + mode)
