"""The stubs agree with the native module."""

from __future__ import annotations

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def test_stubtest_passes():
    script = os.path.join(os.path.dirname(HERE), "stubtest.sh")
    out = subprocess.run(["bash", script], capture_output=True, text=True, env={**os.environ, "PYTHON": sys.executable})
    assert out.returncode == 0, out.stdout + out.stderr
