# SPDX-License-Identifier: Apache-2.0
"""What a command starts with, as sandboxctl exec gives it (tools/sandboxctl/exec.c): the
built-in environment, an imported image's exec.conf (docs/images.md), the network's CA
variables, the caller's; the image's workdir and user; HOME for other users. Natively: the
EXEC payload is built and read back."""

import os
import struct

import pytest

from sandbox_sdk import _calls as c, _host as h, _wire as w


def decode(payload):
    flags, uid, gid, timeout, rows, cols, argc, envc = struct.unpack_from("<IIIIHHHH", payload)
    strings = payload[24:].split(b"\0")[:-1]
    assert len(strings) == 1 + argc + envc
    cwd, argv, env = strings[0], strings[1:1 + argc], strings[1 + argc:]
    return {"uid": uid, "gid": gid, "timeout": timeout, "cwd": cwd.decode(),
            "argv": [a.decode() for a in argv],
            "env": dict(e.decode().split("=", 1) for e in env)}


@pytest.fixture
def image(tmp_path, monkeypatch):
    monkeypatch.setenv("SANDBOX_HOME", str(tmp_path))
    os.makedirs(tmp_path / "images" / "oci")

    def make(conf, network=False):
        (tmp_path / "images" / "oci" / "exec.conf").write_text(conf)
        info = h.SandboxInfo("0123456789ab", {"image": "oci",
                                              "network": "proxy" if network else "none"})
        return h.ExecDefaults(info)
    return make


def req(defaults, cmd=("true",), **kw):
    args = dict(env=None, cwd=None, user=None, timeout=None, stdin=False, pty=False)
    args.update(kw)
    return decode(c.exec_request(defaults, list(cmd) if cmd else None, **args)[1])


def test_plain_image(image):
    r = req(image(""))
    assert r["env"] == dict(h.DEFAULT_ENV) and r["cwd"] == ""
    assert (r["uid"], r["gid"]) == (w.PROTO_ID_KEEP, w.PROTO_ID_KEEP)


def test_image_env_workdir_user_entrypoint(image):
    d = image("env PATH=/opt/bin:/usr/bin\nenv GREETING=hi there\nworkdir /srv/app\n"
              "user 1000:1001\nentrypoint /bin/echo\nentrypoint from\ncmd entry point\n")
    r = req(d)
    assert r["env"]["PATH"] == "/opt/bin:/usr/bin" and r["env"]["GREETING"] == "hi there"
    assert r["env"]["HOME"] == "/"  # a non-root user without a HOME of the image's
    assert (r["cwd"], r["uid"], r["gid"]) == ("/srv/app", 1000, 1001)
    assert req(d, cmd=None)["argv"] == ["/bin/echo", "from", "entry point"]  # one arg a line
    over = req(d, env={"GREETING": "yo"}, cwd="/tmp", user=c.parse_user("0"))
    assert over["env"]["GREETING"] == "yo" and over["cwd"] == "/tmp"
    assert (over["uid"], over["env"]["HOME"]) == (0, "/root")


def test_image_home_kept_and_network_env(image):
    d = image("env HOME=/home/app\nuser 5:5\n", network=True)
    r = req(d)
    assert r["env"]["HOME"] == "/home/app"
    assert r["env"]["SSL_CERT_FILE"] == "/etc/sandbox/bundle.pem"
    assert r["env"]["NODE_EXTRA_CA_CERTS"] == "/etc/sandbox/ca.pem"


def test_no_command_without_entrypoint(image):
    with pytest.raises(ValueError, match="no entrypoint"):
        req(image(""), cmd=None)


def test_user_names_from_the_guests_passwd():
    passwd = "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000::/home/app:/bin/sh\n"
    group = "root:x:0:\nstaff:x:50:\n"
    assert c.parse_user("app", passwd, group) == (1000, 1000, "/home/app")
    assert c.parse_user("app:staff", passwd, group) == (1000, 50, "/home/app")
    assert c.parse_user("7:8") == (7, 8, None) and c.parse_user(9) == (9, 9, None)
    for bad in ("nobody", "app:nogroup"):
        with pytest.raises(Exception, match="not in the guest"):
            c.parse_user(bad, passwd, group)
    with pytest.raises(ValueError):
        c.parse_user("4294967295")


@pytest.mark.parametrize("line", ["user 1000", "user 4294967295:0", "user a:b", "user 1:2:3"])
def test_a_bad_user_line_is_refused(image, line):
    with pytest.raises(Exception, match="bad user line"):
        image(line + "\n")


def test_only_newline_ends_an_exec_conf_line(image):
    # \r, U+2028, U+0085 inside a value are the value's, as the C reader (image_conf.c) has it
    d = image("env A=x\ruser 0:0\nenv B=y\u2028workdir /root\nenv C=z\x85entrypoint /bin/evil\n"
              "cmd /bin/app\n")
    assert d.env["A"] == "x\ruser 0:0" and d.env["B"] == "y\u2028workdir /root"
    assert (d.uid, d.cwd, d.entrypoint, d.cmd) == (None, "", [], ["/bin/app"])
