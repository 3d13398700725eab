#!/usr/bin/env python3
# Writes the OCI and Docker archives the oci-import tests import, by hand (tarfile, json,
# hashlib, gzip; no registry, no network):
#   good-oci.tar      an OCI image layout in a tar (index.json naming an arm64 image too)
#   good-oci/         the same layout as a directory
#   good-docker.tar   a docker save archive (manifest.json, HEX.json, ID/layer.tar)
#   bad-*.tar         one hostile thing each (see BAD below)
#   planted-abs.tar   a symlink to $CANARY planted by one layer, written through by the next
#   esc-*.tar         a ref name, a tag holding terminal escapes
#   repeat.tar        one long directory path named 20000 times in a layer
#   fnv.tar           16384 paths that collide under an unkeyed FNV-1a
#   opaque.tar        a directory made opaque 5000 times by one layer
#   json-keys.tar     a nested index of 63 objects of 4096 keys
# The image: 3 layers (gzip, plain tar, gzip); /bin/busybox (the host's, or a script) with
# applet links; /etc/passwd naming app = 1000:1000; /gone.txt deleted by a whiteout in layer 2;
# /opq/ made opaque in layer 2 (old1, old2 gone, new kept); /app/suid owned by 1000:1000 mode
# 4755; /app/link a symlink; /app/hard a hard link to /app/suid; /app/xattr with the pax xattrs
# user.note (kept) and trusted.evil (skipped); Env, WorkingDir /app/work,
# User app, Entrypoint and Cmd.
#
# usage: oci_make.py OUTDIR [BUSYBOX]
import gzip
import hashlib
import io
import itertools
import json
import os
import random
import sys
import tarfile

out = sys.argv[1]
busybox = sys.argv[2] if len(sys.argv) > 2 else None
MTIME = 1700000000


def entry(name, kind="file", data=b"", mode=0o644, uid=0, gid=0, link="", pax=None):
    return (name, kind, data, mode, uid, gid, link, pax)


def make_tar(entries, fmt=tarfile.PAX_FORMAT):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
        for name, kind, data, mode, uid, gid, link, pax in entries:
            ti = tarfile.TarInfo(name)
            if pax:
                ti.pax_headers = pax
            ti.mode, ti.uid, ti.gid, ti.mtime = mode, uid, gid, MTIME
            if kind == "dir":
                ti.type = tarfile.DIRTYPE
            elif kind == "symlink":
                ti.type, ti.linkname = tarfile.SYMTYPE, link
            elif kind == "hardlink":
                ti.type, ti.linkname = tarfile.LNKTYPE, link
            elif kind == "chardev":
                ti.type, ti.devmajor, ti.devminor = tarfile.CHRTYPE, 1, 3
            else:
                ti.size = len(data)
            t.addfile(ti, io.BytesIO(data) if kind == "file" else None)
    return buf.getvalue()


def sha(b):
    return "sha256:" + hashlib.sha256(b).hexdigest()


APPLETS = ["sh", "env", "pwd", "id", "cat", "ls", "echo", "sleep", "stat", "test", "true"]


