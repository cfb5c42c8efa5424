"""The live window: ``render_mode="human"`` and ``play --viewer``, on a real X server (Xvfb, started
here), with real key events (xdotool). Each window opens in a child process, as a user's does,
so that no GLFW state reaches the other tests' rendering."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from conftest import tiny
from motrix_gym.learn import steering
from motrix_gym.learn.play import play
from motrix_gym.learn.train import train

needs_x = pytest.mark.skipif(
    not (shutil.which("Xvfb") and shutil.which("xdotool") and shutil.which("xwd")),
    reason="needs an X server to open windows on and real key events: Xvfb, xdotool and xwd "
           "(Debian/Ubuntu: apt-get install xvfb xdotool x11-apps)")

CLI = [sys.executable, "-m", "motrix_gym"]
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def display():
    """A fresh Xvfb server of this module's own (a developer's desktop never gets these windows
    or keys): its display name."""
    read, write = os.pipe()
    server = subprocess.Popen(["Xvfb", "-displayfd", str(write), "-screen", "0", "1280x1024x24", "-nolisten", "tcp"],
                              pass_fds=(write,), stderr=subprocess.DEVNULL)
    os.close(write)
    with os.fdopen(read) as f:
        number = f.readline().strip()
    assert number, "Xvfb did not start"
    yield f":{number}"
    server.terminate()
    server.wait(10)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A Go1WalkFlat policy after one PPO iteration."""
    return train("Motrix/Go1WalkFlat-v0", iterations=1, log_dir=tmp_path_factory.mktemp("runs"), compile=False,
                 eval_lanes=0, progress=False, config=tiny("Go1WalkFlat")).checkpoint


def on(display: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("WAYLAND_DISPLAY", "MUJOCO_GL")}
    return {**env, "DISPLAY": display}


def xdotool(display: str, *args: str) -> str:
    return subprocess.run(["xdotool", *args], env=on(display), capture_output=True, text=True, timeout=60,
                          check=True).stdout


def screen_colours(display: str) -> int:
    """How many distinct colours the whole screen shows now (xwd's dump of the root window: a
    header of 25 big-endian 32-bit fields, the window's name, a colour map, then the rows)."""
    dump = subprocess.run(["xwd", "-root", "-silent"], env=on(display), capture_output=True, check=True,
                          timeout=60).stdout
    h = np.frombuffer(dump[:100], ">u4")
    header, width, height, ncolors = int(h[0]), int(h[4]), int(h[5]), int(h[19])
    size, per_line = int(h[11]) // 8, int(h[12])  # bytes per pixel, per row
    start = header + 12 * ncolors
    rows = np.frombuffer(dump[start:start + height * per_line], np.uint8).reshape(height, per_line)
    pixels = rows[:, :width * size].reshape(-1, size).astype(np.uint32)
    return len(np.unique(sum(pixels[:, k] << (8 * k) for k in range(size))))


def drawn(display: str, timeout: float = 20.0) -> bool:
    """Whether the screen shows a shaded scene (the robot and the floor: hundreds of colours, where
    an empty screen or window has a few) within ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while screen_colours(display) <= 500:
        if time.monotonic() > end:
            return False
        time.sleep(0.5)
    return True


HUMAN = """
import sys, time, mujoco, numpy as np, gymnasium as gym, motrix_gym
envs = gym.make_vec("Motrix/Go1WalkFlat-v0", num_envs=2, render_mode="human", compile=False, progress=False)
u = envs.unwrapped
envs.reset(seed=0)
assert u.viewer.running
t = time.perf_counter()
for i in range(60):
    envs.step(np.full((2, 12), 0.3 * np.sin(0.1 * i), np.float32))
    assert np.array_equal(u.viewer.data.qpos, u.sim.qpos[0].numpy().astype(np.float64)), i  # lane 0, drawn
print("seconds", time.perf_counter() - t, flush=True)
t = time.perf_counter()
for i in range(60):  # drawn again by render() after each step: the same state, no second wait
    envs.step(np.zeros((2, 12), np.float32))
    assert envs.render() is None
