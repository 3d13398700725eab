# SPDX-License-Identifier: Apache-2.0
"""The exceptions the SDK raises (docs/sdk.md, "Errors"). Every one is a SandboxError."""

import errno as _errno
import re as _re

_UNPRINTABLE = _re.compile("[\x00-\x1f\x7f-\x9f]")


def printable(text):
    """Text from the guest made safe to print: control characters (C0, DEL, C1) become "?",
    as sandboxctl's printable() does, so a message cannot drive the reader's terminal."""
    return _UNPRINTABLE.sub("?", text)


class SandboxError(Exception):
    """Something about a sandbox failed; the message says what."""


class SandboxNotFoundError(SandboxError, LookupError):
    """No sandbox (or snapshot) of that id or name."""


class SandboxStateError(SandboxError):
    """The sandbox is not in a state that allows the call (paused, stopped, suspended)."""


class ConnectionLostError(SandboxError):
    """The connection to the guest's agent or to the VMM broke (the sandbox died?)."""


class AgentError(SandboxError):
    """The guest's agent refused a call: `errno` and its `message` (e.g. "chdir /nope: No
    such file or directory")."""

    def __init__(self, err, message):
        message = printable(message)
        super().__init__(message or _errno.errorcode.get(err, "errno %d" % err))
        self.errno = err
        self.message = message


class FileNotFoundInSandboxError(AgentError, FileNotFoundError):
    """A path the call named does not exist in the guest (ENOENT)."""


def agent_error(err, message):
    if err == _errno.ENOENT:
        return FileNotFoundInSandboxError(err, message)
    return AgentError(err, message)


class CommandExitError(SandboxError):
    """A command ended with a non-zero status (run(check=True), the default). `result` is
    its CommandResult: exit_code, stdout, stderr."""

    def __init__(self, result, message=None):
        super().__init__(message or "%s exited with status %d%s" % (
            printable(result.command), result.exit_code, _tail(result.stderr)))
        self.result = result

    @property
    def exit_code(self):
        return self.result.exit_code


class CommandNotFoundError(CommandExitError):
    """The program was not found in the guest (status 127)."""


class CommandTimeoutError(CommandExitError, TimeoutError):
    """The command ran past its timeout and was killed (its process group, SIGKILL)."""


def _tail(stderr):
    text = stderr.strip() if stderr else ""
    if not text:
        return ""
    return ": " + printable(text.splitlines()[-1][:200])


class ServiceError(SandboxError):
    """The sandbox service (remote mode, docs/sdk.md) refused a call: `status` (HTTP),
    `error_type` (its `detail.error`, e.g. "Conflict", "CrashLoop") and the message."""

    def __init__(self, message, status=0, error_type=""):
        super().__init__(printable(message))
        self.status, self.error_type = status, error_type


class AuthenticationError(ServiceError, PermissionError):
    """The service refused the API key (HTTP 401 or 403)."""


class QuotaExceededError(ServiceError):
    """A quota of the key's workspace is reached (HTTP 429); `quota_type` is "sandbox_count",
    "cpu", "memory", "storage", "snapshot_count" or "unknown", read from the message as the
    LangSmith clients read it."""

    def __init__(self, message, status=429, error_type=""):
        super().__init__(message, status, error_type)
        low = message.lower()
        self.quota_type = ("snapshot_count" if "snapshot" in low else
                           "sandbox_count" if "sandbox" in low else
                           "cpu" if "cpu" in low else "memory" if "memory" in low else
                           "storage" if "storage" in low else "unknown")


class RemoteUnsupportedError(SandboxError, NotImplementedError):
    """A call of the local SDK that the service's API has no equivalent for (fork, pause, an
    argv command, ...): the message names it."""
