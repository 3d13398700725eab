# SPDX-License-Identifier: Apache-2.0
"""sb.files of a remote sandbox: the dataplane's POST /upload (one multipart part) and
GET/HEAD /download (../shared/LANGSMITH-API.md 4.3-4.5; docs/sdk.md, "Remote mode").

Bounds as the local SDK's reads: never more than `max_bytes` (default 256 MiB) read; a
body longer than that is refused once max_bytes + 1 bytes came (_http.py).
"""

import os
import shlex
import urllib.parse
from datetime import datetime

from . import _calls as c
from ._http import error_of
from .errors import RemoteUnsupportedError, ServiceError

LIST_MAX = 10000  # entries one listing asks for (the service's glob limit)


class RemoteFiles:
    def __init__(self, sandbox):
        self._sb = sandbox

    def _url(self, op, path):
        return "%s/%s?path=%s" % (self._sb._dataplane(), op, urllib.parse.quote(path, safe=""))

    def write(self, path, data, mode=0o644, user=None):
        """Write `data` (bytes, str, or a binary file object read to its end) to `path`;
        missing parent directories are made. mode and user are the local SDK's only."""
        if mode != 0o644 or user is not None:
            raise RemoteUnsupportedError("files.write(mode=, user=): not available in remote "
                                         "mode (the API's upload has neither)")
        if isinstance(data, str):
            data = data.encode()
        elif not isinstance(data, (bytes, bytearray, memoryview)):
            data = b"".join(c.write_chunks(data))
        boundary = "sandbox-sdk-" + os.urandom(12).hex()
        body = b"".join((
            b"--%s\r\n" % boundary.encode(),
            b'Content-Disposition: form-data; name="file"; filename="file"\r\n',
            b"Content-Type: application/octet-stream\r\n\r\n", bytes(data),
            b"\r\n--%s--\r\n" % boundary.encode()))
        status, _, got = self._sb._svc.request(
            "POST", self._url("upload", path), body,
            {"Content-Type": "multipart/form-data; boundary=" + boundary},
            timeout=60.0 + len(body) / (1 << 20))
        if status // 100 != 2:
            raise error_of(status, got, "file", path)

    def read(self, path, text=False, max_bytes=None):
        """The file's bytes (str with text=True), at most `max_bytes` (default 256 MiB)."""
        cap = c.READ_MAX if max_bytes is None else max_bytes
        status, hdrs, got = self._sb._svc.request("GET", self._url("download", path),
                                                  timeout=60.0 + cap / (1 << 20),
                                                  limit=cap)
        if status != 200:
            raise error_of(status, got, "file", path)
        n = hdrs.get("content-length")
        if n is not None and n.isdigit() and int(n) != len(got):
            raise ServiceError("%s: the service sent %d bytes of %s" % (path, len(got), n))
        return got.decode("utf-8", "replace") if text else got

    def stat(self, path):
        """EntryInfo of a regular file (HEAD of the download: its size and mtime; mode, uid
        and gid are not in the API: mode has only the file type, uid and gid are -1)."""
        status, hdrs, got = self._sb._svc.request("HEAD", self._url("download", path))
        if status != 200:
            raise error_of(status, got, "file", path)
        size = int(hdrs.get("content-length", "0") or 0)
        mtime = _http_time(hdrs.get("last-modified"))
        return c.EntryInfo(path, path.rstrip("/").rsplit("/", 1)[-1] or "/", size, mtime,
                           0o100000, -1, -1)

    def exists(self, path):
        """True if `path` is a regular file the service can read."""
        try:
            self.stat(path)
            return True
        except FileNotFoundError:
            return False

    def list(self, path):
        """The entries of a directory (the service's glob "*"): EntryInfo with name, path,
        size, mtime, and mode's file type (directory or regular file) only."""
        d = path.rstrip("/") or "/"
        status, _, got = self._sb._svc.request(
            "POST", self._sb._dataplane() + "/glob",
            {"pattern": "*", "path": d, "limit": LIST_MAX})
        if status != 200:
            raise error_of(status, got, "file", path)
        import json
        try:
            matches = json.loads(got).get("matches") or []
        except (ValueError, AttributeError):
            raise ServiceError("%s: the glob answer is not JSON" % path) from None
        out = []
        for m in matches[:LIST_MAX]:
            p = m.get("path") if isinstance(m, dict) else None
            if not isinstance(p, str):
                continue
            name = p.rstrip("/").rsplit("/", 1)[-1]
            if not name or name in (".", "..") or "\0" in name:
                continue
            full = d + "/" + name if d != "/" else "/" + name
            size = m.get("size_bytes") if isinstance(m.get("size_bytes"), int) else 0
            out.append(c.EntryInfo(full, name, size, _iso_time(m.get("modified_at")),
                                   0o040000 if m.get("is_dir") else 0o100000, -1, -1))
        return out

    def make_dir(self, path, mode=0o755, parents=True):
        """mkdir in the guest (a command: the API has no call for it)."""
        self._sb.run("mkdir %s-m %o %s" % ("-p " if parents else "", mode, shlex.quote(path)))

    def remove(self, path, recursive=False):
        """rm in the guest (a command: the API has no call for it)."""
        self._sb.run("rm -f%s -- %s" % ("r" if recursive else "", shlex.quote(path)))


def _http_time(text):
    from email.utils import parsedate_to_datetime
    try:
        return int(parsedate_to_datetime(text).timestamp()) if text else 0
    except (TypeError, ValueError):
        return 0


def _iso_time(text):
    try:
        return int(datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp())
    except ValueError:
        return 0
