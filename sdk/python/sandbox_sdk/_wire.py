# SPDX-License-Identifier: Apache-2.0
"""The guest agent's wire format (wire/proto.h, docs/agent-protocol.md) and the VMM's control
protocol (wire/api_proto.h), as Python.

wire/proto.h is the definition; this module mirrors its numbers and layouts and checks what
it receives the way the C decoder does: a header is checked before its payload is read, and a
frame longer than PROTO_MAX_PAYLOAD is refused from its header alone, so a hostile guest can
never make us size a buffer. Nothing here does I/O.
"""

import struct

from .errors import printable

PROTO_VERSION = 4
PROTO_VSOCK_PORT = 52
PROTO_HDR_LEN = 16
PROTO_MAX_PAYLOAD = 1 << 20
PROTO_ID_KEEP = 0xFFFFFFFF

# The message types and their minimum payload lengths, as PROTO_MESSAGES has them.
MSG_HELLO, MSG_PING, MSG_PONG, MSG_EXEC, MSG_STARTED = 1, 2, 3, 4, 5
MSG_STDOUT, MSG_STDERR, MSG_EXIT, MSG_STDIN, MSG_STDIN_CLOSE = 6, 7, 8, 9, 10
MSG_RESIZE, MSG_SIGNAL, MSG_OK, MSG_ERROR, MSG_FILE_WRITE = 11, 12, 13, 14, 15
MSG_FILE_READ, MSG_DATA, MSG_END, MSG_STAT, MSG_STAT_REPLY = 16, 17, 18, 19, 20
MSG_LIST, MSG_DIRENT, MSG_MKDIR, MSG_REMOVE, MSG_SYNC = 21, 22, 23, 24, 25
MSG_RESEED, MSG_SHUTDOWN, MSG_SET_CLOCK = 26, 27, 28
_MIN_LEN = {
    MSG_HELLO: 8, MSG_PING: 0, MSG_PONG: 8, MSG_EXEC: 24, MSG_STARTED: 8, MSG_STDOUT: 0,
    MSG_STDERR: 0, MSG_EXIT: 16, MSG_STDIN: 0, MSG_STDIN_CLOSE: 0, MSG_RESIZE: 8,
    MSG_SIGNAL: 16, MSG_OK: 0, MSG_ERROR: 8, MSG_FILE_WRITE: 16, MSG_FILE_READ: 1,
    MSG_DATA: 0, MSG_END: 0, MSG_STAT: 1, MSG_STAT_REPLY: 32, MSG_LIST: 1, MSG_DIRENT: 32,
    MSG_MKDIR: 8, MSG_REMOVE: 8, MSG_SYNC: 0, MSG_RESEED: 1, MSG_SHUTDOWN: 8,
    MSG_SET_CLOCK: 16,
}
FINAL = frozenset((MSG_EXIT, MSG_OK, MSG_PONG, MSG_STAT_REPLY, MSG_END, MSG_ERROR))

EXEC_STDIN = 0x1
EXEC_PTY = 0x2
EXIT_SIGNALED = 0x1
EXIT_TIMED_OUT = 0x2
MKDIR_PARENTS = 0x1
REMOVE_RECURSIVE = 0x1

_HDR = struct.Struct("<IHHQ")
_EXEC = struct.Struct("<IIIIHHHH")
_EXIT = struct.Struct("<IIII")
_STAT = struct.Struct("<QqIIII")
_ERROR = struct.Struct("<II")


class ProtocolError(Exception):
    """The peer broke the wire format: the connection cannot go on."""


def is_final(msg_type):
    return msg_type in FINAL


def frame(msg_type, call_id, payload=b""):
    """One frame's bytes."""
    if len(payload) > PROTO_MAX_PAYLOAD:
        raise ValueError("a frame's payload is at most %d bytes" % PROTO_MAX_PAYLOAD)
    return _HDR.pack(len(payload), msg_type, 0, call_id) + payload


def hello():
    return frame(MSG_HELLO, 0, struct.pack("<II", PROTO_VERSION, PROTO_MAX_PAYLOAD))


def check_header(hdr, off=0):
    """(len, type, id) of the 16-byte header at hdr[off:], checked as proto_hdr_check does."""
    length, msg_type, flags, call_id = _HDR.unpack_from(hdr, off)
    if length > PROTO_MAX_PAYLOAD:
        raise ProtocolError("frame of %d bytes (at most %d)" % (length, PROTO_MAX_PAYLOAD))
    if msg_type not in _MIN_LEN:
        raise ProtocolError("unknown frame type %d" % msg_type)
    if flags or length < _MIN_LEN[msg_type]:
        raise ProtocolError("malformed frame of type %d" % msg_type)
    return length, msg_type, call_id


class Decoder:
    """Bytes in as they arrive, checked frames (type, id, payload) out."""

    def __init__(self):
        self._buf = bytearray()
        self._need = None  # (len, type, id) of the frame whose payload is awaited

    def feed(self, data):
        buf = self._buf
        buf += data
        out, off, end = [], 0, len(buf)
        while True:
            if self._need is None:
                if end - off < PROTO_HDR_LEN:
                    break
                self._need = check_header(buf, off)
                off += PROTO_HDR_LEN
            length, msg_type, call_id = self._need
            if end - off < length:
                break
            out.append((msg_type, call_id, bytes(buf[off:off + length])))
            off += length
            self._need = None
        del buf[:off]
        return out