def base_layers():
    bb = open(busybox, "rb").read() if busybox else b"#!/bin/sh\necho not a busybox\n"
    l1 = [entry("bin", "dir", mode=0o755), entry("etc", "dir", mode=0o755),
          entry("bin/busybox", data=bb, mode=0o755)]
    l1 += [entry("bin/" + a, "symlink", link="busybox") for a in APPLETS]
    l1 += [entry("etc/passwd", data=b"root:x:0:0:root:/root:/bin/sh\n"
                 b"app:x:1000:1000:app:/home/app:/bin/sh\n"),
           entry("etc/group", data=b"root:x:0:\napp:x:1000:\n"),
           entry("gone.txt", data=b"deleted by layer 2\n"),
           entry("opq", "dir", mode=0o755),
           entry("opq/old1", data=b"old\n"), entry("opq/old2", data=b"old\n"),
           entry("keep.txt", data=b"kept\n")]
    l2 = [entry(".wh.gone.txt"), entry("opq/new", data=b"new\n"), entry("opq/.wh..wh..opq"),
          entry("app", "dir", mode=0o755),
          entry("app/suid", data=b"#!/bin/sh\necho suid\n", mode=0o4755, uid=1000, gid=1000)]
    l3 = [entry("app/link", "symlink", link="../etc/hostname"),
          entry("app/hard", "hardlink", link="app/suid"),
          entry("etc/hostname", data=b"oci-test\n"),
          entry("app/xattr", data=b"x\n", pax={"SCHILY.xattr.user.note": "hello",
                                               "SCHILY.xattr.trusted.evil": "1"}),
          entry("dev", "dir", mode=0o755), entry("dev/null", "chardev", mode=0o666)]
    return [make_tar(l1), make_tar(l2, tarfile.GNU_FORMAT), make_tar(l3)]


CONFIG = {
    "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "GREETING=hello world", "APP_MODE=test"],
    "WorkingDir": "/app/work",
    "User": "app",
    "Entrypoint": ["/bin/sh", "-c"],
    "Cmd": ["echo entrypoint ran as $(id -u) in $(pwd)"],
}


def image_config(diff_ids, arch="amd64", cfg=CONFIG):
    return json.dumps({"architecture": arch, "os": "linux", "config": cfg,
                       "rootfs": {"type": "layers", "diff_ids": diff_ids}}).encode()


def oci_files(layers, gz=(True, False, True), extra_arm=True, config=None, index=None,
              corrupt=None, level=9):
    """The files of an OCI layout: {path: bytes}."""
    files = {"oci-layout": b'{"imageLayoutVersion": "1.0.0"}'}
    descs, diff_ids = [], []
    for i, raw in enumerate(layers):
        blob = gzip.compress(raw, level, mtime=0) if gz[i] else raw
        diff_ids.append(sha(raw))
        digest = sha(blob)
        if corrupt == i:  # the same size, one byte changed, under the old digest
            blob = blob[:-1] + bytes([blob[-1] ^ 1])
        files["blobs/sha256/" + digest[7:]] = blob
        descs.append({"mediaType": "application/vnd.oci.image.layer.v1.tar" +
                      ("+gzip" if gz[i] else ""), "digest": digest, "size": len(blob)})
    cfg = config if config is not None else image_config(diff_ids)
    files["blobs/sha256/" + sha(cfg)[7:]] = cfg
    man = json.dumps({"schemaVersion": 2,
                      "mediaType": "application/vnd.oci.image.manifest.v1+json",
                      "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                 "digest": sha(cfg), "size": len(cfg)},
                      "layers": descs}).encode()
    files["blobs/sha256/" + sha(man)[7:]] = man
    mans = [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": sha(man),
             "size": len(man), "platform": {"os": "linux", "architecture": "amd64"},
             "annotations": {"org.opencontainers.image.ref.name": "test:latest"}}]
    if extra_arm:  # a second platform, which the import must pass over
        acfg = image_config(diff_ids, "arm64")
        aman = json.dumps({"schemaVersion": 2, "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json", "digest": sha(acfg),
            "size": len(acfg)}, "layers": descs}).encode()
        files["blobs/sha256/" + sha(acfg)[7:]] = acfg
        files["blobs/sha256/" + sha(aman)[7:]] = aman
        mans.append({"mediaType": "application/vnd.oci.image.manifest.v1+json",
                     "digest": sha(aman), "size": len(aman),
                     "platform": {"os": "linux", "architecture": "arm64"}})
    files["index.json"] = index if index is not None else json.dumps(
        {"schemaVersion": 2, "manifests": mans}).encode()
    return files


def write_tar(path, files):
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as t:
        for name in sorted(files):
            ti = tarfile.TarInfo(name)
            ti.size, ti.mtime, ti.mode = len(files[name]), MTIME, 0o644
            t.addfile(ti, io.BytesIO(files[name]))


