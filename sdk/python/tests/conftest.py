# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the SDK's tests.

The live tests (test_live.py) need real sandboxes: SANDBOX_SDK_IMAGE names an installed image
in $SANDBOX_HOME and SANDBOXCTL the sandboxctl to use (tests/integration/sdk_python.sh sets
both, in the emulated host on kvm-pvm machines). Without them they are skipped, saying why.
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from sandbox_sdk import Sandbox  # noqa: E402

LIVE_IMAGE = os.environ.get("SANDBOX_SDK_IMAGE")
MEMORY = int(os.environ.get("SANDBOX_SDK_MEMORY", "192"))


def pytest_collection_modifyitems(config, items):
    if LIVE_IMAGE and os.environ.get("SANDBOXCTL"):
        return
    skip = pytest.mark.skip(reason="no live sandboxes: set SANDBOX_SDK_IMAGE and SANDBOXCTL "
                            "(tests/integration/sdk_python.sh does)")
    for item in items:
        if "live" in item.keywords:
            item.add_marker(skip)


def pytest_configure(config):
    config.addinivalue_line("markers", "live: needs a real sandbox (KVM)")


@pytest.fixture(scope="session")
def sb():
    """One sandbox the live tests share (they leave it as they found it)."""
    with Sandbox.create(image=LIVE_IMAGE, memory=MEMORY, network="none", timeout=180) as s:
        yield s