def check_hello(msg_type, payload):
    if msg_type == MSG_ERROR:
        err, msg = parse_error(payload)
        raise ProtocolError("the agent refused our HELLO: %s (errno %d)" % (printable(msg), err))
    if msg_type != MSG_HELLO or struct.unpack_from("<I", payload)[0] != PROTO_VERSION:
        raise ProtocolError("the agent does not speak protocol version %d" % PROTO_VERSION)


def _strings(*items):
    out = bytearray()
    for s in items:
        b = s.encode() if isinstance(s, str) else bytes(s)
        if b"\0" in b:
            raise ValueError("a string for the agent holds a NUL byte: %r" % (s,))
        out += b + b"\0"
    return bytes(out)


def env_block(env):
    """(the strings of an environment, encoded as EXEC carries them, how many): a sandbox's
    default environment is encoded once and reused by every command that keeps it."""
    return _strings(*env), len(env)


def exec_payload(argv, env, cwd="", uid=PROTO_ID_KEEP, gid=PROTO_ID_KEEP, timeout_ms=0,
                 stdin=False, pty=False, rows=0, cols=0, block=None):
    """EXEC's payload; `block` (env_block's) stands for `env` when given."""
    blob, envc = block if block is not None else env_block(env)
    if not argv or len(argv) > 0xFFFF or envc > 0xFFF0:
        raise ValueError("a command needs 1 to 65535 arguments")
    flags = (EXEC_STDIN if stdin else 0) | (EXEC_PTY if pty else 0)
    head = _EXEC.pack(flags, uid, gid, min(timeout_ms, 0xFFFFFFFF), rows, cols, len(argv),
                      envc)
    payload = head + _strings(cwd, *argv) + blob
    if len(payload) > PROTO_MAX_PAYLOAD:
        raise ValueError("the command, its environment and cwd exceed %d bytes" %
                         PROTO_MAX_PAYLOAD)
    return payload


def path_payload(path, head=b""):
    return head + _strings(path)


def file_write_payload(path, mode, uid=PROTO_ID_KEEP, gid=PROTO_ID_KEEP):
    return path_payload(path, struct.pack("<IIII", mode & 0o7777, uid, gid, 0))


def mkdir_payload(path, mode, parents):
    return path_payload(path, struct.pack("<II", mode, MKDIR_PARENTS if parents else 0))


def remove_payload(path, recursive):
    return path_payload(path, struct.pack("<II", REMOVE_RECURSIVE if recursive else 0, 0))


def signal_payload(target_id, signo):
    return struct.pack("<QII", target_id, signo, 0)


def parse_error(payload):
    err, _ = _ERROR.unpack_from(payload)
    msg = payload[_ERROR.size:].decode("utf-8", "replace")
    return err, msg


def parse_exit(payload):
    """(code, signal, flags)."""
    code, signo, flags, _ = _EXIT.unpack_from(payload)
    return code, signo, flags


def parse_stat(payload):
    """(size, mtime, mode, uid, gid, rest of the payload)."""
    size, sec, nsec, mode, uid, gid = _STAT.unpack_from(payload)
    return size, sec + nsec / 1e9, mode, uid, gid, payload[_STAT.size:]


def parse_started(payload):
    return struct.unpack_from("<I", payload)[0]


# ---- wire/api_proto.h: api.sock ----

API_MAGIC = 0x41584253
API_VERSION = 1
API_PAYLOAD_MAX = 4096
API_REPLY = 0x8000
API_STATUS, API_PAUSE, API_RESUME = 1, 2, 3
API_STATES = {1: "running", 2: "paused", 3: "stopping"}
_API_HDR = struct.Struct("<IHHII")
API_HDR_LEN = _API_HDR.size


def api_request(req_type, req_id):
    return _API_HDR.pack(API_MAGIC, API_VERSION, req_type, req_id, 0)


def api_reply_header(hdr, req_type, req_id):
    """The payload length of a reply's header, checked against the request it answers."""
    magic, version, rtype, rid, length = _API_HDR.unpack(hdr)
    if (magic != API_MAGIC or version != API_VERSION or rtype != (req_type | API_REPLY) or
            rid != req_id or length > API_PAYLOAD_MAX or length < 8):
        raise ProtocolError("the VMM's api.sock sent a malformed reply")
    return length


def api_reply(payload):
    """(error, status dict or None) of a reply's payload."""
    error = struct.unpack_from("<i", payload)[0]
    status = None
    if len(payload) >= 8 + 32:
        state, ncpus, mem, uptime, pid, _ = struct.unpack_from("<IIQQII", payload, 8)
        status = {"state": API_STATES.get(state, "unknown"), "cpus": ncpus,
                  "memory_mib": mem, "uptime_ms": uptime, "pid": pid}
    return error, status