def write_dir(path, files):
    for name, data in files.items():
        p = os.path.join(path, name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)


def docker_files(layers, tag="test:docker", cfg=CONFIG):
    files, names, diff_ids = {}, [], []
    for i, raw in enumerate(layers):
        lid = hashlib.sha256(b"layer-id-%d" % i).hexdigest()
        files[lid + "/layer.tar"] = raw
        files[lid + "/VERSION"] = b"1.0"
        names.append(lid + "/layer.tar")
        diff_ids.append(sha(raw))
    cfg = image_config(diff_ids, cfg=cfg)
    files[sha(cfg)[7:] + ".json"] = cfg
    files["manifest.json"] = json.dumps([{"Config": sha(cfg)[7:] + ".json",
                                          "RepoTags": [tag],
                                          "Layers": names}]).encode()
    return files


os.makedirs(out, exist_ok=True)
good = base_layers()
write_tar(os.path.join(out, "good-oci.tar"), oci_files(good))
write_dir(os.path.join(out, "good-oci"), oci_files(good))
write_tar(os.path.join(out, "good-docker.tar"), docker_files(good))

one = [entry("bin", "dir", mode=0o755), entry("etc", "dir", mode=0o755)]
BAD = {
    # the archive cut in the middle
    "truncated": None,
    # a header's byte changed (written below)
    "checksum": None,
    "bad-json": oci_files(good, index=b'{"schemaVersion": 2, "manifests": [}'),
    "digest": oci_files(good, corrupt=1),
    "dotdot": oci_files([make_tar(one + [entry("../../x", data=b"escaped\n")])],
                        gz=(True,), extra_arm=False),
    "symlink": oci_files([make_tar(one + [entry("evil", "symlink", link="../../../../tmp/CANARY"),
                                          entry("evil/file", data=b"through the link\n")])],
                         gz=(True,), extra_arm=False),
    "hardlink": oci_files([make_tar(one + [entry("passwd", "hardlink",
                                                 link="../../../../etc/passwd")])],
                          gz=(False,), extra_arm=False),
    "arm-only": oci_files([make_tar(one)], gz=(False,), extra_arm=False,
                          config=image_config([sha(make_tar(one))], "arm64")),
}
# deep: a short path reaching far down through symlinks (s -> 16 directories of 250 bytes,
# t -> s and 126 more, so t/A/... lies 268 down and its real path is over 4096 bytes): what
# would lie more than 256 directories down is refused before it is made, for an entry's
# parents, an opaque whiteout's directory and the WorkingDir alike
DEEP = "/".join(("L%02d" % i) + "x" * 247 for i in range(16))
A126 = "/".join(["a"] * 126)
deep = one + [entry(DEEP + "/x", data=b"x"), entry("s", "symlink", link="/" + DEEP),
              entry("s/" + A126 + "/f", data=b"f"), entry("t", "symlink", link="/s/" + A126)]
for name, last in (("deep", [entry("t/" + A126 + "/f", data=b"f")]),
                   ("deep-opq", [entry("t/" + A126 + "/.wh..wh..opq")]),
                   ("deep-workdir", [])):
    layer = make_tar(deep + last)
    BAD[name] = oci_files([layer], gz=(False,), extra_arm=False, config=image_config(
        [sha(layer)], cfg={"WorkingDir": "/t/" + A126, "Cmd": ["/bin/sh"]}))
