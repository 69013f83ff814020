import pytest

from yeto_otel.testing import settable


@pytest.fixture(autouse=True)
def _quiet_settable_allocator(monkeypatch):
    """The shared `yeto_otel.testing:settable` allocator starts empty and quiet in every test;
    a test that sets it has the change undone."""
    monkeypatch.setattr(settable, "stats", {})
    monkeypatch.setattr(settable, "raises", None)
