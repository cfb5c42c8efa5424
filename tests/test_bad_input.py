"""Bad actions raise ValueError before any state changes; real dtypes are accepted and cast."""

import dataclasses
import os
import re
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch

from conftest import make, snapshot
from motrix_gym.envs import TASKS, ppo_config, task_config, task_name
from motrix_gym.manager.resolver import TaskConfigError
from motrix_gym.registry import check_id
from motrix_gym.vector_env import MotrixVectorEnv


def assert_same_state(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        x, y = (a[k].nan_to_num(), b[k].nan_to_num()) if a[k].is_floating_point() else (a[k], b[k])
        assert torch.equal(x, y), k


@pytest.mark.parametrize("bad", [
    np.zeros((4, 28), np.float32),
    np.zeros((3, 29), np.float32),
    np.zeros(29, np.float32),
    np.zeros((4, 29), dtype=object),
    np.full((4, 29), "a"),
    np.zeros((4, 29), np.complex64),
    np.zeros((4, 29), bool),
    np.where(np.eye(4, 29) > 0, np.nan, 0.0),
    np.where(np.eye(4, 29) > 0, np.inf, 0.0),
    torch.zeros(4, 29, dtype=torch.complex64),
    torch.full((4, 29), float("nan")),
    [[0.0] * 29] * 3,
])
def test_bad_actions_raise_and_change_nothing(env4, bad):
    before = snapshot(env4)
    with pytest.raises(ValueError):
        env4.step(bad)
    assert_same_state(before, snapshot(env4))


def test_step_after_error_equals_step_without_it(backend):
    a, b = make(4, backend=backend), make(4, backend=backend)
    a.reset(seed=0)
    b.reset(seed=0)
    act = np.random.default_rng(0).standard_normal((4, 29)).astype(np.float32)
    with pytest.raises(ValueError):
        a.step(np.full((4, 29), np.nan))
    ra, rb = a.step(act), b.step(act)
    for x, y in zip(ra[:4], rb[:4]):
        np.testing.assert_array_equal(x, y)
    a.close()
    b.close()


@pytest.mark.parametrize("convert", [
    lambda x: x.astype(np.float64),
    lambda x: torch.from_numpy(x),
    lambda x: torch.from_numpy(x).double(),
    lambda x: x.tolist(),
])
def test_real_dtypes_are_cast(convert):
    a, b = make(4), make(4)
    a.reset(seed=0)
    b.reset(seed=0)
    act = np.random.default_rng(1).standard_normal((4, 29)).astype(np.float32)
    ra, rb = a.step(act), b.step(convert(act))
    for x, y in zip(ra[:4], rb[:4]):
        np.testing.assert_array_equal(x, y)
    a.close()
    b.close()


def test_out_of_bound_actions_are_clipped_to_the_space():
    a, b = make(2), make(2)
    a.reset(seed=0)
    b.reset(seed=0)
    high = a.single_action_space.high
    big = np.full((2, 29), 1e6)
    ra, rb = a.step(big), b.step(np.broadcast_to(high, (2, 29)))
    np.testing.assert_array_equal(ra[0], rb[0])
    a.close()
    b.close()


def test_bad_make_kwargs():
    with pytest.raises(ValueError, match="num_envs"):
        make(0)
    with pytest.raises(ValueError, match="output"):
        make(2, output="jax")
    with pytest.raises(ValueError, match="autoreset_mode"):
        make(2, autoreset_mode="sometimes")
    with pytest.raises(ValueError, match="render_mode must be None, 'rgb_array' or 'human', got 'rgb'"):
        make(2, render_mode="rgb")
    for size in ({"width": 800}, {"height": 600}):  # before a display is looked for
        with pytest.raises(ValueError, match="width and height size render_mode='rgb_array' frames; the 'human'"):
            make(2, render_mode="human", **size)
    for size in ({"width": 0}, {"height": 9000}, {"width": 2.5}):
        with pytest.raises(ValueError, match="width and height must be ints in"):
            make(2, render_mode="rgb_array", **size)
    with pytest.raises(ValueError, match="obs_groups"):
        make(2, obs_groups=("policy", "privileged"))
    for flag, bad in (("copy", "no"), ("compile", 1), ("progress", None), ("current_kinematics", 0.0),
                      ("distributed", "false")):
        with pytest.raises(ValueError, match=rf"^{flag} must be a bool \(True or False\), got {re.escape(repr(bad))}$"):
            make(2, **{flag: bad})
    for bad in (0, 2.0, True, "2"):
        with pytest.raises(ValueError, match="compile_processes must be an int >= 1"):
            make(2, compile_processes=bad)
    with pytest.raises(ValueError, match="a group is named twice"):
        make(2, obs_groups=("policy", "policy"))
    with pytest.raises(ValueError, match=r"obs_groups \[\]: names no group; task '\w+' has \['critic', 'policy'\]"):
        make(2, obs_groups=())
    # a task of one's own without the group the policy reads: the task is named at fault, not obs_groups
    task = task_config("G1WalkFlat")
    renamed = dataclasses.replace(task, observations={"actor" if g == "policy" else g: terms
                                                      for g, terms in task.observations.items()})
    with pytest.raises(TaskConfigError, match=r"^task 'G1WalkFlat': observation group 'policy' is required \(the "
                                              r"policy reads it; the task has \['actor', 'critic'\]\)$"):
        MotrixVectorEnv(renamed, 2, compile=False, progress=False)
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="nthread must be None or an int >= 1"):
            make(2, nthread=bad)
    for bad in (True, 1.0, -1):
        with pytest.raises(ValueError, match="lane_offset must be an int >= 0"):
            make(2, lane_offset=bad)
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        make(2, colour="red")
    with pytest.raises(TypeError, match="unexpected keyword argument 'frame_skip'"):  # Gymnasium MuJoCo's
        make(2, frame_skip=5)


