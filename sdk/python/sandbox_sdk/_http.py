# SPDX-License-Identifier: Apache-2.0
"""The HTTP side of remote mode (docs/sdk.md, "Remote mode"): one service (its URL and API
key), requests over kept-alive connections (http.client, TLS by ssl), and the service's
errors as the SDK's exceptions, read from the LangSmith error body
{"detail": {"error": TYPE, "message": TEXT}} (../shared/LANGSMITH-API.md 2.1).

Bounds: a response body is read to at most `limit` bytes (default BODY_MAX), so a service
that answers without end cannot fill our memory; every request has a timeout.
"""

import http.client
import json
import os
import threading
import urllib.parse

from .errors import (AuthenticationError, FileNotFoundInSandboxError, QuotaExceededError,
                     SandboxNotFoundError, SandboxStateError, ServiceError, printable)

BODY_MAX = 16 << 20   # bytes of a JSON answer (a list of a thousand sandboxes is ~1 MiB)
IDLE_KEPT = 4         # idle connections kept for the next request
_RETRY_ON_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


def env_url(api_url):
    return api_url or os.environ.get("SANDBOX_API_URL") or None


class Service:
    """The service at `api_url` (e.g. http://127.0.0.1:8380) with `api_key`; the control
    plane is {api_url}/api/v2/sandboxes."""

    def __init__(self, api_url=None, api_key=None, ssl_context=None):
        url = env_url(api_url)
        if not url:
            raise ValueError("remote mode needs api_url (or $SANDBOX_API_URL)")
        key = api_key if api_key is not None else os.environ.get("SANDBOX_API_KEY", "")
        if not key:
            raise ValueError("remote mode needs api_key (or $SANDBOX_API_KEY)")
        if any(c in key for c in "\r\n\0"):
            raise ValueError("api_key: no CR, LF or NUL")
        self.url, self.key = url.rstrip("/"), key
        u = urllib.parse.urlsplit(self.url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError("api_url must be an http:// or https:// URL: %r" % url)
        self.ssl_context = ssl_context
        self.base = self.url + "/api/v2/sandboxes"
        self._idle = {}  # (scheme, netloc) -> [HTTPConnection]
        self._lock = threading.Lock()

    def ws_url(self, url):
        """A dataplane URL's WebSocket form: the first http(s):// becomes ws(s)://."""
        return "ws" + url[4:] if url.startswith("http") else url

    def headers(self, extra=None):
        h = {"X-Api-Key": self.key}
        h.update(extra or {})
        return h

    def _conn(self, scheme, netloc, timeout):
        with self._lock:
            pool = self._idle.get((scheme, netloc))
            if pool:
                conn = pool.pop()
                conn.timeout = timeout
                if conn.sock is not None:
                    conn.sock.settimeout(timeout)
                return conn, True
        if scheme == "https":
            return http.client.HTTPSConnection(netloc, timeout=timeout,
                                               context=self.ssl_context), False
        return http.client.HTTPConnection(netloc, timeout=timeout), False

    def _keep(self, scheme, netloc, conn):
        with self._lock:
            pool = self._idle.setdefault((scheme, netloc), [])
            if len(pool) < IDLE_KEPT:
                pool.append(conn)
                return
        conn.close()

    def request(self, method, url, body=None, headers=None, timeout=30.0, limit=BODY_MAX):
        """(status, headers as a lower-cased dict, body bytes) of `method` on the absolute
        `url`; `body` bytes, or an object sent as JSON. A connection that was kept and that
        the service had closed meanwhile is replaced once."""
        h = self.headers(headers)
        if body is not None and not isinstance(body, (bytes, bytearray)):
            body = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        u = urllib.parse.urlsplit(url)
        target = u.path + ("?" + u.query if u.query else "")
        for _ in range(2):
            conn, reused = self._conn(u.scheme, u.netloc, timeout)
            try:
                conn.request(method, target, body=body, headers=h)
                r = conn.getresponse()
                data = r.read(limit + 1)
                if len(data) > limit:
                    conn.close()
                    raise ServiceError("%s %s: the answer is over %d bytes" %
                                       (method, u.path, limit))
                rh = {k.lower(): v for k, v in r.getheaders()}
                if r.will_close or not r.isclosed():
                    conn.close()
                else:
                    self._keep(u.scheme, u.netloc, conn)
                return r.status, rh, data
            except _RETRY_ON_STALE:
                conn.close()
                if not reused:
                    raise_lost(method, url, "the service closed the connection")
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                raise_lost(method, url, e)
        raise_lost(method, url, "the service closed the connection twice")

    def call(self, method, path, body=None, ok=(200, 201, 204), what="sandbox", timeout=30.0):
        """A control-plane call on {base}{path}: the decoded JSON (None when empty), or the
        service's error as its exception (`what` names the resource of a 404)."""
        status, _, data = self.request(method, self.base + path, body, timeout=timeout)
        if status not in ok:
            raise error_of(status, data, what, path)
        if not data:
            return None
        try:
            return json.loads(data)
        except ValueError:
            raise ServiceError("%s %s: the service answered %d with a body that is not "
                               "JSON" % (method, path, status), status) from None

    def close(self):
        with self._lock:
            idle, self._idle = self._idle, {}
        for pool in idle.values():
            for conn in pool:
                conn.close()


def raise_lost(method, url, why):
    from .errors import ConnectionLostError
    raise ConnectionLostError("%s %s: %s" % (method, url, why))


def parse_detail(data):
    """(error type, message) of an error body; ("", "") when it has none."""
    try:
        detail = json.loads(data).get("detail")
    except (ValueError, AttributeError):
        return "", ""
    if isinstance(detail, dict):
        return str(detail.get("error") or ""), str(detail.get("message") or "")
    if isinstance(detail, list):
        return "ValidationError", "; ".join(str(d.get("msg", d)) if isinstance(d, dict)
                                            else str(d) for d in detail[:20])
    if isinstance(detail, str):
        return "", detail
    return "", ""


def error_of(status, data, what="sandbox", ref=""):
    """The exception for a refusal of the service: 401/403 AuthenticationError, 404
    SandboxNotFoundError (or FileNotFoundInSandboxError for what="file"), 429
    QuotaExceededError, 400 NotReady SandboxStateError, else ServiceError."""
    etype, msg = parse_detail(data)
    etype, msg = printable(etype[:64]), printable((msg or "HTTP %d" % status)[:1000])
    if status in (401, 403):
        return AuthenticationError("the service refused the API key: %s" % msg, status, etype)
    if status == 404 or etype == "FileNotFound":
        if what == "file":
            import errno
            return FileNotFoundInSandboxError(errno.ENOENT, msg)
        e = SandboxNotFoundError(msg)
        e.status, e.error_type = status, etype
        return e
    if status == 429:
        return QuotaExceededError(msg, status, etype)
    if (status == 400 and etype == "NotReady") or (status == 503 and
                                                   etype == "ServiceUnavailable"):
        return SandboxStateError(msg)
    return ServiceError("%s (HTTP %d%s)" % (msg, status, ", " + etype if etype else ""), status,
                        etype)
