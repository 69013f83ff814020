"""The benchmarks are run by hand, so nothing else would notice one that no longer starts (a
table row added that its set-up does not expect): each must at least parse its options."""

from __future__ import annotations

import subprocess
import sys

import pytest

from repo_paths import ROOT

SCRIPTS = sorted(p for p in (ROOT / "benchmarks").glob("*.py") if p.name != "hostinfo.py")


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_the_benchmark_starts(script):
    result = subprocess.run([sys.executable, str(script), "--help"], capture_output=True,
                            text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "usage:" in result.stdout