@pytest.mark.parametrize("task", sorted(TASKS))
def test_unknown_task_option_names_the_task_and_its_options(task):
    # another family's option is refused before anything is built, naming the task and what it takes
    foreign = "sampling" if "Walk" in task else "command"
    with pytest.raises(TypeError, match=rf"Motrix/{task}-v0 got an unexpected keyword argument '{foreign}' "
                                        r"\(its task options: \[.*'mode'.*\]"):
        task_config(task, **{foreign: None})


def test_task_config_takes_a_task_by_name_or_by_id():
    assert task_config("Motrix/Go1WalkFlat-v0", mode="play") == task_config("Go1WalkFlat", mode="play")


@pytest.mark.parametrize("bad", ["G1Walk", "Motrix/G1WalkFlat-v1", "motrix/g1walkflat-v0", None, 3, ["G1WalkFlat"]])
def test_every_entry_point_refuses_an_unknown_task_in_the_same_words(bad):
    said = (rf"^unknown task {re.escape(repr(bad))}; registered: G1WbtDance, .*, Go1BallBalance, "
            r"each as Motrix/<name>-v0$")
    for call in (check_id, task_name, ppo_config, task_config, lambda t: MotrixVectorEnv(t, 2, compile=False)):
        with pytest.raises(ValueError, match=said):
            call(bad)


def test_single_lane_env_refuses_lane_count_and_autoreset_mode():
    with pytest.raises(TypeError, match="'num_envs' is not an option of the single-lane env.*make_vec"):
        gym.make("Motrix/Go1WalkFlat-v0", num_envs=2)
    with pytest.raises(TypeError, match="'autoreset_mode' is not an option of the single-lane env"):
        gym.make("Motrix/Go1WalkFlat-v0", autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP)


def test_bad_seed():
    env = make(2)
    for bad in (-1, 1.5, [1, 2], "7", True):
        with pytest.raises(ValueError, match="seed"):
            env.reset(seed=bad)
    env.close()


def test_unknown_reset_option():
    env = make(2)
    with pytest.raises(ValueError, match="reset option"):
        env.reset(options={"mask": np.ones(2, bool)})
    env.close()


def test_bfloat16_actions_are_cast_like_their_float32_values():
    a, b = make(2), make(2)
    a.reset(seed=0)
    b.reset(seed=0)
    act = torch.randn(2, 29, generator=torch.Generator().manual_seed(2)).bfloat16()
    ra, rb = a.step(act), b.step(act.float().numpy())
    for x, y in zip(ra[:4], rb[:4]):
        np.testing.assert_array_equal(x, y)
    a.close()
    b.close()


@pytest.mark.parametrize("huge", [np.full((2, 29), 1e300), torch.full((2, 29), -1e300, dtype=torch.float64)])
def test_finite_actions_beyond_float32_are_clipped_not_refused(huge):
    """A finite float64 beyond float32's range is an out-of-bound action like any other."""
    a, b = make(2), make(2)
    a.reset(seed=0)
    b.reset(seed=0)
    bound = a.single_action_space.high if float(huge[0, 0]) > 0 else a.single_action_space.low
    ra, rb = a.step(huge), b.step(np.broadcast_to(bound, (2, 29)))
    np.testing.assert_array_equal(ra[0], rb[0])
    a.close()
    b.close()


