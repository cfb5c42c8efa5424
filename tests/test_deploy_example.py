"""examples/deploy_mujoco.py: an exported policy run by a controller of its own on a plain
MuJoCo model, from the file's metadata alone, observes and acts as the env's policy does."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import mujoco
import numpy as np
import onnx
import pytest
import torch

from conftest import tiny
from motrix_gym.integrations.rsl_rl import make_rsl_rl
from motrix_gym.learn.onnx_policy import OnnxPolicy
from motrix_gym.learn.play import play
from motrix_gym.learn.train import train
from motrix_gym.registry import env_id

GO1 = env_id("Go1WalkFlat")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def deploy():
    spec = importlib.util.spec_from_file_location("deploy_mujoco", ROOT / "examples" / "deploy_mujoco.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def policies(tmp_path_factory):
    """A task's policy after one PPO iteration, exported (made once per task)."""
    files = {}

    def policy_file(task: str) -> Path:
        if task not in files:
            res = train(env_id(task), iterations=1, log_dir=tmp_path_factory.mktemp(task), compile=False,
                        eval_lanes=0, progress=False, config=tiny(task))
            files[task] = play(env_id(task), res.checkpoint, steps=1, export="onnx", progress=False).onnx
        return files[task]

    return policy_file


@pytest.fixture
def exported(policies):
    return policies("Go1WalkFlat")


@pytest.mark.parametrize("task", ["Go1WalkFlat", "G1WalkFlat", "G1WalkRough", "Go1WalkStairs"])
def test_the_controller_observes_and_moves_as_the_env_s_policy_does(deploy, policies, task):
    """From the env's reset state, step after step (G1: with its gait clock; Go1 on stairs: with
    a height scan, the robot set off the tile's centre so that it sees steps)."""
    exported, command = policies(task), (0.5, -0.2, 0.3)
    scan = task == "Go1WalkStairs"
    off_centre = {"overrides": {"resets.default_pose.params.xy_noise": 1.0}} if scan else {}
    env = make_rsl_rl(env_id(task), num_envs=1, compile=False, progress=False, mode="play", command=command,
                      **off_centre)
    policy = OnnxPolicy(exported)
    model = deploy.task_model(env_id(task))
    data = mujoco.MjData(model)
    controller = deploy.Controller(exported, model)
    data.qpos[:] = env.env.sim.qpos[0].numpy()  # the env's reset state
    data.qvel[:] = env.env.sim.qvel[0].numpy()
    mujoco.mj_forward(model, data)
    obs = env.get_observations()
    if scan:
        cols = env.env.runtime.observation_columns("policy")["height_scan"]
        heights = obs["policy"][0, cols].numpy()
        assert heights.max() - heights.min() > 0.05  # steps in view
    gaps = []
    for _ in range(50):
        controller.step(model, data, np.array(command))
        np.testing.assert_allclose(controller.obs[0], obs["policy"][0].numpy(), rtol=0, atol=1e-5)
        with torch.inference_mode():
            obs, _, dones, _ = env.step(policy(obs))
        if dones.any():  # the env's robot fell (a policy of one iteration) and its lane restarted
            break
        gaps.append(np.abs(data.qpos - env.env.sim.qpos[0].numpy()).max())
    assert len(gaps) >= 25 and max(gaps) < 1e-5, gaps  # float32 observations rounded otherwise than torch rounds them
    # the joints moved: the comparison is not of two robots standing still
    assert np.abs(data.qpos[controller.qpos_adr] - controller.default).max() > 0.01
    env.close()


def _changed(path: Path, to: Path, **values: str | None) -> Path:
    """A copy of the exported file ``path`` with metadata ``values`` changed (None: removed)."""
    proto = onnx.load(path)
    kept = [(e.key, values.get(e.key, e.value)) for e in proto.metadata_props]
    del proto.metadata_props[:]
    for key, value in kept:
        if value is not None:
            entry = proto.metadata_props.add()
            entry.key, entry.value = key, value
    onnx.save(proto, to)
    return to