print("again", time.perf_counter() - t, flush=True)
sys.stdin.readline()  # the test looks at the screen meanwhile
cam = u.viewer.handle.cam  # the viewer's own tracking camera, on the robot's centre of mass (smoothed)
com = u.viewer.data.subtree_com[u.runtime.program.root.body].copy()
envs.close()
assert cam.type == mujoco.mjtCamera.mjCAMERA_TRACKING and cam.trackbodyid == u.runtime.program.root.body
assert np.abs(cam.lookat - com).max() < 0.01, (cam.lookat, com)
assert not u.viewer.running
env = gym.make("Motrix/Go1WalkFlat-v0", render_mode="human")
env.reset(seed=1)
for _ in range(10):
    env.step(env.action_space.sample() * 0)
assert env.render() is None and env.unwrapped.vec.viewer.running
env.close()
print("closed", flush=True)
"""


@needs_x
def test_human_mode_draws_lane_0_in_a_window_in_real_time(display):
    child = subprocess.Popen([sys.executable, "-c", HUMAN], env=on(display), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline()
        assert line.startswith("seconds"), child.stderr.read()[-3000:]
        paced = float(line.split()[1])
        assert paced >= 60 * 0.02 * 0.95  # 60 control steps of 20 ms, paced to real time
        again = child.stdout.readline()
        assert again.startswith("again"), child.stderr.read()[-3000:]
        assert 60 * 0.02 * 0.95 <= float(again.split()[1]) < 1.5 * paced  # not 2 periods a step
        assert xdotool(display, "search", "--onlyvisible", "--name", "MuJoCo").split()
        assert drawn(display)
        child.stdin.write("\n")
        child.stdin.flush()
        out, err = child.communicate(timeout=120)
    finally:
        child.kill()
    assert child.returncode == 0 and out.strip() == "closed", err[-3000:]
    assert subprocess.run(["xdotool", "search", "--onlyvisible", "--name", "MuJoCo"], env=on(display),
                          capture_output=True).returncode == 1  # no window left


def standing_go1s(lanes: int) -> str:
    """The start of a child script: ``lanes`` Go1s standing still (play mode, zero actions) with
    the window on, and the forces each lane feels from a drag (``applied``)."""
    return f"""
import mujoco, numpy as np, gymnasium as gym, motrix_gym
envs = gym.make_vec("Motrix/Go1WalkFlat-v0", num_envs={lanes}, render_mode="human", compile=False, progress=False,
                    mode="play", command=(0.0, 0.0, 0.0))
u = envs.unwrapped
applied = u.sim.batch.bind("xfrc_applied")
zero = np.zeros(({lanes}, 12), np.float32)
envs.reset(seed=0)
"""


DRAG = standing_go1s(2) + """
for _ in range(25):  # standing
    envs.step(zero)
m, d = u.viewer.model, u.viewer.data
normal, f = 0.0, np.zeros(6)
for i in range(d.ncon):  # the contacts the viewer shows (its C and F keys): the feet bear the weight
    mujoco.mj_contactForce(m, d, i, f)
    normal += f[0]
print("weight borne", normal / (9.81 * m.body_mass.sum()), flush=True)
start = u.sim.qpos[:, :2].numpy().copy()
print("ready", flush=True)
for _ in range(1000):  # until the test's double-click has selected a body (20 s at most)
    envs.step(zero)
    if u.viewer.handle.perturb.select > 0:
        print("selected", u.viewer.handle.perturb.select, flush=True)
        break
pull, apart = 0.0, 0.0
for _ in range(150):  # 3 s, while the test drags the robot
    envs.step(zero)
    assert not applied[1].any()
    pull = max(pull, float(np.linalg.norm(applied[0, :, :3], axis=1).max()))
    moved = u.sim.qpos[:, :2].numpy() - start
    apart = max(apart, float(np.linalg.norm(moved[0] - moved[1])))  # the two stand alike, unpulled
