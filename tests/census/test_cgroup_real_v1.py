"""A real v1 memory cgroup with a real OOM kill: a child cgroup under this process's own, with a
limit, a fresh process moved into it that grows its memory, and a sibling in the same cgroup
that the kernel OOM-kills. The survivor's census sees the usage, the limit, its anonymous
memory and page cache, the working set, and one more OOM kill (in its metrics and its step log).

Needs root and the memory controller on cgroup v1 (this project's machines run the hybrid
layout): skipped with a message elsewhere, failed in CI."""

from __future__ import annotations

import json
import selectors
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from memory_cgroups import child_memory_cgroup
from yeto_otel.census import (CGROUP_ANON, CGROUP_EVENTS, CGROUP_FILE, CGROUP_LIMIT,
                              CGROUP_USAGE, CGROUP_WORKING_SET)
from yeto_otel.proc import locate_memory_cgroup

MiB = 1 << 20
LIMIT = 256 * MiB
DEADLINE_S = 120

# Moved into the cgroup before it allocates (v1 leaves earlier charges where they were), it
# takes 64 MiB of anonymous memory and 16 MiB of page cache, prints its census, and prints it
# again (with its step log) once told the sibling is gone.
SURVIVOR = r"""
import json, os, sys
from yeto_otel.census import CensusReader, CgroupCensus, add_census_to_step_log
from yeto_otel.settings import Settings
workdir = sys.argv[1]
assert sys.stdin.readline() == "go\n"
held = bytearray(64 << 20)
for i in range(0, len(held), 4096):
    held[i] = 1
with open(os.path.join(workdir, "cache"), "wb") as f:
    f.write(os.urandom(16 << 20))
reader = CensusReader(allocator=None, node_metrics=False, cgroup=CgroupCensus(lock_dir=workdir))
def census():
    s = reader.take()
    return {"values": {k: q.value for k, q in s.values.items()},
            "labelled": {k: {a: q.value for a, q in v.items()} for k, v in s.labelled.items()},
            "path": reader.cgroup.cgroup.path, "errors": reader.ledger.counts()}
print(json.dumps(census()), flush=True)
assert sys.stdin.readline() == "again\n"
again = census()
again["step_log"] = add_census_to_step_log({}, rank=0, settings=Settings(step_log_census=True))
print(json.dumps(again), flush=True)
"""

# Grows 16 MiB at a time, every page touched, until the kernel kills it.
SIBLING = r"""
import sys
assert sys.stdin.readline() == "go\n"
chunks = []
while True:
    chunk = bytearray(16 << 20)
    for i in range(0, len(chunk), 4096):
        chunk[i] = 1
    chunks.append(chunk)
"""


@pytest.fixture
def child_cgroup(request) -> Path:
    """A fresh v1 memory cgroup under this process's own, limited to LIMIT."""
    return child_memory_cgroup(request, LIMIT)


def start_in(cgroup: Path, code: str, *args: str, request) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-c", code, *args], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)

    def stop():
        if process.poll() is None:
            process.kill()
        process.wait(timeout=DEADLINE_S)

    request.addfinalizer(stop)
    (cgroup / "cgroup.procs").write_text(str(process.pid))
    tell(process, "go")
    return process


def tell(process: subprocess.Popen, line: str) -> None:
    process.stdin.write(line + "\n")
    process.stdin.flush()


def read_json_line(process: subprocess.Popen) -> dict:
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        assert selector.select(timeout=DEADLINE_S), "the survivor printed nothing in time"
    line = process.stdout.readline()
    assert line, f"the survivor exited with {process.wait(timeout=DEADLINE_S)}"
    return json.loads(line)


def test_survivor_sees_its_cgroup_and_the_siblings_oom_kill(child_cgroup, tmp_path, request):
    survivor = start_in(child_cgroup, SURVIVOR, str(tmp_path), request=request)
    before = read_json_line(survivor)
    own = locate_memory_cgroup()
    assert before["path"] == f"{own.path.rstrip('/')}/{child_cgroup.name}"
    values = before["values"]
    assert values[CGROUP_LIMIT.name] == LIMIT
    assert values[CGROUP_ANON.name] >= 64 * MiB
    assert values[CGROUP_FILE.name] >= 8 * MiB  # the page cache it wrote (some may be written back)
    assert values[CGROUP_USAGE.name] >= values[CGROUP_ANON.name] + values[CGROUP_FILE.name] - MiB
    assert values[CGROUP_ANON.name] <= values[CGROUP_WORKING_SET.name] <= \
        values[CGROUP_USAGE.name]
    oom_kills = before["labelled"][CGROUP_EVENTS.name]["oom_kill"]

    sibling = start_in(child_cgroup, SIBLING, request=request)
    assert sibling.wait(timeout=DEADLINE_S) == -signal.SIGKILL  # the kernel's OOM kill

    tell(survivor, "again")
    after = read_json_line(survivor)
    assert survivor.wait(timeout=DEADLINE_S) == 0  # the survivor survived
    assert after["labelled"][CGROUP_EVENTS.name]["oom_kill"] == oom_kills + 1
    # v1's `max` is memory.failcnt; this kernel left it at 0 through the OOM kill, so it is
    # only checked to be there.
    assert "max" in after["labelled"][CGROUP_EVENTS.name]
    assert after["values"][CGROUP_ANON.name] >= 64 * MiB  # its own memory is still there
    assert after["errors"] == {}
    step_log = after["step_log"]
    assert step_log[CGROUP_LIMIT.step_log_key] == LIMIT
    assert step_log[CGROUP_ANON.step_log_key] >= 64 * MiB
    assert step_log[CGROUP_USAGE.step_log_key] >= 64 * MiB
    assert CGROUP_FILE.step_log_key in step_log
    assert step_log[CGROUP_EVENTS.step_log_key] == oom_kills + 1
