"""Real full filesystems for fault tests: a tmpfs of an exact size mounted under the test's tmp
dir (needs root; unmounted when the test ends, whatever happened), and a filler that takes the
rest of its space. Without root or mount the test is skipped, or in CI fails (CI runs as root,
so a fault test can never be skipped there silently)."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

from required_components import missing


def mount_tmpfs(point: Path, nbytes: int, request) -> Path:
    """Mount a tmpfs of `nbytes` at `point` (created) for the running test."""
    if os.geteuid() != 0:
        missing("root (to mount a small tmpfs)", "sudo python -m pytest ...")
    point.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={nbytes}", "tmpfs",
                             str(point)], capture_output=True, text=True)
    if result.returncode != 0:
        missing(f"a tmpfs mount ({result.stderr.strip()})", "run the tests as root on Linux")
    request.addfinalizer(lambda: subprocess.run(["umount", "-l", str(point)], check=False))
    return point


def fill_disk(mount: Path, leave: int = 0) -> Path:
    """Fill the filesystem at `mount` with one file until the kernel says ENOSPC, then free
    `leave` bytes of it again (whole pages); returns the filler's path (unlink it to free the
    space)."""
    filler = mount / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        chunk = b"\0" * 65536
        while True:
            try:
                os.write(fd, chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                break
        if leave:
            os.ftruncate(fd, os.fstat(fd).st_size - leave)
    finally:
        os.close(fd)
    return filler