print("apart", apart, "pull", pull, "released", float(np.abs(applied).max()), flush=True)
envs.close()
"""


@needs_x
def test_a_body_dragged_with_the_mouse_pulls_lane_0_s_robot(display, tmp_path):
    """MuJoCo's perturbation, with real mouse events: a double-click selects the body under the
    cursor (the robot, which the camera follows), a drag with Ctrl and the right button pulls it:
    lane 0's robot is moved away from where lane 1's (not drawn, never pulled, standing alike)
    stands, and the pull ends with the drag. Before, standing, the contacts the window shows bear
    the robot's weight."""
    log = tmp_path / "drag.log"
    with open(log, "w") as f:
        child = subprocess.Popen([sys.executable, "-c", DRAG], env=on(display), stdout=f, stderr=subprocess.STDOUT,
                                 text=True)
    try:
        out = wait_for(log, "ready", child)
        borne = next(ln for ln in out.splitlines() if ln.startswith("weight borne"))
        assert float(borne.split()[-1]) == pytest.approx(1.0, abs=0.05)
        window = xdotool(display, "search", "--sync", "--onlyvisible", "--name", "MuJoCo").split()[0]
        xdotool(display, "windowfocus", "--sync", window)
        geometry = dict(ln.split("=") for ln in xdotool(display, "getwindowgeometry", "--shell", window).split())
        x, y = int(geometry["WIDTH"]) // 2, int(geometry["HEIGHT"]) // 2
        for _ in range(5):  # a double-click the viewer saw as two clicks (a busy machine) selects nothing
            xdotool(display, "mousemove", "--window", window, str(x), str(y), "click", "--repeat", "2", "--delay",
                    "80", "1")
            with contextlib.suppress(AssertionError):
                wait_for(log, "selected", child, timeout=3.0)
                break
        xdotool(display, "keydown", "ctrl", "mousedown", "3")
        for _ in range(10):
            xdotool(display, "mousemove_relative", "--", "40", "0")
            time.sleep(0.05)
        time.sleep(1.0)
        xdotool(display, "mouseup", "3", "keyup", "ctrl")
        child.wait(120)
    finally:
        child.kill()
    out = log.read_text()
    assert child.returncode == 0, out[-3000:]
    words = out.splitlines()[-1].split()
    assert words[0] == "apart", out[-3000:]
    apart, pull, released = (float(words[i]) for i in (1, 3, 5))
    assert pull > 20.0, out  # N
    assert apart > 0.15, out  # m
    assert released == 0.0, out


SHOWN = standing_go1s(3) + """
u.viewer_lane = 2
envs.step(zero)
assert np.array_equal(u.viewer.data.qpos, u.sim.qpos[2].numpy().astype(np.float64))  # lane 2, drawn
pert = u.viewer.handle.perturb  # a drag as the viewer's mouse sets it up: the trunk held 0.3 m ahead
with u.viewer.handle.lock():
    pert.select, pert.localmass = u.runtime.program.root.body, 5.0
    pert.refselpos[:] = u.viewer.data.xpos[pert.select] + [0.3, 0.0, 0.0]
    pert.active = int(mujoco.mjtPertBit.mjPERT_TRANSLATE)
envs.step(zero)
pulled = [bool(applied[k].any()) for k in range(3)]
with u.viewer.handle.lock():
    pert.active = 0
envs.step(zero)
released = [bool(applied[k].any()) for k in range(3)]
with u.viewer.handle.lock():
    pert.active = int(mujoco.mjtPertBit.mjPERT_TRANSLATE)
envs.step(zero)
again = [bool(applied[k].any()) for k in range(3)]
u.viewer_lane = 1  # another lane shown mid-drag: the drag ends, lane 2 is let go, lane 1 not pulled
envs.step(zero)
switched = [bool(applied[k].any()) for k in range(3)]
envs.step(zero)
after = [bool(applied[k].any()) for k in range(3)] + [pert.active]
print("pulled", pulled, "released", released, "again", again, "switched", switched, "after", after, flush=True)
envs.close()
"""


@needs_x
def test_the_window_shows_and_pulls_the_lane_chosen(display):
    run = subprocess.run([sys.executable, "-c", SHOWN], env=on(display), capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == ["pulled", "[False,", "False,", "True]", "released", "[False,", "False,", "False]",
                                  "again", "[False,", "False,", "True]", "switched", "[False,", "False,", "False]",
                                  "after", "[False,", "False,", "False,", "0]"]


RANKS = """
import os, sys, numpy as np, torch.distributed as dist, gymnasium as gym, motrix_gym
dist.init_process_group("gloo")
envs = gym.make_vec("Motrix/Go1WalkFlat-v0", num_envs=2, render_mode="human", distributed=True, compile=False,
                    progress=False)
envs.reset(seed=0)
for _ in range(5):
    envs.step(np.zeros((2, 12), np.float32))
u = envs.unwrapped
print(f"rank {dist.get_rank()} window {u.viewer is not None and u.viewer.running}", flush=True)
envs.close()
dist.destroy_process_group()
sys.stdout.flush()
os._exit(0)  # gloo's threads can abort an interpreter's exit
"""


@needs_x
def test_a_distributed_batch_opens_one_window_on_rank_0(display, tmp_path):
    script = tmp_path / "ranks.py"
    script.write_text(RANKS)
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                          str(script)], env=on(display), capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert sorted(ln for ln in run.stdout.splitlines() if ln.startswith("rank")) == ["rank 0 window True",
                                                                                      "rank 1 window False"]


