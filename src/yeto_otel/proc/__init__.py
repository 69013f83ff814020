"""Linux readers: kernel memory files kept open and re-read with pread, the process's own
memory cgroup (v1 or v2) and its files, the pagemap probe that says how much of a mapped
file this process has touched, and the madvise calls that say how such a mapping will be read.

Pure parsing and system calls, no OpenTelemetry: the census and the anchors build on these.
"""

from ._cgroup_location import (CgroupNotFound, MemoryCgroup, locate_memory_cgroup,
                               parse_mountinfo, parse_proc_cgroup)
from ._cgroup_memory import (UNLIMITED_FROM, CgroupReading, MemoryCgroupFiles, parse_flat_keyed,
                             parse_pressure_totals, parse_single_value)
from ._files import (ProcFile, ProcReadError, parse_kb_fields, read_anonymous_bytes, read_kb_fields,
                     read_raw_field)
from ._process_start import process_start_ns, process_started_after_boot_s, process_uptime_s
from ._advice import advise_random_access, advise_will_need, evict_from_page_cache
from ._residency import PAGE_SIZE, FileMapping, Residency, ResidencyProbe

__all__ = [
    "UNLIMITED_FROM",
    "advise_random_access",
    "advise_will_need",
    "evict_from_page_cache",
    "CgroupNotFound",
    "CgroupReading",
    "MemoryCgroup",
    "MemoryCgroupFiles",
    "locate_memory_cgroup",
    "parse_flat_keyed",
    "parse_mountinfo",
    "parse_pressure_totals",
    "parse_proc_cgroup",
    "parse_single_value",
    "PAGE_SIZE",
    "process_start_ns",
    "process_started_after_boot_s",
    "process_uptime_s",
    "FileMapping",
    "ProcFile",
    "ProcReadError",
    "read_anonymous_bytes",
    "Residency",
    "ResidencyProbe",
    "parse_kb_fields",
    "read_kb_fields",
    "read_raw_field",
]
