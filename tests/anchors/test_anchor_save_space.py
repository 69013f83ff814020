"""Saving onto a real full filesystem (a small tmpfs mounted by the test): a clean Python error
that names the path and the bytes needed and free, never SIGBUS, and nothing left behind.

The save runs in a child process so that a SIGBUS would show as its exit status. A save needs
the file's size on that filesystem, and nothing more: the anchors are written straight into it.
"""

import errno
import json
import os
import signal
import subprocess
import sys

import pytest
import torch

from anchor_testkit import PAGE, same_bits
from small_disks import mount_tmpfs
from yeto_otel.anchors import load_resume_anchors

SAVE_FAILED = 3

CHILD = r"""
import json, os, sys
import torch
from yeto_otel.anchors import AnchorSaveError, save_resume_anchors

path, how = sys.argv[1], sys.argv[2]
g = torch.Generator().manual_seed(int(sys.argv[3]))
anchors = {"layer.0.weight": torch.randn(200, 300, generator=g),
           "layer.0.bias": torch.randn(300, generator=g),
           "embed": torch.randn(50000, generator=g).to(torch.bfloat16)}  # two flat storages

if how == "statvfs_says_nothing":  # as some FUSE filesystems: only the reservation guards
    import yeto_otel.anchors._save as save_module
    save_module.free_bytes = lambda directory: None
elif how.startswith("space_taken"):  # another writer fills the disk after the check
    import yeto_otel.anchors._save as save_module
    reserve = save_module.reserve

    def the_disk_fills_first(fd, nbytes):
        with open(sys.argv[4], "wb", buffering=0) as filler:
            try:
                while True:
                    filler.write(b"\0" * 4096)
            except OSError:
                pass
        if how == "space_taken_while_writing":
            return False  # a filesystem that cannot reserve: torch's own write fails half-way
        return reserve(fd, nbytes)

    save_module.reserve = the_disk_fills_first

try:
    save_resume_anchors(path, anchors)
except AnchorSaveError as error:
    print(json.dumps({"message": str(error), "errno": error.errno, "needed": error.needed,
                      "free": error.free, "oserror": isinstance(error, OSError)}))
    sys.exit(%d)
print(json.dumps({"saved": os.path.getsize(path)}))
""" % SAVE_FAILED