def wait_for(path: Path, text: str, child: subprocess.Popen, timeout: float = 60.0) -> str:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        out = path.read_text()
        if text in out:
            return out
        assert child.poll() is None, f"play ended early:\n{out[-3000:]}"
        time.sleep(0.2)
    raise AssertionError(f"no {text!r} in:\n{path.read_text()[-3000:]}")


@contextlib.contextmanager
def in_window(argv: list[str], display: str, log: Path) -> Iterator[subprocess.Popen]:
    """``argv`` run with its output in ``log``, once its window is up and has the keyboard; then
    quit with Ctrl+Q, the viewer's own key, which ends it as closing the window does."""
    with open(log, "w") as f:
        child = subprocess.Popen(argv, env=on(display), stdout=f, stderr=subprocess.STDOUT, text=True)
    try:
        window = xdotool(display, "search", "--sync", "--onlyvisible", "--name", "MuJoCo").split()[0]
        xdotool(display, "windowfocus", "--sync", window)
        yield child
        xdotool(display, "key", "ctrl+q")
        child.wait(60)
    finally:
        child.kill()


@needs_x
def test_play_viewer_steers_the_command_from_the_keyboard(display, checkpoint, tmp_path):
    log = tmp_path / "play.log"
    with in_window([*CLI, "play", "Motrix/Go1WalkFlat-v0", "--checkpoint", str(checkpoint), "--viewer",
                    "--command", "0.5,0,0", "--lanes", "2"], display, log) as child:
        def press(*keys: str, then: str) -> str:
            xdotool(display, "key", "--delay", "50", *keys)
            return wait_for(log, then, child)

        press("Up", then="command: vx +0.60 m/s, vy +0.00 m/s, yaw rate +0.00 rad/s")
        # within the task's range of 1 m/s, however often the key is pressed
        press(*["Up"] * 6, then="command: vx +1.00 m/s, vy +0.00 m/s, yaw rate +0.00 rad/s")
        press("Down", "Page_Up", "Right", "Right",
              then="command: vx +0.90 m/s, vy +0.10 m/s, yaw rate -0.20 rad/s")
        press("minus", "minus", then="speed: 0.25 of real time")
        press(*["equal"] * 3, then="speed: 1 of real time")  # twice as fast, up to real time
        press("period", then="lane 1 of 2")
        press("period", then="lane 0 of 2")  # round to the first
        press("space", then="paused")
        press("space", "BackSpace", then="restart")
        out = press("Delete", then="command: vx +0.00 m/s, vy +0.00 m/s, yaw rate +0.00 rad/s")
        assert out.count("command: vx +1.00") == 3  # the fourth press reaches 1 m/s, the next two keep it
    out = log.read_text()
    assert child.returncode == 0, out[-3000:]
    assert "keys in the window: up/down: forward/backward" in out
    assert "steps x 2 lanes" in out and "base_velocity/lin_vel_error" in out


@needs_x
def test_the_deploy_example_shows_its_robot_and_steers_it(display, checkpoint, tmp_path):
    """examples/deploy_mujoco.py --viewer: the exported policy on a plain MuJoCo model, drawn with
    the task's meshes, its command steered from the keyboard."""
    exported = play("Motrix/Go1WalkFlat-v0", checkpoint, steps=1, export="onnx", progress=False).onnx
    log = tmp_path / "deploy.log"
    with in_window([sys.executable, str(ROOT / "examples" / "deploy_mujoco.py"), str(exported), "--viewer",
                    "--command", "0", "0", "0", "--seconds", "60"], display, log) as child:
        xdotool(display, "key", "--delay", "50", "Up", "Up", "Left")
        wait_for(log, "command: vx +0.20 m/s, vy +0.00 m/s, yaw rate +0.10 rad/s", child)
        assert drawn(display)
    out = log.read_text()
    assert child.returncode == 0, out[-3000:]
    assert "mean planar-velocity error" in out


@given(st.lists(st.sampled_from([*steering.KEYS, "delete", "space", "a"]), max_size=40),
       st.tuples(*[st.tuples(st.floats(-2, 0), st.floats(0, 2))] * 3))
