# SPDX-License-Identifier: Apache-2.0
"""The SDK installs offline from the tree (pip install --no-build-isolation, Debian's
setuptools as the backend) and imports from where it was installed."""

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

TREE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def test_installs_offline(tmp_path):
    for mod in ("pip", "setuptools"):  # looked for, not imported (distutils' hack)
        if importlib.util.find_spec(mod) is None:
            pytest.skip("no %s for %s (tools/dev installs python3-pip and python3-setuptools)"
                        % (mod, sys.executable))
    target, src = tmp_path / "site", tmp_path / "src"  # a copy: the build writes beside it
    shutil.copytree(TREE, src, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info",
                                                             "build", "tests"))
    p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation",
                        "--no-index", "--no-deps", "--target", str(target), str(src)],
                       capture_output=True, text=True, cwd=str(tmp_path), timeout=300)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([sys.executable, "-c", "import sandbox_sdk; print(sandbox_sdk.__file__, "
                        "sandbox_sdk.__version__)"], capture_output=True, text=True,
                       cwd=str(tmp_path), env=dict(os.environ, PYTHONPATH=str(target)))
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(str(target)) and p.stdout.split()[-1] == "0.1.0", p.stdout