def _save_in_child(path, how="plain", seed=0, *extra):
    result = subprocess.run([sys.executable, "-c", CHILD, str(path), how, str(seed), *extra],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != -signal.SIGBUS, "the save died of SIGBUS: " + result.stderr
    return result


def _load_all(path):
    with load_resume_anchors(path) as anchors:
        return {name: t.clone() for name, t in anchors.tensors.items()}


def _pages(nbytes):
    return -(-nbytes // PAGE) * PAGE


@pytest.fixture
def roomy(tmp_path):
    """The child's save on a roomy disk: its path and file bytes."""
    path = tmp_path / "roomy" / "anchors.pt"
    path.parent.mkdir()
    result = _save_in_child(path)
    assert result.returncode == 0, result.stderr
    content = torch.load(path, weights_only=True)
    assert len(content["storages"]) == 2
    return path, json.loads(result.stdout)["saved"]


@pytest.fixture
def sizes(roomy):
    """The file bytes of the child's save."""
    return roomy[1]


@pytest.fixture
def small_disk(tmp_path, request):
    """small_disk(nbytes) -> a real tmpfs of that size, mounted under the test's tmp dir and
    unmounted when the test ends, whatever happened. Needs root."""

    def mount(nbytes):
        point = mount_tmpfs(tmp_path / f"disk-{nbytes}", nbytes, request)
        statvfs = os.statvfs(point)
        assert statvfs.f_bavail * statvfs.f_frsize == nbytes  # the test's arithmetic holds
        return point

    return mount


def _failure(result):
    assert result.returncode == SAVE_FAILED, result.stderr
    return json.loads(result.stdout)


def _assert_names_the_need(report, path, needed, free):
    assert report["oserror"] and report["errno"] == errno.ENOSPC
    assert report["needed"] == needed and report["free"] == free
    message = report["message"]
    assert str(path) in message and "not enough space" in message
    assert str(needed) in message and str(free) in message


@pytest.mark.parametrize("short_by", ["most_of_the_file", "a_page"])
def test_a_disk_too_small_is_a_clean_error_naming_the_bytes(small_disk, sizes, short_by):
    file_bytes = sizes
    size = (_pages(file_bytes // 2) if short_by == "most_of_the_file"
            else _pages(file_bytes) - PAGE)
    disk = small_disk(size)
    report = _failure(_save_in_child(disk / "anchors.pt"))
    _assert_names_the_need(report, disk / "anchors.pt", file_bytes, size)
    assert "scratch" not in report["message"]  # the file is all a save needs
    assert os.listdir(disk) == []  # no temp file
    assert os.statvfs(disk).f_bfree * PAGE == size  # nor any of their blocks


def test_exactly_enough_room_saves(small_disk, roomy):
    roomy_path, file_bytes = roomy
    disk = small_disk(_pages(file_bytes))
    result = _save_in_child(disk / "anchors.pt")
    assert result.returncode == 0, result.stderr
    assert os.listdir(disk) == ["anchors.pt"]
    assert os.path.getsize(disk / "anchors.pt") == file_bytes
    loaded, expected = _load_all(disk / "anchors.pt"), _load_all(roomy_path)
    assert set(loaded) == set(expected)
    assert all(same_bits(loaded[name], expected[name]) for name in expected)


def test_no_room_keeps_the_previous_file(small_disk, sizes):
    file_bytes = sizes
    disk = small_disk(2 * _pages(file_bytes) - PAGE)
    first = _save_in_child(disk / "anchors.pt", "plain", 1)
    assert first.returncode == 0, first.stderr
    previous = _load_all(disk / "anchors.pt")
    report = _failure(_save_in_child(disk / "anchors.pt", "plain", 2))
    free = _pages(file_bytes) - PAGE
    _assert_names_the_need(report, disk / "anchors.pt", file_bytes, free)
    assert os.listdir(disk) == ["anchors.pt"]
    loaded = _load_all(disk / "anchors.pt")
    assert all(same_bits(loaded[name], previous[name]) for name in previous)


@pytest.mark.parametrize("short_by", ["half_the_file", "a_page"])
def test_the_reservation_alone_stops_sigbus_where_statvfs_says_nothing(small_disk, sizes,
                                                                       short_by):
    # The file's blocks are reserved before a byte of the anchors is written, so a full disk
    # is ENOSPC, even when the up-front check cannot know the free space.
    file_bytes = sizes
    size = _pages(file_bytes // 2) if short_by == "half_the_file" else _pages(file_bytes) - PAGE
    disk = small_disk(size)
    report = _failure(_save_in_child(disk / "anchors.pt", "statvfs_says_nothing"))
    assert report["errno"] == errno.ENOSPC and report["needed"] == file_bytes
    assert str(disk / "anchors.pt") in report["message"]
    assert "does not say how many are free" in report["message"]
    assert os.listdir(disk) == []
    assert os.statvfs(disk).f_bfree * PAGE == size


@pytest.mark.parametrize("how", ["space_taken_before_reserving", "space_taken_while_writing"])
def test_space_taken_by_another_writer_is_said_as_such(small_disk, sizes, how):
    # After the check, another writer fills the disk: the file's reservation fails, or, where
    # blocks cannot be reserved, torch's write fails half-way with "[enforce fail at
    # inline_container.cc] unexpected pos", which never mentions space. Either way the error
    # says what the save needs and what is free once its own temp file is gone.
    file_bytes = sizes
    size = _pages(file_bytes)
    disk = small_disk(size)
    (disk / "anchors").mkdir()
    path = disk / "anchors" / "anchors.pt"
    report = _failure(_save_in_child(path, how, 0, str(disk / "filler")))
    free = size - os.path.getsize(disk / "filler")
    _assert_names_the_need(report, path, file_bytes, free)
    assert "inline_container" not in report["message"]
    assert os.listdir(disk / "anchors") == []
    assert os.statvfs(disk).f_bfree * PAGE == free


def test_the_error_is_an_oserror_that_survives_pickling():
    import pickle

    from yeto_otel.anchors import AnchorSaveError

    error = AnchorSaveError("/ckpt/a.pt", "not enough space in /ckpt", needed=10, free=3)
    copy = pickle.loads(pickle.dumps(error))
    assert isinstance(copy, OSError) and copy.errno == errno.ENOSPC
    assert (copy.path, copy.needed, copy.free, str(copy)) == ("/ckpt/a.pt", 10, 3, str(error))
    assert str(error) == "cannot save resume anchors to /ckpt/a.pt: not enough space in /ckpt"
