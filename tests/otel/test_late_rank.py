"""A rank whose number appears only after it started takes it from torch.distributed: a plain
process (`<host>/pid-<pid>`) that joins a process group reports as `<host>/rank-<R>` from its
next export on, its children then see that it owns the rank's identity, and a process that was
a rank from the start keeps what its launcher said."""

from __future__ import annotations

import socket
import sys

import pytest

from repo_paths import ROOT
from zero_code import run_instrumented

sys.path.insert(0, str(ROOT / "tests" / "e2e"))
from torchrun_job import by_identity, read_local  # noqa: E402

HOST = socket.gethostname()

# Exports a span and waits for a metric export as a plain process, then joins a process group
# of its own (rank and world size in code, as Lightning and DeepSpeed pass them), exports again,
# and says what its children would inherit.
JOINS_LATE = """
import os, socket, sys, time
import torch, torch.distributed as dist
from opentelemetry import metrics, trace

def flush():
    trace.get_tracer_provider().force_flush()
    metrics.get_meter_provider().force_flush()

tracer = trace.get_tracer("late")
with tracer.start_as_current_span("before the group"):
    pass
flush()
with socket.socket() as s:
    s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=int(sys.argv[1]),
                        world_size=int(sys.argv[1]) + 1) if sys.argv[1] == "0" else None
with tracer.start_as_current_span("in the group"):
    pass
flush()
print("owner", os.environ.get("YETO_OTEL_IDENTITY_OWNER"))
print("trainer ran", os.getpid())
"""


def _run(tmp_path, rank_arg: str, **env: str):
    script = tmp_path / "joins_late.py"
    script.write_text(JOINS_LATE)
    result = run_instrumented("", {"OTEL_SERVICE_NAME": "late", "YETO_OTEL_LOCAL_DIR":
                                   str(tmp_path / "telemetry"), "YETO_OTEL_HOST_ALLOCATOR": "none",
                                   "YETO_OTEL_LOCK_DIR": str(tmp_path), **env},
                              console=False, cwd=str(tmp_path),
                              command=[sys.executable, str(script), rank_arg])
    assert result.returncode == 0 and "trainer ran" in result.stdout, result.stderr
    pid = int(result.stdout.split("trainer ran")[1].split()[0])
    owner = result.stdout.split("owner ")[1].split()[0]
    return pid, owner, by_identity(read_local(tmp_path / "telemetry"))


def _span_identities(identities: dict) -> dict[str, str]:
    return {span.name: identity for identity, data in identities.items()
            for span in data["spans"]}


def test_a_plain_process_becomes_its_rank_once_its_group_exists(tmp_path):
    pid, owner, identities = _run(tmp_path, "0")
    assert _span_identities(identities) == {"before the group": f"{HOST}/pid-{pid}",
                                            "in the group": f"{HOST}/rank-0"}
    assert owner == f"0:{pid}"  # a child started now is the rank's child
    rank = identities[f"{HOST}/rank-0"]
    resource = rank["spans"][0].resource
    assert resource["yeto.rank"] == 0 and resource["yeto.world_size"] == 1
    assert resource["yeto.process.role"] == "rank"
    assert resource["yeto.launch.rank_source"] == "torch.distributed"
    assert rank["points"], "its metrics after the group are the rank's too"


def test_a_process_without_a_group_stays_a_plain_process(tmp_path):
    pid, owner, identities = _run(tmp_path, "none")
    assert set(_span_identities(identities).values()) == {f"{HOST}/pid-{pid}"}
    assert owner == f"-:{pid}"


@pytest.mark.parametrize("env", [{"RANK": "0", "WORLD_SIZE": "4"}])
def test_a_rank_from_the_start_keeps_its_launchers_word(tmp_path, env):
    pid, owner, identities = _run(tmp_path, "0", **env)
    assert set(_span_identities(identities).values()) == {f"{HOST}/rank-0"}
    (resource,) = {tuple(sorted(s.resource.items())) for d in identities.values()
                   for s in d["spans"]}
    assert dict(resource)["yeto.world_size"] == 4  # not the group's 1
