import pytest

from small_disks import mount_tmpfs
from stopping import kill_leftover_trainers
from yeto_otel.otel import FAULTS


@pytest.fixture
def small_tmpfs(tmp_path, request):
    """A real 1 MiB filesystem (tmpfs) mounted under the test's tmp dir (see small_disks)."""
    return mount_tmpfs(tmp_path / "small-disk", 1 << 20, request)


@pytest.fixture
def fresh_fault_log():
    """The process-wide record of logged failure kinds, empty for this test (each kind is
    logged once per process, and earlier tests ran in this one)."""
    FAULTS.forget()
    yield FAULTS
    FAULTS.forget()


@pytest.fixture(autouse=True)
def _no_trainer_outlives_its_test():
    """A test that fails before it stops its trainer must not leave the process running."""
    yield
    kill_leftover_trainers()
