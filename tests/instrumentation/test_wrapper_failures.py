"""Nothing of ours fails the trainer's import or load: a patch that raises when torch,
safetensors or torch.distributed.checkpoint is imported leaves the module imported as it is
(logged once, naming the instrumentation), and a span that cannot be started or ended (a span
processor that raises) leaves every traced call returning, or raising, what it would have."""

from __future__ import annotations

import logging

import pytest
import safetensors
import safetensors.torch
import torch
import torch.distributed.checkpoint as dcp

from broken_telemetry import broken_provider
from yeto_otel.instrumentation import (DcpInstrumentor, SafetensorsInstrumentor,
                                       TorchLoadInstrumentor, _guard)
from zero_code import console_exports, run_instrumented

DEADLINE = 60  # seconds: an async save's thread on a shared 2-core machine


@pytest.fixture(params=["start", "end"])
def broken(request, exporter, monkeypatch, caplog):
    """All three load instrumentors, tracing into a provider whose processor raises when a
    span starts (or ends)."""
    monkeypatch.setattr(_guard, "_logged", set())
    caplog.set_level(logging.WARNING, logger="yeto_otel.instrumentation")
    provider = broken_provider(exporter, request.param)
    instrumentors = [TorchLoadInstrumentor(), SafetensorsInstrumentor(), DcpInstrumentor()]
    for inst in instrumentors:
        inst.instrument(tracer_provider=provider)
    yield request.param
    for inst in instrumentors:
        inst.uninstrument()


def _logged(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "yeto_otel.instrumentation"]


def test_torch_load_returns_and_raises_what_torch_does(broken, tmp_path, caplog):
    path = tmp_path / "ckpt.pt"
    torch.save({"w": torch.arange(6.0)}, path)
    for _ in range(2):
        assert torch.equal(torch.load(path, weights_only=True)["w"], torch.arange(6.0))
        with open(path, "rb") as f:
            assert torch.equal(torch.load(f, weights_only=True)["w"], torch.arange(6.0))
        mapped = torch.load(path, weights_only=True, mmap=True)
        assert torch.equal(mapped["w"], torch.arange(6.0))
    with pytest.raises(FileNotFoundError, match="missing.pt"):
        torch.load(tmp_path / "missing.pt", weights_only=True)
    logged = _logged(caplog)
    assert len(logged) == 1 and f"span processor broke on {broken}" in logged[0]


def test_safetensors_loads_return_and_raise_what_safetensors_does(broken, tmp_path, caplog):
    path = tmp_path / "model.safetensors"
    safetensors.torch.save_file({"a": torch.ones(4), "b": torch.zeros(2)}, path)
    assert torch.equal(safetensors.torch.load_file(path)["a"], torch.ones(4))
    assert torch.equal(safetensors.torch.load(path.read_bytes())["b"], torch.zeros(2))
    with safetensors.safe_open(path, framework="pt") as handle:
        assert torch.equal(handle.get_tensor("a"), torch.ones(4))
        assert sorted(handle.keys()) == ["a", "b"]
    with pytest.raises(FileNotFoundError):
        safetensors.torch.load_file(tmp_path / "missing.safetensors")
    assert _logged(caplog)  # said, once per step that failed


def test_dcp_calls_return_what_dcp_does(broken, tmp_path, caplog):
    state = {"w": torch.arange(256, dtype=torch.float32)}
    dcp.save(state, checkpoint_id=str(tmp_path / "c"))
    loaded = {"w": torch.zeros(256)}
    dcp.load(loaded, checkpoint_id=str(tmp_path / "c"))
    assert torch.equal(loaded["w"], state["w"])
    dcp.async_save(state, checkpoint_id=str(tmp_path / "a")).result(timeout=DEADLINE)
    again = {"w": torch.zeros(256)}
    dcp.load(again, checkpoint_id=str(tmp_path / "a"))
    assert torch.equal(again["w"], state["w"])
    assert _logged(caplog)


BROKEN_PATCHES = r"""
import json, logging, sys
from yeto_otel.instrumentation import DcpInstrumentor, SafetensorsInstrumentor, TorchLoadInstrumentor

records = []
handler = logging.Handler()
handler.emit = lambda record: records.append(record.getMessage())
logging.getLogger("yeto_otel.instrumentation").addHandler(handler)

def broken(*args, **kwargs):
    raise AttributeError("what the patch expects moved in this release")

# Each instrumentor is already instrumented (opentelemetry-instrument) and waits for its
# module: its patch now breaks when the module is imported.
TorchLoadInstrumentor._patch = broken
SafetensorsInstrumentor._replace = broken
DcpInstrumentor._replace_public = broken
assert "torch" not in sys.modules

import torch
import safetensors.torch
import torch.distributed.checkpoint as dcp

torch.save({"w": torch.arange(3.0)}, PATH + ".pt")
assert torch.equal(torch.load(PATH + ".pt", weights_only=True)["w"], torch.arange(3.0))
safetensors.torch.save_file({"w": torch.ones(2)}, PATH + ".safetensors")
assert torch.equal(safetensors.torch.load_file(PATH + ".safetensors")["w"], torch.ones(2))
dcp.save({"w": torch.ones(8)}, checkpoint_id=PATH + ".dcp")
loaded = {"w": torch.zeros(8)}
dcp.load(loaded, checkpoint_id=PATH + ".dcp")
assert torch.equal(loaded["w"], torch.ones(8))
print(json.dumps({"logged": records}))
print("trainer ran")
"""


def test_patches_that_break_at_import_leave_the_trainer_running(tmp_path):
    code = f"PATH = {str(tmp_path / 'ckpt')!r}\n" + BROKEN_PATCHES
    result = run_instrumented(code, {"OTEL_TRACES_EXPORTER": "console",
                                     "OTEL_METRICS_EXPORTER": "none",
                                     "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "yeto_host_memory"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "trainer ran" in result.stdout
    exported = console_exports(result.stdout)
    (logged,) = [doc["logged"] for doc in exported if "logged" in doc]
    assert sorted(line.split(":")[1].strip() for line in logged) == [
        "DcpInstrumentor (yeto_dcp)", "SafetensorsInstrumentor (yeto_safetensors)",
        "SafetensorsInstrumentor (yeto_safetensors)", "TorchLoadInstrumentor (yeto_torch_load)"]
    assert all("AttributeError: what the patch expects moved" in line for line in logged)
    assert not [doc for doc in exported if doc.get("name", "").startswith(
        ("torch.load", "safetensors.", "dcp."))]  # untraced: the modules are as torch has them
