"""A real crash mid-save (os._exit from the writer, SIGKILL) never leaves a half file under the
final name: it holds the previous complete file, or nothing."""

import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from anchor_testkit import sha256
from signal_dispositions import default_stop_signals
from yeto_otel.anchors import load_resume_anchors, save_resume_anchors

MiB = 1 << 20
NEW_SHARDS = 16  # 16 MiB written by the child

CHILD = r"""
import os, sys
import torch
from yeto_otel.anchors import save_resume_anchors

path, how, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
real_pwrite = os.pwrite
written = 0


def dies_mid_write(fd, data, offset):
    # The anchors' bytes go into the laid-out file with pwrite; die part-way through them.
    global written
    n = real_pwrite(fd, data, offset)
    written += n
    if written > limit:
        if how == "exit":
            os._exit(17)
        print("blocked", flush=True)
        sys.stdin.read()  # wait here until the parent kills us
        os._exit(18)
    return n


if limit:
    os.pwrite = dies_mid_write
print("saving", flush=True)
save_resume_anchors(path, {f"new.{i}": torch.full((%d,), -1.0) for i in range(%d)})
print("finished", flush=True)
""" % (MiB // 4, NEW_SHARDS)


def _previous(directory):
    path = directory / "anchors.pt"
    tensors = {f"old.{i}": torch.full((1024,), float(i)) for i in range(4)}
    save_resume_anchors(path, tensors)
    return path, sha256(path)


def _spawn(path, how, limit):
    return subprocess.Popen([sys.executable, "-c", CHILD, str(path), how, str(limit)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=default_stop_signals)


def _temp_files(directory):
    return [n for n in os.listdir(directory) if n.startswith(".anchors.pt.") and n.endswith(".tmp")]


def _assert_previous_intact(path, digest):
    assert sha256(path) == digest
    with load_resume_anchors(path) as anchors:
        assert sorted(anchors.tensors) == [f"old.{i}" for i in range(4)]
        assert float(anchors.tensors["old.3"][0]) == 3.0


@pytest.mark.parametrize("previous", [True, False], ids=["over_previous", "first_save"])
def test_process_exit_mid_write_keeps_the_previous_file(tmp_path, previous):
    path, digest = _previous(tmp_path) if previous else (tmp_path / "anchors.pt", None)
    child = _spawn(path, "exit", 4 * MiB)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 17, err
    assert "finished" not in out
    temps = _temp_files(tmp_path)
    assert len(temps) == 1 and os.path.getsize(tmp_path / temps[0]) > 4 * MiB  # it died mid-file
    if previous:
        _assert_previous_intact(path, digest)
    else:
        assert not path.exists()


@pytest.mark.parametrize("previous", [True, False], ids=["over_previous", "first_save"])
def test_sigkill_mid_write_keeps_the_previous_file(tmp_path, previous):
    path, digest = _previous(tmp_path) if previous else (tmp_path / "anchors.pt", None)
    child = _spawn(path, "block", 8 * MiB)
    try:
        assert child.stdout.readline().strip() == "saving"
        assert child.stdout.readline().strip() == "blocked", child.stderr.read()
        temps = _temp_files(tmp_path)
        assert len(temps) == 1 and os.path.getsize(tmp_path / temps[0]) > 8 * MiB
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL
    if previous:
        _assert_previous_intact(path, digest)
    else:
        assert not path.exists()


def test_sigkill_at_any_moment_leaves_a_complete_file(tmp_path):
    # No patching: kill an ordinary save as soon as its temp file shows up. Whether the kill
    # lands mid-write or after the rename, the final name holds one complete file.
    path, digest = _previous(tmp_path)
    child = _spawn(path, "none", 0)
    try:
        assert child.stdout.readline().strip() == "saving"
        deadline = time.monotonic() + 60
        while not _temp_files(tmp_path) and child.poll() is None:
            assert time.monotonic() < deadline, "the temp file never appeared"
            time.sleep(0.0005)  # polling interval, not synchronisation
        child.send_signal(signal.SIGKILL)  # a no-op if the save already finished
    finally:
        child.kill()
        _, err = child.communicate(timeout=60)
    assert child.returncode in (0, -signal.SIGKILL), err
    if sha256(path) == digest:
        _assert_previous_intact(path, digest)
    else:  # the save had already completed
        with load_resume_anchors(path) as anchors:
            assert len(anchors.tensors) == NEW_SHARDS
            assert float(anchors.tensors[f"new.{NEW_SHARDS - 1}"][-1]) == -1.0


def test_the_child_saves_normally_when_not_killed(tmp_path):
    # The crash tests' child is a working save: the crash, not the script, stops it.
    path = tmp_path / "anchors.pt"
    child = _spawn(path, "none", 0)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    assert out.split() == ["saving", "finished"]
    assert os.path.getsize(path) > NEW_SHARDS * MiB and _temp_files(tmp_path) == []


@pytest.mark.parametrize("previous", [True, False], ids=["over_previous", "first_save"])
def test_sigint_mid_write_is_a_keyboard_interrupt_and_keeps_the_previous_file(tmp_path,
                                                                              previous):
    path, digest = _previous(tmp_path) if previous else (tmp_path / "anchors.pt", None)
    child = _spawn(path, "block", 8 * MiB)
    try:
        assert child.stdout.readline().strip() == "saving"
        assert child.stdout.readline().strip() == "blocked", child.stderr.read()
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=60)
    finally:
        child.kill()  # a no-op once it has ended
        child.wait(timeout=60)
    # Uncaught, a KeyboardInterrupt ends Python by SIGINT: what a launcher expects of Ctrl-C.
    assert child.returncode == -signal.SIGINT, err
    assert err.strip().splitlines()[-1] == "KeyboardInterrupt", err
    assert _temp_files(tmp_path) == []
    if previous:
        _assert_previous_intact(path, digest)
        assert os.listdir(tmp_path) == ["anchors.pt"]
    else:
        assert os.listdir(tmp_path) == []
