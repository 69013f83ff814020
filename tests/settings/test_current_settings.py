"""The process's settings are read once: the step log and the other paths that run often must
not walk the environment on every call."""

from __future__ import annotations

import pytest

from yeto_otel.settings import (RoleInputs, Settings, SettingsError, current_settings,
                                forget_current_settings, role_inputs)


def test_read_once_at_the_first_call(monkeypatch):
    monkeypatch.setenv("YETO_DILOCO_HOST_MEM_CENSUS", "1")
    first = current_settings()
    assert first.step_log_census is True
    monkeypatch.setenv("YETO_DILOCO_HOST_MEM_CENSUS", "0")
    assert current_settings() is first  # the environment is not read again
    forget_current_settings()
    assert current_settings().step_log_census is False


def test_a_bad_value_raises_the_same_error_at_every_call(monkeypatch):
    monkeypatch.setenv("YETO_OTEL_NODE_METRICS", "sometimes")
    with pytest.raises(SettingsError) as first:
        current_settings()
    monkeypatch.setenv("YETO_OTEL_NODE_METRICS", "on")  # read once: still the first answer
    with pytest.raises(SettingsError) as again:
        current_settings()
    assert again.value is first.value


def test_role_inputs_survive_bad_settings():
    """A launcher or a child must learn its role even where other settings are bad."""
    env = {"RANK": "3", "YETO_OTEL_IDENTITY_OWNER": "3:77", "YETO_OTEL_NODE_METRICS": "?"}
    assert role_inputs(env) == RoleInputs(rank=3, identity_owner=(3, 77), rank_source="torch")
    assert role_inputs({"RANK": "x", "YETO_OTEL_IDENTITY_OWNER": "junk"}) == RoleInputs()
    assert isinstance(current_settings(), Settings)
