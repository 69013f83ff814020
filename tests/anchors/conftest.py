"""Fixtures for the resume-anchor tests: a clean environment for the anchor settings (the
tracer and in-memory exporter fixtures are shared, in tests/conftest.py)."""

import pytest


@pytest.fixture(autouse=True)
def _anchor_settings_unset(monkeypatch):
    # Tests set these explicitly; a developer's shell must not change what they see.
    monkeypatch.delenv("YETO_DILOCO_ANCHOR_DTYPE", raising=False)
    monkeypatch.delenv("YETO_DILOCO_RESUME_ANCHOR_MMAP", raising=False)
    monkeypatch.delenv("YETO_DILOCO_RESUME_ANCHOR_READAHEAD", raising=False)
