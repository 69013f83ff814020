"""The host-memory census: one table of metrics, typed quantities, the readers that take a
snapshot of every source once per collection, the observable instruments built on it, the
step-log record and the host-cache release policy.

Data flows one way: /proc files and the allocator's stats -> `CensusReader.take()` (one
`CensusSnapshot` of `Quantity` values) -> `CensusInstruments` (one observable instrument per
table row) -> the SDK. The same snapshot feeds `add_census_to_step_log` and
`HostCacheReleasePolicy`.
"""

from . import _table
from ._allocator import AllocatorSource, GaugeEvidence, read_allocator_stats, resolve_allocator
from ._cgroup import CgroupCensus
from ._duty import DEFAULT_LOCK_DIR, DUTY_ERROR_SOURCE, Duty
from ._lock_files import ForeignLockPath, open_lock_file, private_file_names, private_lock_dir
from ._fault_ledger import FaultLedger
from ._host_cache import HostCacheReleasePolicy, ReleaseDecision
from ._instruments import INTERNAL_ERROR_SOURCE, CensusInstruments
from ._node_duty import NodeDuty, node_duty_key
from ._quantity import Kind, Quantity
from ._snapshot import CensusReader, CensusSnapshot
from ._step_log import add_census_to_step_log, set_step_hook
from ._table import *  # noqa: F403  (the table's rows and names, as its __all__ lists them)

__all__ = [
    *_table.__all__,
    "DEFAULT_LOCK_DIR",
    "DUTY_ERROR_SOURCE",
    "INTERNAL_ERROR_SOURCE",
    "AllocatorSource",
    "CensusInstruments",
    "CgroupCensus",
    "CensusReader",
    "CensusSnapshot",
    "Duty",
    "FaultLedger",
    "ForeignLockPath",
    "GaugeEvidence",
    "HostCacheReleasePolicy",
    "NodeDuty",
    "Kind",
    "Quantity",
    "ReleaseDecision",
    "add_census_to_step_log",
    "node_duty_key",
    "open_lock_file",
    "private_file_names",
    "private_lock_dir",
    "read_allocator_stats",
    "resolve_allocator",
    "set_step_hook",
]
