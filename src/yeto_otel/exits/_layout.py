"""The binary layout of a rank's exit record: what a dead process leaves behind for whoever
reports its death.

One page, in a file the process keeps mapped for its whole life (`_record_file`):

    [0, 1024)     the header, written once at start: who the process is, where its memory
                  cgroup is, and a `ready` word written last (a record killed while its header
                  was being written is no record)
    [1024, 2048)  slot 0    the latest values, written in turn: slot n % 2 for the n-th update
    [2048, 3072)  slot 1
    [3072, 3096)  the exit status, written by the process's parent when it saw it end (an
                  instrumented launcher: torchrun), `ready` last; never by the process itself

A slot is written as a sequence lock: its counter is made odd, the values are written, the
counter is made even (2 n + 2 for the n-th update). A reader takes the slot with the highest
even counter that reads the same before and after its values. A process killed in the middle
of an update (SIGKILL comes at any instruction) leaves that slot odd, or torn between two
counter reads, and the other slot whole: one update older, never inconsistent. Updates are
stores into shared memory (a `struct.pack_into` into the mapping): no system call.

Every integer is little-endian; strings are UTF-8, NUL-padded, cut to their field.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

__all__ = ["HEADER", "RECORD_SIZE", "SLOT", "SLOT_OFFSETS", "Header", "RecordState", "Slot",
           "UNKNOWN", "decode_text", "or_unknown", "read_exit_status", "read_header", "read_latest_slot",
           "write_exit_status", "write_header",
           "write_slot", "write_slot_values"]

MAGIC = b"YETOEXIT"
LAYOUT_VERSION = 1
RECORD_SIZE = 4096
SLOT_OFFSETS = (1024, 2048)
UNKNOWN = -1  # an integer field nobody could read (no cgroup, no step logged yet)


def or_unknown(value: int | None) -> int:
    return UNKNOWN if value is None else value


class RecordState(IntEnum):
    RUNNING = 0
    CLOSED = 1  # the process exited through the interpreter's exit: nothing to report
    REPORTED = 2  # its death (or its own exception) has been reported: never again


# magic, version, ready, pid, rank, local rank, world size, launch count, process start
# (wall ns), record start (wall ns), instance id, job id, service name, cgroup memory dir,
# cgroup version
HEADER = struct.Struct("<8sIIiiiiiqq160s128s128s480sB")
_READY_OFFSET = 12  # after magic and version
# seq, state, exit code, written (wall ns), census read (wall ns), step, rss, anonymous,
# cgroup usage, cgroup limit, cgroup oom_kill, node oom_kill, phase
SLOT = struct.Struct("<QBxxxiqqqqqqqqq64s")
_SEQ = struct.Struct("<Q")


@dataclass(frozen=True)
class Header:
    pid: int
    rank: int = UNKNOWN
    local_rank: int = UNKNOWN
    world_size: int = UNKNOWN
    launch_count: int = UNKNOWN
    process_start_ns: int = 0
    record_start_ns: int = 0
    instance_id: str = ""
    job_id: str = ""
    service_name: str = ""
    cgroup_dir: str = ""  # the memory cgroup's directory as the process saw it ("" none)
    cgroup_version: int = 0  # 1, 2, or 0 when the process has no memory cgroup it can read


@dataclass(frozen=True)
class Slot:
    seq: int = 0
    state: RecordState = RecordState.RUNNING
    exit_code: int = UNKNOWN  # set by the process itself when it exits with an exception
    written_ns: int = 0
    census_ns: int = 0  # when the census values below were read (0: never)
    step: int = UNKNOWN
    rss: int = UNKNOWN
    anonymous: int = UNKNOWN
    cgroup_usage: int = UNKNOWN
    cgroup_limit: int = UNKNOWN
    cgroup_oom_kills: int = UNKNOWN
    node_oom_kills: int = UNKNOWN
    phase: str = ""


def _text(value: str, size: int) -> bytes:
    return value.encode("utf-8", "replace")[:size]


def decode_text(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def write_header(buffer, header: Header) -> None:
    """The header, then `ready`: a reader ignores a record whose header is not whole."""
    HEADER.pack_into(buffer, 0, MAGIC, LAYOUT_VERSION, 0, header.pid, header.rank,
                     header.local_rank, header.world_size, header.launch_count,
                     header.process_start_ns, header.record_start_ns,
                     _text(header.instance_id, 160), _text(header.job_id, 128),
                     _text(header.service_name, 128), _text(header.cgroup_dir, 480),
                     header.cgroup_version)
    struct.pack_into("<I", buffer, _READY_OFFSET, 1)


def read_header(buffer) -> Header | None:
    """The header of a record, None when it is not one of ours or was never finished."""
    if len(buffer) < RECORD_SIZE:
        return None
    (magic, version, ready, pid, rank, local_rank, world_size, launch_count, process_start,
     record_start, instance, job, service, cgroup_dir, cgroup_version) = HEADER.unpack_from(
        buffer, 0)
    if magic != MAGIC or version != LAYOUT_VERSION or ready != 1:
        return None
    return Header(pid, rank, local_rank, world_size, launch_count, process_start, record_start,
                  decode_text(instance), decode_text(job), decode_text(service),
                  decode_text(cgroup_dir), cgroup_version)


# magic, ready, signal (0: none), exit code
_STATUS = struct.Struct("<8sIii")
_STATUS_OFFSET = 3072
_STATUS_MAGIC = b"YETOSTAT"


def write_exit_status(buffer, signal: int, code: int) -> None:
    """What the parent saw: killed by `signal` (a number, 0 for none) or exited with `code`."""
    _STATUS.pack_into(buffer, _STATUS_OFFSET, _STATUS_MAGIC, 0, signal, code)
    struct.pack_into("<I", buffer, _STATUS_OFFSET + 8, 1)


def read_exit_status(buffer) -> tuple[int, int] | None:
    """(signal, code) as the parent wrote it, None when none was written (or not whole)."""
    magic, ready, signal, code = _STATUS.unpack_from(buffer, _STATUS_OFFSET)
    return (signal, code) if magic == _STATUS_MAGIC and ready == 1 else None


def write_slot(buffer, update: int, slot: Slot) -> None:
    """The `update`-th update (from 0) into slot `update % 2`, as a sequence lock."""
    write_slot_values(buffer, update, slot.__dict__)


def write_slot_values(buffer, update: int, values: dict) -> None:
    """`write_slot` from a dict of Slot's fields (a writer keeps one and changes it in place:
    no object made per update)."""
    offset = SLOT_OFFSETS[update & 1]
    _SEQ.pack_into(buffer, offset, 2 * update + 1)
    SLOT.pack_into(buffer, offset, 2 * update + 1, values["state"], values["exit_code"],
                   values["written_ns"], values["census_ns"], values["step"], values["rss"],
                   values["anonymous"], values["cgroup_usage"], values["cgroup_limit"],
                   values["cgroup_oom_kills"], values["node_oom_kills"],
                   _text(values["phase"], 64))
    _SEQ.pack_into(buffer, offset, 2 * update + 2)


def _read_slot(buffer, offset: int) -> Slot | None:
    (seq, state, exit_code, written, census, step, rss, anonymous, usage, limit, cgroup_kills,
     node_kills, phase) = SLOT.unpack_from(buffer, offset)
    if seq == 0 or seq & 1 or _SEQ.unpack_from(buffer, offset)[0] != seq:
        return None  # never written, being written, or written again while we read
    try:
        state = RecordState(state)
    except ValueError:
        return None
    return Slot(seq, state, exit_code, written, census, step, rss, anonymous, usage, limit,
                cgroup_kills, node_kills, decode_text(phase))


def read_latest_slot(buffer) -> Slot | None:
    """The newest whole slot, None when no update was ever finished."""
    found = [s for s in (_read_slot(buffer, o) for o in SLOT_OFFSETS) if s is not None]
    return max(found, key=lambda s: s.seq) if found else None
