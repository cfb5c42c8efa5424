"""How many cores the simulation's threads and the compile helpers use by default: those the
process may run on, fewer under a cgroup's CPU quota (cgroup trees written under tmp_path, and
one real cgroup where this machine lets us make one)."""

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from motrix_gym.sim import backend
from motrix_gym.sim.backend import cpu_quota, usable_cores


def tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


@pytest.mark.parametrize(("membership", "files", "quota"), [
    # cgroup v2 in a container with its own namespace: its cgroup is the mount
    ("0::/\n", {"cpu.max": "150000 100000\n"}, 1.5),
    ("0::/\n", {"cpu.max": "max 100000\n"}, None),
    # v2 on a host: the least over the process's cgroup and those above it
    ("0::/a/b\n", {"a/cpu.max": "50000 100000\n", "a/b/cpu.max": "max 100000\n"}, 0.5),
    ("0::/a/b\n", {"a/cpu.max": "400000 100000\n", "a/b/cpu.max": "300000 100000\n"}, 3.0),
    ("0::/a/b\n", {"c/cpu.max": "50000 100000\n"}, None),  # another cgroup's quota
    # v1 in a container without its own namespace: the host's path is not under the mount, which
    # is the container's cgroup; controllers mounted together, as Docker does
    ("12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n",
     {"cpu,cpuacct/cpu.cfs_quota_us": "200000\n", "cpu,cpuacct/cpu.cfs_period_us": "100000\n"}, 2.0),
    ("1:cpu:/q\n", {"cpu/q/cpu.cfs_quota_us": "-1\n", "cpu/q/cpu.cfs_period_us": "100000\n"}, None),
    ("1:cpu:/q\n", {"cpu/cpu.cfs_quota_us": "25000\n", "cpu/cpu.cfs_period_us": "50000\n"}, 0.5),
    # a v2 path above the namespace's root names nothing under the mount: the mount alone is read
    ("0::/../x\n", {"cpu.max": "100000 100000\n", "../x/cpu.max": "50000 100000\n"}, 1.0),
    # unreadable or malformed files set nothing
    ("0::/\n", {"cpu.max": "lots\n"}, None),
    ("0::/\n", {"cpu.max": "100000 0\n"}, None),
    ("garbage\n", {"cpu.max": "100000 100000\n"}, None),
])
def test_cpu_quota_is_the_least_a_cgroup_above_the_process_sets(membership, files, quota, tmp_path):
    root = tmp_path / "cgroup"
    root.mkdir()
    tree(root, files)
    (tmp_path / "self").write_text(membership)
    assert cpu_quota(root, tmp_path / "self") == quota


def test_without_cgroup_files_there_is_no_quota(tmp_path):
    assert cpu_quota(tmp_path, tmp_path / "missing") is None


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="Linux only")
@pytest.mark.parametrize(("quota", "cores"), [(None, None), (0.3, 1), (1.0, 1), (1.2, 2), (1000.0, None)])
def test_usable_cores_are_the_affinity_capped_by_the_quota_rounded_up(quota, cores, monkeypatch):
    affinity = len(os.sched_getaffinity(0))
    monkeypatch.setattr(backend, "cpu_quota", lambda: quota)
    assert usable_cores() == min(affinity, cores or affinity)


CGROUP_V1 = Path("/sys/fs/cgroup/cpu")


@pytest.mark.skipif(not os.access(CGROUP_V1 / "cgroup.procs", os.W_OK) or len(os.sched_getaffinity(0)) < 2,
                    reason="needs a writable cgroup v1 cpu hierarchy (root) and two cores")
def test_an_env_in_a_cgroup_with_one_cpu_of_quota_steps_on_one_thread():
    group = CGROUP_V1 / f"motrix-test-{uuid.uuid4().hex[:8]}"
    group.mkdir()
    try:
        (group / "cpu.cfs_period_us").write_text("100000")
        (group / "cpu.cfs_quota_us").write_text("100000")
        code = (f"import os; open({str(group / 'cgroup.procs')!r}, 'w').write(str(os.getpid())); "
                "import gymnasium as gym, motrix_gym; "
                "env = gym.make_vec('Motrix/Go1BallBalance-v0', num_envs=2, compile=False, progress=False); "
                "print(len(os.sched_getaffinity(0)), env.unwrapped.sim.nthread)")
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr
        affinity, nthread = map(int, run.stdout.split())
        assert affinity >= 2 and nthread == 1
    finally:
        group.rmdir()