@pytest.mark.parametrize("argv, option", [
    (["run", "G1WalkFlat", "--num-envs", "0"], "--num-envs: must be >= 1, got 0"),
    (["run", "G1WalkFlat", "--num-envs", "2.5"], "--num-envs: expected an integer, got '2.5'"),
    (["run", "G1WalkFlat", "--steps", "0"], "--steps: must be >= 1"),
    (["run", "G1WalkFlat", "--seed", "-1"], "--seed: must be in [0, 18446744073709551615]"),
    (["run", "G1WalkFlat", "--action-std", "-0.5"], "--action-std: must be a finite number >= 0"),
    (["run", "G1WalkFlat", "--action-std", "nan"], "--action-std: must be a finite number >= 0"),
    (["render", "G1WalkFlat", "--out", "OUT", "--every", "0"], "--every: must be >= 1"),
    (["render", "G1WalkFlat", "--out", "walk.png"], "--out: 'walk.png' does not end in one of ('.gif', '.mp4')"),
    (["play", "G1WalkFlat", "--out", "MISSING/walk.mp4"], "--out: 'MISSING/walk.mp4': folder 'MISSING' does not exist"),
    (["train", "G1WalkFlat", "--minutes", "0"], "--minutes: must be a finite number > 0"),
    (["train", "G1WalkFlat", "--minutes", "inf"], "--minutes: must be a finite number > 0"),
    (["train", "G1WalkFlat", "--eval-lanes", "-1"], "--eval-lanes: must be >= 0"),
    (["train", "G1WalkFlat", "--video", "--video-length", "0"], "--video-length: must be >= 1, got 0"),
    (["train", "G1WalkFlat", "--video-length", "50"], "--video-length: the length of the videos, which only --video"),
    (["play", "G1WalkFlat", "--checkpoint", "c.pt", "--width", "9000"], "--width: must be in [1, 8192]"),
    (["play", "G1WalkFlat", "--every", "3"], "--every: shapes the video, which only --out writes"),
    (["play", "G1WalkFlat", "--viewer", "--height", "200"], "--height: shapes the video, which only --out writes"),
    (["play", "G1WalkFlat", "--no-markers"], "--markers/--no-markers: markers are drawn in the video or the window"),
    (["bench", "G1WalkFlat", "--repeats", "0"], "--repeats: must be >= 1"),
    (["bench", "G1WalkFlat", "--startup-repeats", "3"], "--startup-repeats: rounds of the start-up timings, which"),
    (["bench", "G1WalkFlat", "--num-envs", "8", "-3"], "--num-envs: must be >= 1, got -3"),
    (["bench", "G1WalkFlat", "--json", "MISSING/rows.json"], "--json: 'MISSING/rows.json': folder 'MISSING' does not"),
    (["bench", "G1WalkFlat", "--json", "rows.txt"], "--json: 'rows.txt' does not end in one of ('.json',)"),
    (["run", "G1WalkFlat", "--device", "tpu"], "--device: expected cpu, cuda or cuda:N, got 'tpu'"),
    (["train", "G1WalkFlat", "--device", "cuda:99"], "--device: cuda:99 is not available here"),
    (["train", "G1WalkFlat", "--ppo", "gamma=2"], "--ppo: PpoConfig.gamma must be a finite number in (0, 1]"),
    (["train", "G1WalkFlat", "--ppo", "lr=1e-3"], "--ppo: expected NAME=VALUE with NAME one of"),
    (["train", "G1WalkFlat", "--num-envs", "8", "--ppo", "num_envs=16"], "--ppo: ['num_envs'] given twice"),
    (["train", "G1WalkFlat", "--task-option", "curriculum"], "--task-option: expected NAME=VALUE with NAME a task"),
    (["train", "G1WalkFlat", "--task-option", "command=0,nan,0"], "--task-option: command: expected finite numbers"),
    (["train", "G1WalkFlat", "--task-option", "speed=2"], "--task-option: Motrix/G1WalkFlat-v0 got an unexpected "
                                                          "keyword argument 'speed' (its task options: ['command', "),
    (["train", "G1WalkFlat", "--task-option", "command=1,0"],
     "--task-option: G1WalkFlat: command must be (vx, vy, yaw_rate), three finite numbers, got (1.0, 0.0)"),
    (["train", "G1WbtMix", "--task-option", "sampling=start", "--task-option", "sampling=uniform"],
     "--task-option: ['sampling'] given twice"),
    (["train", "G1WalkFlat", "--command-curriculum", "--task-option", "command_curriculum=false"],
     "--task-option: ['command_curriculum'] given twice (--command-curriculum sets command_curriculum)"),
])
def test_bad_command_line_numbers_are_argparse_errors(argv, option, tmp_path, capsys):
    """Named in one line, before anything runs or is written (argparse exits with 2)."""
    from motrix_gym.__main__ import main

    argv = [str(tmp_path / "out.gif") if a == "OUT" else a.replace("MISSING", str(tmp_path / "missing")) for a in argv]
    option = option.replace("MISSING", str(tmp_path / "missing"))
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    assert f"error: argument {option}" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("command", [["run"], ["render", "--out", "OUT"], ["train"], ["play"], ["bench"]])
@pytest.mark.parametrize("task", ["Nope", "Motrix/Nope-v0", "Motrix/G1WalkFlat-v1", "Motrix/G1WalkFlat", "g1walkflat"])
def test_an_unknown_task_id_is_an_argparse_error_of_every_command(command, task, tmp_path, capsys):
    from motrix_gym.__main__ import main

    argv = [command[0], task, *(str(tmp_path / "out.gif") if a == "OUT" else a for a in command[1:])]
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"error: argument env_id: unknown task {task!r}; registered: G1WbtDance, " in err
    assert "Traceback" not in err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("argv", [["run", "Go1WalkFlat", "--backend", "warp", "--num-envs", "2", "--steps", "1"],
                                  ["bench", "Go1WalkFlat", "--backend", "warp", "--num-envs", "2"]])
