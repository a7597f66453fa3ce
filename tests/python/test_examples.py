"""The examples in examples/python run and show what they claim (identical fingerprints)."""
import os
import subprocess
import sys

import pytest


def run(source_dir, name, *args):
    r = subprocess.run([sys.executable, str(source_dir / "examples" / "python" / name), *args], cwd=str(source_dir),
                       capture_output=True, text=True, timeout=600, env=dict(os.environ))
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_quickstart(source_dir):
    out = run(source_dir, "quickstart.py")
    assert "from_numpy shares memory: True" in out and "torch sees the same memory: True" in out


def test_custom_loop(source_dir):
    out = run(source_dir, "custom_loop.py", "--threads", "2", "--workers", "2", "--steps", "60")
    assert out.rstrip().endswith("identical"), out


def test_train_and_diff(source_dir):
    out = run(source_dir, "train_and_diff.py")
    assert "identical: " in out and "same as the command line: True" in out, out