def test_the_controller_refuses_what_it_cannot_build(deploy, policies, tmp_path):
    go1, g1 = policies("Go1WalkFlat"), policies("G1WalkFlat")
    functions = {p.key: p.value for p in onnx.load(go1).metadata_props}["observation_functions"]
    scan = _changed(go1, tmp_path / "scan.onnx",
                    observation_functions=functions.replace("mdp.observations.command", "mdp.ball.ball_pos_b"))
    with pytest.raises(ValueError, match=r"cannot build the observation terms \['command \(motrix_gym.mdp."
                                         r"ball.ball_pos_b\)'\]"):
        deploy.Controller(scan, deploy.task_model(GO1))
    params = json.loads({p.key: p.value for p in onnx.load(go1).metadata_props}["observation_params"])
    params[3] = {"joints": ["FR_.*"]}  # joint_pos
    legs = _changed(go1, tmp_path / "legs.onnx", observation_params=json.dumps(params))
    with pytest.raises(ValueError, match=r"observation term 'joint_pos' reads joints \['FR_\.\*'\], not the action's"):
        deploy.Controller(legs, deploy.task_model(GO1))
    clockless = _changed(g1, tmp_path / "clockless.onnx", gait_period=None)
    with pytest.raises(ValueError, match=r"observes a gait clock, but the file does not say its period"):
        deploy.Controller(clockless, deploy.task_model(env_id("G1WalkFlat")))


def test_the_example_runs_from_the_command_line_on_the_task_s_model_or_a_changed_copy(deploy, exported, tmp_path):
    def example(*args: str) -> str:
        run = subprocess.run([sys.executable, "examples/deploy_mujoco.py", str(exported), *args],
                             capture_output=True, text=True, cwd=ROOT)
        assert run.returncode == 0, run.stderr
        return run.stdout

    assert example("--seconds", "1").startswith("1.00 s: mean planar-velocity error ")
    assert example("--seconds", "0.01").startswith("no control period ran")  # under Go1's 20 ms
    for bad in (["--seconds", "0"], ["--seconds", "nan"], ["--command", "0", "inf", "0"]):
        run = subprocess.run([sys.executable, "examples/deploy_mujoco.py", str(exported), *bad], capture_output=True,
                             text=True, cwd=ROOT)
        assert run.returncode == 2 and "--seconds must be a finite number > 0 and --command" in run.stderr, bad
    saved = tmp_path / "elsewhere" / "go1.xml"
    saved.parent.mkdir()
    assert example("--save-model", str(saved)) == ""
    text = saved.read_text()
    assert '<option timestep="0.005"' in text
    changed = text.replace('<option timestep="0.005"', '<option timestep="0.002" integrator="implicitfast"')
    saved.write_text(changed.replace('<geom name="terrain"', '<geom name="floor"'))  # a ground by another name
    model = mujoco.MjModel.from_xml_path(str(saved))  # its meshes found from another folder
    assert deploy.Controller(exported, model).ground == model.geom("floor").id
    own = deploy.task_model(GO1)
    assert (model.nbody, model.njnt, model.nu, model.opt.timestep) == (own.nbody, own.njnt, own.nu, 0.002)
    assert deploy.Controller(exported, model).substeps == 10
    assert example("--model", str(saved), "--seconds", "1").startswith("1.00 s: mean planar-velocity error ")


