"""Two ranks of 4 lanes over gloo run what one process of 8 lanes runs, bit for bit, across
episode boundaries, with the statistics the lanes share (the adaptive sampler, the terrain
curriculum, the log) summed over the ranks; broken setups fail on every rank. In a cold start
the ranks share out the graphs to compile."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import needs_gl

WORKER = str(Path(__file__).with_name("distributed_worker.py"))


def ranks(task: str, lanes: list[int], out: Path, mode: str = "eager",
          env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``len(lanes)`` ranks under torchrun; rank r asks for ``lanes[r]`` lanes."""
    if len(set(lanes)) == 1:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={len(lanes)}",
               WORKER, task, str(lanes[0]), str(out), mode]
    else:  # a different lane count per rank: the worker reads it from its rank
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={len(lanes)}",
               "--no-python", "sh", "-c", f'exec {sys.executable} {WORKER} {task} $(( {lanes[0]} + RANK * '
               f'{lanes[1] - lanes[0]} )) {out} {mode}']
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run


@pytest.mark.parametrize("task", ["G1WbtDance", "G1WalkRough", "G1WalkFlat"])
def test_two_ranks_equal_one_process(task, tmp_path):
    ranks(task, [4, 4], tmp_path)
    subprocess.run([sys.executable, WORKER, task, "8", str(tmp_path)], check=True, timeout=600)
    one = np.load(tmp_path / "single.npz")
    parts = [np.load(tmp_path / f"rank{r}.npz") for r in (0, 1)]
    for key in ("obs", "rew", "term", "trunc"):
        np.testing.assert_array_equal(np.concatenate([p[key] for p in parts], axis=1), one[key], err_msg=key)
    ended = one["term"] | one["trunc"]
    assert ended[:, :4].any() and ended[:, 4:].any()  # both halves crossed episode boundaries
    if task == "G1WbtDance":  # the sampler learned from failures on both ranks, as one process would
        assert not np.allclose(one["probs"], one["probs"][0])
        for p in parts:
            np.testing.assert_array_equal(p["probs"], one["probs"])
    single, rank0 = json.loads(str(one["log"])), json.loads(str(parts[0]["log"]))
    assert set(single) == set(rank0)
    for k, v in single.items():  # rank 0 logs the whole run
        assert rank0[k] == pytest.approx(v, rel=1e-5, abs=1e-6), k
    if task == "G1WalkRough":
        assert "Curriculum/terrain_level" in rank0


def test_a_cold_start_shares_the_graphs_over_the_ranks(tmp_path):
    """Compiled, in an empty cache: rank 0 compiles the step graph, rank 1 the others, each loads
    the rest from the store, and the two ranks still run what one process runs, bit for bit."""
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")}
    ranks("G1WalkFlat", [4, 4], tmp_path, "compile", env)
    parts = [np.load(tmp_path / f"rank{r}.npz") for r in (0, 1)]
    assert json.loads(str(parts[0]["loaded"])) == {"step[policy]": False, "reset": True, "observe[policy]": True}
    assert json.loads(str(parts[1]["loaded"])) == {"step[policy]": True, "reset": False, "observe[policy]": False}
    assert len(list((tmp_path / "cache" / "motrix_gym_graphs").glob("*.graph"))) == 3  # each compiled once
    subprocess.run([sys.executable, WORKER, "G1WalkFlat", "8", str(tmp_path), "compile"], check=True, timeout=600,
                   env=env)
    one = np.load(tmp_path / "single.npz")
    assert all(json.loads(str(one["loaded"])).values())
    for key in ("obs", "rew", "term", "trunc"):
        np.testing.assert_array_equal(np.concatenate([p[key] for p in parts], axis=1), one[key], err_msg=key)
    assert (one["term"] | one["trunc"]).any()


