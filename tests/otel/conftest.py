import errno
import os
import subprocess

import pytest

from yeto_otel.otel import FAULTS


@pytest.fixture
def small_tmpfs(tmp_path, request):
    """A real 1 MiB filesystem (tmpfs) mounted under the test's tmp dir; needs root.
    Unmounted when the test ends, whatever happened."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "small-disk"
    mount.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")
    request.addfinalizer(lambda: subprocess.run(["umount", "-l", str(mount)], check=False))
    return mount


def fill_disk(mount, leave: int = 0):
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


@pytest.fixture
def fresh_fault_log():
    """The process-wide record of logged failure kinds, empty for this test (each kind is
    logged once per process, and earlier tests ran in this one)."""
    FAULTS.forget()
    yield FAULTS
    FAULTS.forget()
