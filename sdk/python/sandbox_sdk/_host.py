# SPDX-License-Identifier: Apache-2.0
"""The host's side of a sandbox: its directory under $SANDBOX_HOME (docs/sandboxctl.md,
"State"), the image's exec defaults (docs/images.md, exec.conf), and the sandboxctl command
lines that create, snapshot, restore, fork, suspend and remove sandboxes.

Why lifecycle calls go through sandboxctl: creating a sandbox makes its disk layers, cgroup,
network namespace, proxy and jail, and a snapshot seals its files with the host's key. That
logic lives once, in the C client library (client/) that sandboxctl links; a second copy in
Python would drift. Calls *on* a running sandbox (commands, files, pause, resume) speak the
documented protocols over its sockets directly and keep their connection.
"""

import os
import re
import shutil
import subprocess

from . import _wire as w
from .errors import SandboxError, SandboxNotFoundError, SandboxStateError

_ID_RE = re.compile(r"^[0-9a-f]{12}$")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
_USER_RE = re.compile(r"([0-9]{1,10}):([0-9]{1,10})\Z")
CONFIG_MAX = 64 << 10
EXEC_CONF_MAX = 64 << 10

DEFAULT_ENV = (
    ("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),
    ("HOME", "/root"),
    ("LANG", "C.UTF-8"),
)
# In a networked sandbox: where TLS clients find the bundle with the proxy's CA (as exec.c).
NET_ENV = (
    ("SSL_CERT_FILE", "/etc/sandbox/bundle.pem"),
    ("REQUESTS_CA_BUNDLE", "/etc/sandbox/bundle.pem"),
    ("CURL_CA_BUNDLE", "/etc/sandbox/bundle.pem"),
    ("NODE_EXTRA_CA_CERTS", "/etc/sandbox/ca.pem"),
)


def home():
    return os.environ.get("SANDBOX_HOME") or "/var/lib/sandbox"


def sandboxctl_path(explicit=None):
    """$SANDBOXCTL, else sandboxctl on PATH, else the build tree's beside this checkout."""
    for cand in (explicit, os.environ.get("SANDBOXCTL")):
        if cand:
            return cand
    found = shutil.which("sandboxctl")
    if found:
        return found
    here = os.path.dirname(os.path.abspath(__file__))
    tree = os.path.join(here, "..", "..", "..", "build", "tools", "sandboxctl", "sandboxctl")
    if os.access(tree, os.X_OK):
        return os.path.normpath(tree)
    raise SandboxError("sandboxctl not found: set SANDBOXCTL or put it on PATH")


def _read_small(path, limit):
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise SandboxError("%s: larger than %d bytes" % (path, limit))
    return data.decode("utf-8", "replace")


class SandboxInfo:
    """What a sandbox's directory says of it: id, name, image, network, paths."""

    def __init__(self, sid, config):
        self.id = sid
        self.dir = os.path.join(home(), "sandboxes", sid)
        self.name = config.get("name", "")
        self.image = config.get("image", "")
        self.network = config.get("network", "none") == "proxy"
        self.vsock = os.path.join(self.dir, "vsock.sock")
        self.api = os.path.join(self.dir, "api.sock")

    def marker(self, name):
        return os.path.exists(os.path.join(self.dir, name))


def _load(sid):
    cfg = {}
    try:
        text = _read_small(os.path.join(home(), "sandboxes", sid, "config"), CONFIG_MAX)
    except FileNotFoundError:
        return None
    for line in text.split("\n"):  # as the C readers: \r, U+2028 &c. are not line ends
        key, _, value = line.partition(" ")
        cfg.setdefault(key, value)
    if cfg.get("id") != sid:
        return None
    return SandboxInfo(sid, cfg)


def resolve(ref):
    """The sandbox of full id, unique id prefix or name, as sandboxctl resolves it."""
    if not isinstance(ref, str) or not _NAME_RE.match(ref):
        raise SandboxNotFoundError("%r is not a sandbox id or name" % (ref,))
    try:
        ids = [d for d in os.listdir(os.path.join(home(), "sandboxes")) if _ID_RE.match(d)]
    except FileNotFoundError:
        ids = []
    exact, prefix = [], []
    for sid in ids:
        info = _load(sid)
        if info is None:
            continue
        if ref in (sid, info.name):
            exact.append(info)
        elif sid.startswith(ref):
            prefix.append(info)
    if len(exact) == 1:
        return exact[0]
    if not exact and len(prefix) == 1:
        return prefix[0]
    if exact or prefix:
        raise SandboxNotFoundError("'%s' matches several sandboxes: give more of the id" % ref)
    raise SandboxNotFoundError("no sandbox '%s'" % ref)


class ExecDefaults:
    """What a command in this sandbox starts with unless the call says otherwise: the
    built-in environment, the image's (exec.conf), the network's; the image's workdir and
    user; its entrypoint and cmd."""

    def __init__(self, info):
        self.env = dict(DEFAULT_ENV)
        self.cwd = ""
        self.uid = self.gid = None
        self.entrypoint, self.cmd = [], []
        self.image_home = False  # the image's env sets HOME
        path = os.path.join(home(), "images", info.image, "exec.conf")
        try:
            text = _read_small(path, EXEC_CONF_MAX)
        except FileNotFoundError:
            text = ""
        for line in text.split("\n"):  # as the C readers: \r, U+2028 &c. are not line ends
            key, _, value = line.partition(" ")
            if key == "env" and "=" in value:
                k, _, v = value.partition("=")
                self.env[k] = v
                self.image_home = self.image_home or k == "HOME"
            elif key == "workdir":
                self.cwd = value
            elif key == "user":  # as image_conf_parse: UID:GID, each below 0xffffffff
                m = _USER_RE.match(value)
                if not m or max(int(m.group(1)), int(m.group(2))) >= 0xFFFFFFFF:
                    raise SandboxError("%s: a bad user line %r" % (path, value[:40]))
                self.uid, self.gid = int(m.group(1)), int(m.group(2))
            elif key == "entrypoint":
                self.entrypoint.append(value)
            elif key == "cmd":
                self.cmd.append(value)
        if info.network:
            for k, v in NET_ENV:
                self.env.setdefault(k, v)
        self._block = None

    def environment(self, user):
        """(environment dict, uid, gid) for a command run as `user` (parse_user's triple, or
        None for the image's user, else root)."""
        env = dict(self.env)
        uid = gid = w.PROTO_ID_KEEP
        home = None
        if user is not None:
            uid, gid, home = user
        elif self.uid is not None:
            uid, gid = self.uid, self.gid
        if home:  # a user named in /etc/passwd: its home
            env["HOME"] = home
        elif uid not in (0, w.PROTO_ID_KEEP) and not self.image_home:
            env["HOME"] = "/"  # root's home is not another user's (as sandboxctl exec, Docker)
        return env, uid, gid

    def block(self):
        """(env_block of the default environment, uid, gid), made once."""
        if self._block is None:
            env, uid, gid = self.environment(None)
            self._block = (w.env_block(["%s=%s" % kv for kv in env.items()]), uid, gid)
        return self._block


def state(info):
    """The state sandboxctl would show, from the directory's markers: "suspended",
    "stopped", or None (ask the VMM: running, paused, or dead)."""
    if info.marker("suspended"):
        return "suspended"
    if info.marker("stopped"):
        return "stopped"
    return None


def ctl(args, sandboxctl=None, timeout=None):
    """Run sandboxctl ARGS; its stdout's lines, or SandboxError with its stderr."""
    argv = [sandboxctl_path(sandboxctl)] + [str(a) for a in args]
    try:
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as e:
        raise SandboxError("sandboxctl %s: no answer in %s s" % (args[0], timeout)) from e
    if p.returncode != 0:
        raise ctl_error(args, p.returncode, p.stderr)
    return p.stdout.decode("utf-8", "replace").split()


def ctl_error(args, status, stderr):
    msg = stderr.decode("utf-8", "replace").strip()
    msg = msg.replace("sandboxctl: ", "") or "sandboxctl %s: status %d" % (args[0], status)
    if "no sandbox" in msg or "no snapshot" in msg or "not a sandbox id" in msg:
        return SandboxNotFoundError(msg)
    if status == 125 and ("is paused" in msg or "is stopped" in msg or "is suspended" in msg):
        return SandboxStateError(msg)
    return SandboxError(msg)


def create_args(image, cpus, memory, network, name, timeout, ttl, disk_size, cold):
    args = ["create"]
    if image:
        args += ["--image", image]
    if cpus:
        args += ["--cpus", cpus]
    if memory:
        args += ["--memory", memory]
    if name:
        args += ["--name", name]
    if timeout:
        args += ["--timeout", int(timeout)]
    if ttl:
        args += ["--ttl", ttl]
    if disk_size:
        args += ["--disk-size", disk_size]
    if cold:
        args.append("--cold")
    args += network_args(network)
    return args


def network_args(network):
    """--network none, or the proxy with a policy: {"allow": [...], "deny": [...],
    "allow_cidr": [...], "allow_port": [...], "deny_all": bool, "credentials": [...]}."""
    if network in (None, "proxy", True):
        return []
    if network in ("none", False):
        return ["--network", "none"]
    if not isinstance(network, dict):
        raise ValueError("network: give 'proxy', 'none' or a policy dict")
    flags = {"allow": "--allow", "deny": "--deny", "allow_cidr": "--allow-cidr",
             "allow_port": "--allow-port", "credentials": "--credential"}
    args = []
    for key, value in network.items():
        if key == "deny_all":
            args += ["--deny-all"] if value else []
        elif key in flags:
            for v in ([value] if isinstance(value, (str, int)) else value):
                args += [flags[key], v]
        else:
            raise ValueError("network: unknown key %r (allow, deny, allow_cidr, allow_port, "
                             "deny_all, credentials)" % key)
    return args