def test_the_warp_backend_without_its_packages_is_a_one_line_error(argv):
    # the packages made unimportable, as on a machine where the extra was not installed
    code = ("import sys; sys.modules['warp'] = sys.modules['mujoco_warp'] = None; "
            f"from motrix_gym.__main__ import main; sys.exit(main({argv + ['--no-compile']!r}))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 2, run.stderr
    assert run.stderr.strip().splitlines()[-1] == ("error: backend='warp' needs mujoco-warp and warp-lang: "
                                                   'pip install -e ".[warp]"')
    assert "Traceback" not in run.stderr


NO_HEADERS = ("import sysconfig; get_path = sysconfig.get_path; sysconfig.get_path = lambda name, *a, **k: "
              "'/nonexistent/include' if name == 'include' else get_path(name, *a, **k); ")


@pytest.mark.parametrize(("cxx", "prelude", "message"), [
    ("/nonexistent/g++", "", "compile=True builds the runtime's kernels with a C++ compiler (torch.compile's "
     "Inductor), and none works on this machine (tried /nonexistent/g++; the CXX environment variable names "
     "another). Install one (Debian/Ubuntu: apt-get install g++)"),
    ("g++", NO_HEADERS, "compile=True builds the runtime's kernels as C++ that includes Python's headers, and this "
     "interpreter's are missing (no Python.h in /nonexistent/include). Install them (Debian/Ubuntu: apt-get install "
     f"python{sys.version_info.major}.{sys.version_info.minor}-dev)"),
])
def test_compiling_without_a_cpp_compiler_or_pythons_headers_is_a_one_line_error(cxx, prelude, message, tmp_path):
    # an empty cache, so that the graphs must be compiled, on a machine without a compiler or without
    # the interpreter's headers (its include folder made to point nowhere)
    env = {**os.environ, "CXX": cxx, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path)}

    def run(*flags: str) -> subprocess.CompletedProcess:
        argv = ["run", "Go1BallBalance", "--num-envs", "2", "--steps", "1", *flags]
        code = f"{prelude}import sys; from motrix_gym.__main__ import main; sys.exit(main({argv!r}))"
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)

    compiled = run()
    assert compiled.returncode == 2, compiled.stderr
    assert compiled.stderr.strip().splitlines()[-1] == f"error: {message}, or run eagerly: compile=False (--no-compile)"
    assert "Traceback" not in compiled.stderr
    assert not [f for f in tmp_path.rglob("*") if f.is_file() and f.suffix in (".so", ".cpp", ".pt2")]
    eager = run("--no-compile")
    assert eager.returncode == 0, eager.stderr


@pytest.mark.parametrize(("argv", "message"), [(["bench"], "give a task id or --all"),
                                               (["bench", "G1WalkFlat", "--all"], "give a task id or --all, not both")])
def test_bench_runs_one_task_or_all(argv, message, capsys):
    from motrix_gym.__main__ import main

    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    assert capsys.readouterr().err.strip().endswith(f"error: {message}")


@pytest.mark.parametrize("task", ["Motrix/Go1WalkFlat-v0", "Go1WalkFlat"])
def test_a_task_is_named_by_its_id_or_its_name(task):
    from motrix_gym.arguments import task_id

    assert task_id(task) == "Motrix/Go1WalkFlat-v0"
