"""Which process this is, and whether it reports: exactly one process reports under a rank's
identity, the rank.

A training job is a tree of processes, and most of them inherit a rank's environment (RANK,
the instrumentation on PYTHONPATH) or its memory (a fork copies the SDK, its threads and its
buffers). Each process is one of:

- `rank`: RANK is set and this is the first process of its tree with that RANK (the one the
  launcher started). It reports as `<host>/rank-<RANK>`.
- `process`: no RANK and not a launcher: a single-process trainer or a tool, `<host>/pid-<pid>`.
- `launcher`: torchrun (`torchrun`, `python -m torch.distributed.run` or `.launch`). Silent: it
  is not a rank, and an identity per launch would only add series.
- `child`: a process that inherited a reporting process's identity: spawned ones see in
  YETO_OTEL_IDENTITY_OWNER that another pid owns it, forked ones that their pid changed since
  telemetry was set up. Silent (multiprocessing helpers, user pools, compile workers...).
- `dataloader_worker`: a child the DataLoader started, which sets up its own telemetry as
  `<rank identity>/worker-<K>` (see `_worker`).

The reporting process writes `<RANK>:<pid>` to YETO_OTEL_IDENTITY_OWNER, so that the test holds
in spawned children whatever their start method. The RANK in it tells a child of a rank
(same RANK, another pid) from a rank started by a process that reports too (another RANK).
"""

from __future__ import annotations

import enum
import os
import sys
from collections.abc import Sequence

from ..settings import PENDING_OWNER_PREFIX, Settings, claim_identity

__all__ = ["Role", "adopt_role", "claim", "current_role", "is_launcher", "mark_worker",
           "reporting_pid"]


class Role(str, enum.Enum):
    RANK = "rank"
    PROCESS = "process"
    LAUNCHER = "launcher"
    CHILD = "child"
    DATALOADER_WORKER = "dataloader_worker"

    @property
    def reports(self) -> bool:
        return self in (Role.RANK, Role.PROCESS, Role.DATALOADER_WORKER)


# Launchers that train nothing themselves: torchrun (and torch.distributed.launch), DeepSpeed's
# runner and its per-node launcher, `accelerate launch`. Each runs as the first argument
# after the interpreter's options: a module after -m, or a script by its file name (the
# console script); accelerate's only with its `launch` subcommand.
_LAUNCHER_MODULES = ("torch.distributed.run", "torch.distributed.launch",
                     "deepspeed.launcher.runner", "deepspeed.launcher.launch",
                     "accelerate.commands.launch")
_LAUNCHER_SCRIPTS = ("torchrun", "deepspeed")
_SUBCOMMAND_LAUNCHERS = {"accelerate": "launch", "accelerate.commands.accelerate_cli": "launch"}


def is_launcher(argv: Sequence[str]) -> bool:
    """Whether this command line (`sys.orig_argv`: the interpreter first) starts a launcher."""
    args = list(argv[1:])
    while args and args[0].startswith("-") and args[0] != "-m":
        args.pop(0)  # interpreter options such as -u, -X dev
    if len(args) >= 2 and args[0] == "-m":
        program, rest = args[1], args[2:]
        if program in _LAUNCHER_MODULES:
            return True
    elif args:
        program, rest = os.path.basename(args[0]), args[1:]
        if program in _LAUNCHER_SCRIPTS:
            return True
    else:
        return False
    subcommand = _SUBCOMMAND_LAUNCHERS.get(program)
    return subcommand is not None and bool(rest) and rest[0] == subcommand


def identity_key(settings: Settings) -> int | str | None:
    """What a reporting process writes as the owner of its identity: its rank, `local-<L>`
    while its rank is pending, None for a plain process."""
    if settings.rank is not None:
        return settings.rank
    if settings.rank_pending:
        return f"{PENDING_OWNER_PREFIX}{settings.local_rank}"
    return None


def classify(settings: Settings, *, pid: int, argv: Sequence[str]) -> Role:
    # A launcher is silent whatever it inherits: a PyTorchJob pod puts RANK=<pod index> in
    # torchrun's environment, srun puts SLURM_PROCID there.
    if is_launcher(argv):
        return Role.LAUNCHER
    owner = settings.identity_owner
    if owner is not None and owner[0] == identity_key(settings) and owner[1] != pid:
        return Role.CHILD
    return Role.RANK if settings.rank is not None else Role.PROCESS


# This process's role, with the pid it was decided for: a fork copies it, and a copy whose pid
# differs is a child whatever it says.
_decided: tuple[int, Role] | None = None


def claim(settings: Settings, *, argv: Sequence[str] | None = None) -> Role:
    """Decide this process's role (once per process) and, when it reports, record that it owns
    its identity, for its children."""
    global _decided
    pid = os.getpid()
    if _decided is not None and _decided[0] == pid:
        return _decided[1]
    if _decided is not None:
        role = Role.CHILD  # forked from a process that had decided: never its identity
    else:
        role = classify(settings, pid=pid, argv=sys.orig_argv if argv is None else argv)
    if role in (Role.RANK, Role.PROCESS):
        claim_identity(identity_key(settings), pid)
    _decided = (pid, role)
    return role


def adopt_role(role: Role) -> None:
    """This process's role changed: a plain process whose rank appeared later (`_late_rank`)."""
    global _decided
    if _decided is not None and _decided[0] == os.getpid():
        _decided = (_decided[0], role)


def mark_worker() -> None:
    """This process is a DataLoader worker that reports as such (see `_worker`)."""
    global _decided
    _decided = (os.getpid(), Role.DATALOADER_WORKER)


def current_role() -> Role | None:
    """This process's role; None when nothing has decided it yet."""
    if _decided is None:
        return None
    return _decided[1] if _decided[0] == os.getpid() else Role.CHILD


def reporting_pid() -> int | None:
    """The pid that reports here: this process's own when its role reports, else None."""
    role = current_role()
    return os.getpid() if role is not None and role.reports else None
