"""A rank whose number appears only after it started.

Some ranks are started with nothing in their environment that says which they are: the
process you start under Lightning's own DDP launcher (its rank 0, which starts the other
ranks itself), the ranks of Lightning beyond node 0, any trainer that passes its rank to
`init_process_group` in code. Such a process starts as a plain process (`<host>/pid-<pid>`).
Once its process group exists, it is a rank: from then on it reports under the rank's identity
(`<job>/rank-<R>` or `<host>/rank-<R>`), its DataLoader workers under that, and the children it
starts afterwards see that it owns the rank's identity.

The SDK's providers keep the resource they were made with, so the identity is changed where
the data leaves: the exporters (`_owner_only`) ask `adopted_resource()` at each export, which
looks at `torch.distributed` (never importing torch) until the group exists. What was exported
before stays under the pid-based identity. Logs keep it too (yeto-otel exports none of its
own).
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import replace

from opentelemetry.sdk.resources import Resource

from ..settings import Settings, claim_identity, local_rank_now
from ._process import Role, adopt_role
from ._resource import reported_attributes

__all__ = ["adopted_attributes", "adopted_resource", "await_rank"]

_lock = threading.Lock()
_waiting: tuple[int, Settings] | None = None  # (pid, its settings) while the rank is unknown
_adopted: tuple[int, dict, Resource] | None = None


def await_rank(settings: Settings) -> None:
    """This process (a plain process, or a rank whose number is pending) takes its rank from
    torch.distributed once the process group exists."""
    global _waiting
    if settings.rank is None:
        _waiting = (os.getpid(), settings)


def _process_group() -> tuple[int, int] | None:
    torch = sys.modules.get("torch")  # never import torch for this
    if torch is None:
        return None
    try:
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except Exception:  # a half-torn-down group, a backend that refuses: not yet
        pass
    return None


def adopted_attributes() -> dict | None:
    """The rank's identity this process took from its process group; None before (or when it
    was a rank from the start)."""
    global _adopted
    pid = os.getpid()
    adopted = _adopted
    if adopted is not None:
        return adopted[1] if adopted[0] == pid else None
    waiting = _waiting
    if waiting is None or waiting[0] != pid:
        return None  # a rank from the start, or a forked copy (a child: silent anyway)
    group = _process_group()
    if group is None:
        return None
    with _lock:
        if _adopted is None:
            rank, world = group
            settings = waiting[1]
            local = local_rank_now()
            attributes = reported_attributes(replace(
                settings, rank=rank, world_size=world, rank_pending=False,
                local_rank=settings.local_rank if local is None else local,
                rank_source="torch.distributed"))
            # Children started from now on know it is the rank. This runs on an export thread:
            # the variable exists already (claimed at start), so the update replaces one
            # pointer in the C environment and never reallocates it under another thread.
            claim_identity(rank, pid)
            adopt_role(Role.RANK)
            _adopted = (pid, attributes, Resource(attributes))
        return _adopted[1]


def adopted_resource() -> Resource | None:
    """`adopted_attributes()` as a Resource, for the exporters."""
    if adopted_attributes() is None:
        return None
    return _adopted[2]


def _forget() -> None:
    """Tests: back to a process that waits for nothing."""
    global _waiting, _adopted
    _waiting = _adopted = None
