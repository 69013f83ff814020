"""Linux readers: kernel memory files kept open and re-read with pread, and the pagemap
probe that says how much of a mapped file this process has touched.

Pure parsing and system calls, no OpenTelemetry: the census and the anchors build on these.
"""

from ._files import ProcFile, ProcReadError, parse_kb_fields, read_kb_fields, read_raw_field
from ._residency import PAGE_SIZE, FileMapping, Residency, ResidencyProbe

__all__ = [
    "PAGE_SIZE",
    "FileMapping",
    "ProcFile",
    "ProcReadError",
    "Residency",
    "ResidencyProbe",
    "parse_kb_fields",
    "read_kb_fields",
    "read_raw_field",
]