# esc-oci.tar, esc-docker.tar: a ref name and a tag holding terminal escapes (a title, a clear
# screen, a colour): imported, the escapes printed as '?'
ESC = "x\x1b]0;PWNED\x07\x1b[2J\x1b[31mred\u009b1m"
esc = [make_tar(one)]
ecfg = image_config([sha(esc[0])], cfg={"Cmd": ["/bin/sh"]})
eoci = oci_files(esc, gz=(False,), extra_arm=False, config=ecfg)
eidx = json.loads(eoci["index.json"])
eidx["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"] = ESC
eoci["index.json"] = json.dumps(eidx).encode()
write_tar(os.path.join(out, "esc-oci.tar"), eoci)
write_tar(os.path.join(out, "esc-docker.tar"), docker_files(esc, ESC, {"Cmd": ["/bin/sh"]}))
# conf-*: a config value exec.conf cannot hold as one line for every reader (a CR, U+2028,
# U+0085 that Python's splitlines() breaks at, a tab, ESC): refused naming the field
for name, cfg in (("conf-cr", {"Env": ["PATH=/bin", "A=x\ruser 0:0"]}),
                  ("conf-u2028", {"Env": ["B=y\u2028workdir /root"]}),
                  ("conf-c1", {"Cmd": ["/bin/app", "z\u0085entrypoint /bin/evil"]}),
                  ("conf-tab", {"Entrypoint": ["a\tb"]}),
                  ("conf-workdir", {"WorkingDir": "/app\u2029x"}),
                  ("conf-user", {"User": "1000\x1b"})):
    layer = make_tar(one)
    BAD[name] = oci_files([layer], gz=(False,), extra_arm=False,
                          config=image_config([sha(layer)], cfg=cfg))
# repeat.tar: one directory of a 3.9 KB path named 20000 times in one layer (90 MB of tar,
# gzip): kept once, not 20000 times (the test runs it in 64 MiB of address space)
rpath = "/".join(("D%02d" % i) + "y" * 240 for i in range(16))
rone = make_tar([entry(rpath, "dir", mode=0o755)])
rone = rone[:rone.rfind(b"ustar") - 257 + 512]  # the pax header, its data, the dir's header
rlayer = rone * 20000 + b"\0" * 1024
write_tar(os.path.join(out, "repeat.tar"), oci_files(
    [rlayer], gz=(True,), extra_arm=False, level=1,
    config=image_config([sha(rlayer)], cfg={"Cmd": ["/bin/sh"]})))