@example(["up", "up", "down"], ((0.0, 0.1953125), (0.0, 0.0), (0.0, 0.0)))  # down from a range's end
def test_steering_moves_one_part_of_the_command_by_a_step_within_the_ranges(keys, ranges):
    command = (0.0, 0.0, 0.0)
    for key in keys:
        after = steering.steer(command, key, ranges)
        if key not in steering.KEYS and key != "delete":
            assert after is None
            continue
        moved = [i for i in range(3) if after[i] != command[i]]
        if key == "delete":
            assert after == (0.0, 0.0, 0.0)
        else:
            assert moved in ([], [steering.KEYS[key][0]])
            # a step, give or take the rounding to 1e-6 that makes ten presses of 0.1 exactly 1
            assert all(abs(after[i] - command[i]) <= steering.STEP + 1e-6 for i in moved)
        assert all(lo <= v <= hi for v, (lo, hi) in zip(after, ranges))
        command = after
    up = (0.0, 0.0, 0.0)
    for _ in range(10):
        up = steering.steer(up, "up", ((-1.0, 1.0),) * 3)
    assert up == (1.0, 0.0, 0.0)  # ten presses of 0.1 make 1 exactly


@given(st.lists(st.sampled_from(["minus", "equal", "space", "up"]), max_size=30))
def test_minus_and_equal_halve_and_double_the_speed_within_a_sixteenth_and_real_time(pressed):
    from motrix_gym.learn.play import SLOWEST, Keys

    keys = Keys((), (0.0, 0.0, 0.0))
    halvings = 0  # of real time: 0 to 4
    for key in pressed:
        keys.read([key])
        halvings = min(max(halvings + {"minus": 1, "equal": -1}.get(key, 0), 0), 4)
        assert keys.speed == 2.0 ** -halvings
    assert keys.read(["minus"] * 5) is False and keys.speed == SLOWEST == 1 / 16  # no restart; the slowest


@given(st.lists(st.sampled_from(["comma", "period", "up"]), max_size=30), st.integers(1, 5))
def test_comma_and_period_show_the_previous_and_next_lane_round_the_batch(pressed, lanes):
    from motrix_gym.learn.play import Keys

    keys = Keys((), (0.0, 0.0, 0.0), lanes)
    shown = 0
    for key in pressed:
        keys.read([key])
        shown += {"period": 1, "comma": -1}.get(key, 0)
        assert keys.lane == shown % lanes


@pytest.mark.parametrize("task, options, steers", [("Go1WalkFlat", {}, True),
                                                   ("Go1WalkFlat", {"heading_command": True}, False),
                                                   ("G1WbtDance", {}, False)])
def test_the_keys_help_offers_steering_only_where_a_command_can_be_held(task, options, steers):
    import gymnasium as gym

    from motrix_gym.learn.play import PLAIN_KEYS, Keys

    envs = gym.make_vec(f"Motrix/{task}-v0", num_envs=1, compile=False, progress=False, **options)
    keys = Keys(envs.unwrapped.runtime.ctx.commands.values(), (0.0, 0.0, 0.0))
    assert keys.help == (f"{steering.HELP}, {PLAIN_KEYS}" if steers else PLAIN_KEYS)
    if not steers:
        with pytest.raises(ValueError, match="the task has no velocity command that can be held"):
            Keys(envs.unwrapped.runtime.ctx.commands.values(), (0.5, 0.0, 0.0))
    envs.close()


def test_without_a_display_a_window_is_a_clear_error_and_nothing_runs(checkpoint, monkeypatch):
    import gymnasium as gym

    import motrix_gym  # noqa: F401
    from motrix_gym.sim.viewer import DisplayUnavailable

    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    with pytest.raises(DisplayUnavailable, match="neither DISPLAY nor WAYLAND_DISPLAY is set.*xvfb-run"):
        gym.make_vec("Motrix/Go1WalkFlat-v0", num_envs=2, render_mode="human")
    for display in ("", ":987"):  # none, and one where no server listens
        env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
        run = subprocess.run([*CLI, "play", "Motrix/Go1WalkFlat-v0", "--checkpoint", str(checkpoint),
                              "--viewer"], env={**env, **({"DISPLAY": display} if display else {})},
                             capture_output=True, text=True, timeout=300)
        errors = [ln for ln in run.stderr.splitlines() if ln.startswith("error")]
        assert run.returncode != 0 and len(errors) == 1, run.stderr[-3000:]
        assert ("GLFW cannot open windows on display ':987'" if display else "neither DISPLAY") in errors[0]