def test_on_terrain_the_robot_starts_on_a_tile_s_platform(deploy, policies):
    """Go1 on stairs: the feet rest level on the platform of the tile asked for (by default the
    easiest); tiles off the grid, and tiles of flat ground, are refused by the command line."""
    stairs = env_id("Go1WalkStairs")
    model = deploy.task_model(stairs)
    data = mujoco.MjData(model)
    c = deploy.Controller(policies("Go1WalkStairs"), model)
    feet = [model.geom(f"{leg}_foot_collision").id for leg in ("FL", "FR", "RL", "RR")]

    def under_feet(at: tuple[float, float]) -> np.ndarray:
        deploy.stand(model, data, c, at=at)
        assert np.allclose(data.qpos[c.root_qpos:c.root_qpos + 2], at)
        return np.array([deploy.ground_height(model, data, c.ground, *data.geom_xpos[g, :2]) for g in feet])

    for tile in (None, (0, 5), (9, 0), (9, 5)):  # stairs up (columns 0-4) and down, easiest and hardest
        ground = under_feet(deploy.spawn_point(stairs, tile))
        assert np.ptp(ground) < 1e-6, (tile, ground)
    centres = [deploy.spawn_point(stairs, (r, k)) for r in range(10) for k in range(10)]
    assert len(set(centres)) == 100 and deploy.spawn_point(stairs) == centres[0]
    assert deploy.spawn_point(GO1) == (0.0, 0.0)
    for task, tile, message in ((stairs, ["10", "0"], "rows 0-9 and columns 0-9"),
                                (GO1, ["0", "0"], "walks on flat ground, which has no tiles")):
        path = policies("Go1WalkStairs" if task == stairs else "Go1WalkFlat")
        run = subprocess.run([sys.executable, "examples/deploy_mujoco.py", str(path), "--tile", *tile],
                             capture_output=True, text=True, cwd=ROOT)
        assert run.returncode == 2 and f"--tile: tile ({tile[0]}, {tile[1]}): " in run.stderr, run.stderr
        assert message in run.stderr


def test_the_metadata_give_each_term_s_parameters_and_the_gait_clock_s_period(policies, tmp_path):
    from motrix_gym.learn.checkpoint import CheckpointError
    from motrix_gym.learn.export import deployment_metadata

    g1, go1 = policies("G1WalkFlat"), policies("Go1WalkFlat")
    meta = {p.key: p.value for p in onnx.load(g1).metadata_props}
    terms = meta["observation_names"].split(",")
    params = dict(zip(terms, json.loads(meta["observation_params"]), strict=True))
    assert params == {"base_ang_vel": {}, "projected_gravity": {}, "command": {"name": "base_velocity"},
                      "joint_pos": {"joints": [".*"]}, "joint_vel": {"joints": [".*"]}, "last_action": {},
                      "gait_phase": {"name": "gait"}}
    assert meta["gait_period"] == "0.8"
    assert "gait_period" not in {p.key for p in onnx.load(go1).metadata_props}  # no clock
    env = gym.make_vec(env_id("Go1WalkStairs"), num_envs=1, compile=False, progress=False)
    stairs = deployment_metadata(env.unwrapped, env_id("Go1WalkStairs"), Path("model_0.pt"))
    env.close()
    assert json.loads(stairs["observation_params"])[-1] == {"size": [1.6, 1.0], "resolution": 0.1, "offset": 0.5}

    G1 = env_id("G1WalkFlat")
    assert play(G1, g1, steps=2, progress=False).steps == 2
    with pytest.raises(CheckpointError, match=r"has gait_period '0.5', Motrix/G1WalkFlat-v0 has '0.8'"):
        play(G1, _changed(g1, tmp_path / "fast.onnx", gait_period="0.5"), steps=2, progress=False)
    other = meta["observation_params"].replace('"gait"', '"clock"')
    with pytest.raises(CheckpointError, match=r"has observation_params .*clock.*, Motrix/G1WalkFlat-v0 has"):
        play(G1, _changed(g1, tmp_path / "other.onnx", observation_params=other), steps=2, progress=False)
    # a file from before these keys existed says nothing of them, and plays
    older = _changed(g1, tmp_path / "older.onnx", gait_period=None, observation_params=None)
    assert play(G1, older, steps=2, progress=False).steps == 2


def test_a_run_opens_the_policy_file_once(deploy, exported, monkeypatch):
    """Its metadata, the task's model and the controller all come from one onnxruntime session."""
    import onnxruntime

    opened = []

    class Counted(onnxruntime.InferenceSession):
        def __init__(self, path, *args, **kwargs):
            opened.append(path)
            super().__init__(path, *args, **kwargs)

    monkeypatch.setattr(onnxruntime, "InferenceSession", Counted)
    result = deploy.run(exported, (0.5, 0.0, 0.0), 0.1)
    assert opened == [str(exported)]
    assert result["seconds"] == pytest.approx(0.1)
