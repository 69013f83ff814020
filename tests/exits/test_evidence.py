"""The kernel's evidence of how a process died, from cgroup v2 and v1 files (fixtures: this
machine's memory controller is on v1, where the real OOM kills are, tests/e2e/test_oom_kills.py):
a memory cgroup's OOM kill count, usage and limit, read without ever raising; and a death
decided from a v2 cgroup's memory.events."""

from __future__ import annotations

import os
import shutil
import signal

import pytest
from opentelemetry.sdk.trace import TracerProvider

from record_children import CGROUP_OWNER, start
from repo_paths import FIXTURES
from yeto_otel.exits import ExitObserver
from yeto_otel.exits._evidence import CgroupEvidence, Counts

CGROUPS = FIXTURES / "cgroup"
V2_POD = (CGROUPS / "v2_pod/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/"
          "kubepods-burstable-pod6f1c.slice/cri-containerd-4a7e.scope")
V2_UNLIMITED = CGROUPS / "v2_unlimited/sys/fs/cgroup/user.slice/user-1000.slice/session-3.scope"
V1_TASK = CGROUPS / "v1_hybrid/sys/fs/cgroup/memory/slurm/uid_1000/job_4242/step_0/task_0"


@pytest.mark.parametrize("directory, version, counts", [
    (V2_POD, 2, Counts(oom_kills=1, usage=12884901888, limit=17179869184)),
    (V2_UNLIMITED, 2, None),  # checked below: no limit
    (V1_TASK, 1, Counts(oom_kills=0, usage=36954112, limit=None)),  # v1 says "unlimited"
])
def test_a_cgroups_counts(directory, version, counts):
    found = CgroupEvidence(str(directory), version).read()
    if counts is None:
        assert found.limit is None and found.oom_kills is not None and found.usage > 0
    else:
        assert found == counts


def test_what_cannot_be_read_is_no_evidence(tmp_path):
    (tmp_path / "memory.events").write_text("oom_kill lots\n")
    (tmp_path / "memory.current").write_text("")
    assert CgroupEvidence(str(tmp_path), 2).read() == Counts()
    assert CgroupEvidence(str(tmp_path / "gone"), 1).read() == Counts()


@pytest.mark.parametrize("kills_after, cause", [(2, "oom_kill"), (1, "unknown")])
def test_a_v2_cgroups_oom_kill_decides_the_cause(tmp_path, kills_after, cause):
    cgroup = tmp_path / "pod"
    shutil.copytree(V2_POD, cgroup)
    owner = start(CGROUP_OWNER, str(tmp_path), str(cgroup), "2")  # it records oom_kill 1
    os.kill(owner.pid, signal.SIGKILL)
    owner.wait(timeout=30)
    events = (cgroup / "memory.events").read_text()
    (cgroup / "memory.events").write_text(events.replace("oom_kill 1", f"oom_kill {kills_after}"))
    (report,) = ExitObserver(str(tmp_path), TracerProvider().get_tracer("t")).look()
    assert report.verdict.cause.value == cause
    assert (report.slot.cgroup_oom_kills, report.slot.cgroup_limit) == (1, 17179869184)
