"""Which process of a host observes the node-wide `yeto.node.*` metrics under
`YETO_OTEL_NODE_METRICS=auto`: the one holding the host's node `Duty`.

The key is the kernel's boot id, which names one boot of one machine: the processes of a
host (and of every container on it, which all see the host's boot id) that share a lock
directory share one election, and two machines sharing a lock directory over a network
filesystem never do. The hostname is not part of it: in a pod it is the pod's name, and
pods of one host that are given a common lock directory should still elect one reporter.

When the lock cannot be used at all (no lock directory, no permission), the rule before
elections applies instead, so the node's series do not vanish: the launcher's first local
rank, or a plain process, reports.
"""

from __future__ import annotations

import os
import socket

from ..proc import ProcFile, ProcReadError
from ._duty import DEFAULT_LOCK_DIR, Duty
from ._fault_ledger import FaultLedger

__all__ = ["NodeDuty", "node_duty_key"]


class NodeDuty:
    def __init__(self, key: str, *, fallback: bool, directory: str = DEFAULT_LOCK_DIR,
                 ledger: FaultLedger | None = None):
        self.duty = Duty(key, directory=directory, ledger=ledger)
        self.fallback = fallback

    def held(self) -> bool:
        """Whether this process observes the node now (never raises)."""
        return self.duty.held() or (self.fallback and self.duty.failed)

    def close(self) -> None:
        self.duty.close()


def node_duty_key(proc_root: str = "/proc") -> str:
    boot_file = ProcFile(os.path.join(proc_root, "sys/kernel/random/boot_id"))
    try:
        boot_id = boot_file.read().decode("ascii", "replace").strip()
    except ProcReadError:
        boot_id = ""
    finally:
        boot_file.close()
    # Without a boot id (a sandbox that hides it), the host's name is the next best identity.
    return "node:" + (boot_id or "host:" + socket.gethostname())
