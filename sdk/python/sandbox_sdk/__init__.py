# SPDX-License-Identifier: Apache-2.0
"""The sandbox SDK: microVM sandboxes from Python, standard library only (docs/sdk.md)."""

from ._calls import CommandResult, EntryInfo
from .aio import AsyncCommandHandle, AsyncSandbox
from .aio import wait_all as async_wait_all
from ._remote import RemoteCommandHandle, RemoteSandbox
from .errors import (AgentError, AuthenticationError, CommandExitError, CommandNotFoundError,
                     CommandTimeoutError, ConnectionLostError, FileNotFoundInSandboxError,
                     QuotaExceededError, RemoteUnsupportedError, SandboxError,
                     SandboxNotFoundError, SandboxStateError, ServiceError)
from .sandbox import CommandHandle, Files, Sandbox, wait_all

__version__ = "0.1.0"
__all__ = [
    "Sandbox", "AsyncSandbox", "CommandHandle", "AsyncCommandHandle", "CommandResult",
    "EntryInfo", "Files", "wait_all", "async_wait_all", "SandboxError", "SandboxNotFoundError",
    "SandboxStateError", "ConnectionLostError", "AgentError", "FileNotFoundInSandboxError",
    "CommandExitError", "CommandNotFoundError", "CommandTimeoutError", "RemoteSandbox",
    "RemoteCommandHandle", "ServiceError", "AuthenticationError", "QuotaExceededError",
    "RemoteUnsupportedError",
]
