"""The exit record's layout: what a reader takes from a record written whole, half-written (a
SIGKILL in the middle of an update or of the header) or never finished."""

from __future__ import annotations

import struct

from yeto_otel.exits import Header, RecordState, Slot
from yeto_otel.exits._layout import (RECORD_SIZE, SLOT_OFFSETS, read_header, read_latest_slot,
                                     write_header, write_slot)

HEADER = Header(pid=4242, rank=3, local_rank=3, world_size=8, launch_count=2,
                process_start_ns=1_700_000_000_000_000_000,
                record_start_ns=1_700_000_001_000_000_000,
                instance_id="slurm-41/rank-3", job_id="slurm-41", service_name="pretrain",
                cgroup_dir="/sys/fs/cgroup/memory/slurm/uid_0/job_41", cgroup_version=1)


def _slot(step: int, **more) -> Slot:
    return Slot(written_ns=1_000 + step, step=step, rss=step * 10, anonymous=step * 20,
                phase="dcp.save", **more)


def test_header_and_slots_read_back_as_written():
    buffer = bytearray(RECORD_SIZE)
    write_header(buffer, HEADER)
    for update in range(5):
        write_slot(buffer, update, _slot(update, cgroup_oom_kills=update // 2))
    assert read_header(buffer) == HEADER
    latest = read_latest_slot(buffer)
    assert (latest.step, latest.rss, latest.anonymous, latest.cgroup_oom_kills, latest.phase) == (
        4, 40, 80, 2, "dcp.save")
    assert latest.state is RecordState.RUNNING and latest.seq == 10


def test_an_update_cut_short_leaves_the_previous_one():
    buffer = bytearray(RECORD_SIZE)
    write_header(buffer, HEADER)
    for update in range(3):
        write_slot(buffer, update, _slot(update))
    # update 3 goes to slot 1: killed after its counter went odd and half its values landed
    struct.pack_into("<Q", buffer, SLOT_OFFSETS[1], 2 * 3 + 1)
    struct.pack_into("<q", buffer, SLOT_OFFSETS[1] + 40, 999)
    assert read_latest_slot(buffer).step == 2


def test_a_header_never_finished_is_no_record():
    buffer = bytearray(RECORD_SIZE)
    write_header(buffer, HEADER)
    struct.pack_into("<I", buffer, 12, 0)  # killed before `ready` was written
    assert read_header(buffer) is None
    assert read_header(bytearray(RECORD_SIZE)) is None  # all zeros: not ours
    assert read_header(bytearray(100)) is None
    assert read_latest_slot(bytearray(RECORD_SIZE)) is None  # never updated


def test_long_texts_are_cut_to_their_fields():
    buffer = bytearray(RECORD_SIZE)
    write_header(buffer, Header(pid=1, instance_id="x" * 500, cgroup_dir="/" + "d" * 900))
    write_slot(buffer, 0, Slot(phase="p" * 100))
    assert read_header(buffer).instance_id == "x" * 160
    assert len(read_header(buffer).cgroup_dir) == 480
    assert read_latest_slot(buffer).phase == "p" * 64
