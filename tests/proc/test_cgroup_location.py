"""Finding this process's memory cgroup: v1 and v2 lines, mounts, namespaces, and the cases
where there is none to read."""

import os

import pytest

from repo_paths import ROOT
from yeto_otel.proc import (CgroupNotFound, locate_memory_cgroup, parse_mountinfo,
                            parse_proc_cgroup)

FIXTURES = ROOT / "tests" / "fixtures" / "cgroup"
POD = ("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6f1c.slice/"
       "cri-containerd-4a7e.scope")


def locate(variant: str):
    root = FIXTURES / variant
    return locate_memory_cgroup(str(root / "proc"), fs_root=str(root))


def test_v2_cgroup_is_found_under_the_cgroup2_mount():
    cgroup = locate("v2_pod")
    assert (cgroup.version, cgroup.path) == (2, POD)
    assert cgroup.directory == str(FIXTURES / "v2_pod" / "sys/fs/cgroup") + POD


def test_v1_memory_hierarchy_wins_in_the_hybrid_layout():
    """The `0::/` line is cgroup2 without the memory controller; memory is on v1."""
    cgroup = locate("v1_hybrid")
    assert (cgroup.version, cgroup.path) == (1, "/slurm/uid_1000/job_4242/step_0/task_0")
    assert cgroup.directory.endswith("sys/fs/cgroup/memory/slurm/uid_1000/job_4242/step_0/task_0")


def test_namespaced_root_reads_the_mount_root():
    """`0::/` in a container with its own namespace: the mount's root is its own cgroup."""
    cgroup = locate("v2_namespaced")
    assert (cgroup.version, cgroup.path) == (2, "/")
    assert os.path.normpath(cgroup.directory) == str(FIXTURES / "v2_namespaced" / "sys/fs/cgroup")


@pytest.mark.parametrize("variant, reason", [
    ("v2_outside_namespace", "not under any mount"),
    ("v2_host_root", "the root cgroup"),
    ("no_memory_controller", "no memory controller"),
])
def test_no_cgroup_to_read_says_why(variant, reason):
    with pytest.raises(CgroupNotFound, match=reason):
        locate(variant)


def test_no_proc_at_all(tmp_path):
    with pytest.raises(CgroupNotFound, match="self/cgroup"):
        locate_memory_cgroup(str(tmp_path / "proc"), fs_root=str(tmp_path))


def test_identity_is_the_cgroups_inode_whatever_the_view():
    """Two views of one directory (a namespaced `/` and the host's full path) share an identity,
    and two cgroups never do."""
    pod, namespaced = locate("v2_pod"), locate("v2_namespaced")
    assert pod.identity != namespaced.identity
    stat = os.stat(pod.directory)
    assert pod.identity.endswith(f":{stat.st_dev}:{stat.st_ino}")


def test_proc_cgroup_lines():
    assert parse_proc_cgroup("0::/a/b\n") == (None, "/a/b")
    assert parse_proc_cgroup("4:memory:/x\n3:cpu,cpuacct:/y\n0::/\n") == ("/x", "/")
    assert parse_proc_cgroup("5:cpuacct,memory:/p:with:colons\n") == ("/p:with:colons", None)
    assert parse_proc_cgroup("1:name=systemd:/\ngarbage\n") == (None, None)


def test_mountinfo_optional_fields_and_escapes():
    text = ("41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:4 master:1 - cgroup2 "
            "cgroup2 rw\n"
            "35 31 0:32 /a\\040b /mnt/my\\040cg rw - cgroup cgroup rw,memory\n"
            "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
            "short line\n")
    mounts = parse_mountinfo(text)
    assert [(m.root, m.mount_point, m.fs_type) for m in mounts] == [
        ("/", "/sys/fs/cgroup/unified", "cgroup2"), ("/a b", "/mnt/my cg", "cgroup")]
    assert "memory" in mounts[1].super_options