# fnv.tar: 16384 symlinks (32 directories of 512) whose paths all collide in the low 24 bits
# of an unkeyed FNV-1a, the made set's old hash: each stage two 5-byte strings that lead the
# hash to the same state, 14 stages, every choice. Its User is unknown, so the import stops
# after the layers, before mke2fs: the test times the layer.
def fnv_names(stages=14, ndir=5, bits=24):
    rnd, mask = random.Random(1), (1 << bits) - 1
    prime, h = 1099511628211 & mask, 1469598103934665603 & mask

    def step(h, s):
        for ch in s:
            h = ((h ^ ch) * prime) & mask
        return h
    pairs = []
    for i in range(stages):
        if i == ndir:
            h = step(h, b"/")
        seen = {}
        while True:
            b = bytes(rnd.choice(b"abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(5))
            x = step(h, b)
            if x in seen and seen[x] != b:
                pairs.append((seen[x].decode(), b.decode()))
                h = x
                break
            seen[x] = b
    names = []
    for bits_ in itertools.product((0, 1), repeat=stages):
        s = "".join(pairs[i][bit] for i, bit in enumerate(bits_))
        names.append(s[:5 * ndir] + "/" + s[5 * ndir:])
    return names


flayer = make_tar([entry(n, "symlink", link="x") for n in fnv_names()], tarfile.USTAR_FORMAT)
write_tar(os.path.join(out, "fnv.tar"), oci_files(
    [flayer], gz=(True,), extra_arm=False, level=1,
    config=image_config([sha(flayer)], cfg={"User": "nobody-here"})))
# opaque.tar: a layer making a directory of 2000 files, then opaque 5000 times (each a re-read
# of the 2000 before); its User is unknown, as fnv.tar's
olayer = make_tar([entry("d", "dir", mode=0o755)] + [entry("d/f%04d" % i) for i in range(2000)] +
                  [entry("d/.wh..wh..opq")] * 5000, tarfile.USTAR_FORMAT)
write_tar(os.path.join(out, "opaque.tar"), oci_files(
    [olayer], gz=(True,), extra_arm=False,
    config=image_config([sha(olayer)], cfg={"User": "nobody-here"})))
# nested indexes: json-keys.tar, one of 4 MiB holding 64 objects of 4096 keys (8 million
# key compares each before, when a key was compared with all before it; imported);
# bad-json-twice.tar, one listed twice (read once); bad-json-total.tar, nine of 4 MiB
# (36 MiB of JSON in all, more than 32)
IDX = "application/vnd.oci.image.index.v1+json"


def with_nested(blobs):
    files = oci_files(good)
    idx = json.loads(files["index.json"])
    for b in blobs:
        files["blobs/sha256/" + sha(b)[7:]] = b
    idx["manifests"] = [{"mediaType": IDX, "digest": sha(b), "size": len(b)}
                        for b in blobs] + idx["manifests"]
    files["index.json"] = json.dumps(idx).encode()
    return files


kobj = "{" + ",".join('"k%05d":0' % i for i in range(4096)) + "}"
keys = ('{"schemaVersion":2,"manifests":[],"junk":[' + ",".join([kobj] * 63) + "]}").encode()
write_tar(os.path.join(out, "json-keys.tar"), with_nested([keys]))
BAD["json-twice"] = with_nested([keys, keys])
BAD["json-total"] = with_nested([('{"schemaVersion":2,"manifests":[],"n":%d}' % i).encode() +
                                 b" " * ((4 << 20) - 64) for i in range(9)])
# planted-abs.tar (with CANARY in the environment: a host directory): layer 1 makes that path's
# directories in the image and plants an absolute symlink to it, layer 2 writes a file through it. Not refused: an absolute
# target is inside the image, so the file lands at that path inside the image, never on the host.
if os.environ.get("CANARY"):
    dirs = os.environ["CANARY"].strip("/").split("/")
    mk = [entry("/".join(dirs[:i + 1]), "dir", mode=0o755) for i in range(len(dirs))]
    planted = [make_tar(one + mk + [entry("planted", "symlink", link=os.environ["CANARY"])]),
               make_tar([entry("planted/owned", data=b"through a planted link\n")])]
    pcfg = image_config([sha(t) for t in planted], cfg={"Cmd": ["/bin/sh"]})
    write_tar(os.path.join(out, "planted-abs.tar"), oci_files(planted, gz=(False, True),
                                                             extra_arm=False, config=pcfg))
# two linux/amd64 images in one index: which one is meant cannot be told
two = oci_files(good)
idx = json.loads(two["index.json"])
idx["manifests"][1]["platform"]["architecture"] = "amd64"
idx["manifests"][1]["annotations"] = {"org.opencontainers.image.ref.name": "other:latest"}
amd = image_config([sha(t) for t in good])
aman = json.loads(two["blobs/sha256/" + idx["manifests"][1]["digest"][7:]])
aman["config"] = {"mediaType": "application/vnd.oci.image.config.v1+json",
                  "digest": sha(amd), "size": len(amd)}
aman = json.dumps(aman).encode()
two["blobs/sha256/" + sha(aman)[7:]] = aman
idx["manifests"][1]["digest"], idx["manifests"][1]["size"] = sha(aman), len(aman)
two["index.json"] = json.dumps(idx).encode()
BAD["two-amd64"] = two
for name, files in BAD.items():
    path = os.path.join(out, "bad-%s.tar" % name)
    if name == "checksum":
        with open(os.path.join(out, "good-oci.tar"), "rb") as f:
            data = bytearray(f.read())
        data[5] ^= 0x20  # the first header's name: its checksum no longer holds
        with open(path, "wb") as f:
            f.write(data)
        continue
    if files is None:
        with open(os.path.join(out, "good-oci.tar"), "rb") as f:
            data = f.read()
        with open(path, "wb") as f:
            f.write(data[:len(data) * 2 // 3 // 512 * 512 + 100])
    else:
        write_tar(path, files)
