"""A real memory cgroup of the test's own (cgroup v1, this project's machines run the hybrid
layout): a child of the test process's cgroup with a limit, removed when the test ends. The
kernel OOM-kills what outgrows it, as it would a rank in a pod or a Slurm job."""

from __future__ import annotations

import os
import secrets
import shlex
import time
from pathlib import Path

from required_components import missing
from yeto_otel.proc import CgroupNotFound, locate_memory_cgroup


def child_memory_cgroup(request, limit: int) -> Path:
    """A fresh v1 memory cgroup under this process's own, limited to `limit` bytes (swap
    too); removed at the end, once the processes the test started in it are gone. Missing
    root or a v1 memory cgroup: skipped with a message, failed in CI."""
    if os.geteuid() != 0:
        missing("root (to make a child memory cgroup)", "run the tests as root")
    try:
        own = locate_memory_cgroup()
    except CgroupNotFound as exc:
        missing(f"a memory cgroup ({exc})", "run the tests on a host with the memory cgroup")
    if own.version != 1:
        missing("the memory controller on cgroup v1", "run on a host with the hybrid layout")
    child = Path(own.directory) / f"yeto-test-{os.getpid()}-{secrets.token_hex(3)}"
    try:
        child.mkdir()
        (child / "memory.limit_in_bytes").write_text(str(limit))
    except OSError as exc:
        if child.is_dir():
            child.rmdir()
        missing(f"a writable v1 memory cgroup ({exc})", "run the tests as root")
    memsw = child / "memory.memsw.limit_in_bytes"
    if memsw.exists():  # with swap the process would be swapped out instead of killed
        memsw.write_text(str(limit))

    def remove():
        deadline = time.monotonic() + 30
        while child.exists():
            try:
                child.rmdir()
            except OSError:  # a process of ours is still exiting: poll until it is gone
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    request.addfinalizer(remove)
    return child


def in_cgroup(cgroup: Path, command: list[str], *, oom_first: bool = True) -> list[str]:
    """`command`, started inside `cgroup` from its first instruction (a shell that moves
    itself in, then execs it), the kernel's first choice to kill with `oom_first`."""
    adjust = "echo 1000 > /proc/self/oom_score_adj; " if oom_first else ""
    return ["sh", "-c", f"echo $$ > {shlex.quote(str(cgroup / 'cgroup.procs'))}; {adjust}"
                        f"exec {shlex.join(command)}"]