@pytest.mark.slow
def test_a_rank_with_a_store_of_its_own_compiles_alone_while_the_others_share(tmp_path):
    """Three ranks; rank 2 has another cache folder (as on another machine): ranks 0 and 1 share
    their graphs, rank 2 compiles all of its own, all three end the sharing together, and the
    run equals one process of the same lanes."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=3", "--no-python",
           "sh", "-c", f'TORCHINDUCTOR_CACHE_DIR={tmp_path}/cache$(( RANK / 2 )) exec {sys.executable} {WORKER} '
           f'G1WalkFlat 2 {tmp_path} compile']
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    parts = [np.load(tmp_path / f"rank{r}.npz") for r in (0, 1, 2)]
    loaded = [json.loads(str(p["loaded"])) for p in parts]
    assert loaded[0] == {"step[policy]": False, "reset": True, "observe[policy]": True}
    assert loaded[1] == {"step[policy]": True, "reset": False, "observe[policy]": False}
    assert not any(loaded[2].values())
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache0")}
    subprocess.run([sys.executable, WORKER, "G1WalkFlat", "6", str(tmp_path), "compile"], check=True, timeout=600,
                   env=env)
    one = np.load(tmp_path / "single.npz")
    for key in ("obs", "rew", "term", "trunc"):
        np.testing.assert_array_equal(np.concatenate([p[key] for p in parts], axis=1), one[key], err_msg=key)


def test_a_rank_that_fails_to_compile_its_share_fails_every_rank(tmp_path):
    """Rank 0's share (the step graph) cannot be compiled: rank 0 fails and says so, and rank 1,
    instead of waiting for that graph, compiles it itself and meets the same error."""
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")}
    run = ranks("G1WalkFlat", [4, 4], tmp_path, "compile-break", env)
    errors = [(tmp_path / f"rank{r}.error").read_text() for r in (0, 1)]
    assert all("graph_break" in e for e in errors), errors
    assert "rank(s) [0] failed to compile graphs ['step[policy]']; they are compiled here" in run.stderr


def test_mismatched_lane_counts_fail_on_every_rank(tmp_path):
    ranks("G1WalkFlat", [4, 6], tmp_path)
    for r in (0, 1):
        msg = (tmp_path / f"rank{r}.error").read_text()
        assert "every rank needs the same num_envs" in msg and "[4, 6]" in msg


def test_distributed_without_a_process_group_is_refused():
    from motrix_gym.vector_env import MotrixVectorEnv

    with pytest.raises(RuntimeError, match="init_process_group"):
        MotrixVectorEnv("G1WalkFlat", 4, compile=False, distributed=True)
    with pytest.raises(ValueError, match="SAME_STEP"):
        MotrixVectorEnv("G1WalkFlat", 4, compile=False, distributed=True, autoreset_mode="NextStep")


def test_a_process_group_without_a_cpu_backend_is_refused(tmp_path):
    """Ranks exchange CPU tensors; a group with a backend for CUDA alone (``init_process_group("nccl")``)
    is refused with a clear error before any collective, not with torch's error in one."""
    import torch.distributed as dist

    from motrix_gym.vector_env import MotrixVectorEnv

    dist.init_process_group("cuda:gloo", init_method=f"file://{tmp_path / 'group'}", rank=0, world_size=1)
    try:
        with pytest.raises(RuntimeError, match=r"no backend for the CPU \('cuda:gloo'\).*'cpu:gloo,cuda:nccl'"):
            MotrixVectorEnv("G1WalkFlat", 4, compile=False, distributed=True)
    finally:
        dist.destroy_process_group()


def test_distributed_training_runs_and_rank0_sees_every_episode(tmp_path):
    """The README's command with a small budget: both ranks train, rank 0's figures count the
    episodes of every rank."""
    import re

    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                          "-m", "motrix_gym", "train", "Motrix/G1WalkFlat-v0", "--num-envs", "8", "--iterations", "3",
                          "--distributed", "--no-compile", "--eval-lanes", "0", "--log-dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    per_rank = [int(n) for n in re.findall(r"rank \d: (\d+) episodes ended", run.stdout)]
    total = int(re.search(r"env steps over 2 ranks \((\d+) episodes\)", run.stdout).group(1))
    assert len(per_rank) == 2 and total == sum(per_rank) > 0
    assert list(tmp_path.glob("G1WalkFlat/*/model_2.pt"))  # rank 0 saved the run
    assert run.stdout.count("run directory") == 1  # and alone reported it


@needs_gl
def test_distributed_training_records_its_checkpoints_on_rank0(tmp_path):
    """Rank 0 watches each checkpoint alone, in a process that torchrun started as a rank."""
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                          "-m", "motrix_gym", "train", "Motrix/Go1WalkFlat-v0", "--num-envs", "8", "--iterations", "2",
                          "--distributed", "--no-compile", "--eval-lanes", "0", "--log-dir", str(tmp_path),
                          "--video", "--video-length", "4", "--ppo", "save_interval=1"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.glob("Go1WalkFlat/*/videos/*")) == ["model_0.mp4", "model_1.mp4"]


def test_distributed_training_outside_torchrun_is_an_argparse_error(tmp_path, capsys):
    from motrix_gym.__main__ import main

    with pytest.raises(SystemExit) as e:
        main(["train", "G1WalkFlat", "--distributed", "--iterations", "1", "--log-dir", str(tmp_path)])
    assert e.value.code == 2 and "argument --distributed: start the ranks with torchrun" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
