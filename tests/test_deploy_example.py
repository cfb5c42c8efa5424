"""examples/deploy_mujoco.py: an exported policy run by a controller of its own on a plain
MuJoCo model, from the file's metadata alone, observes and acts as the env's policy does."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import mujoco
import numpy as np
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
def exported(tmp_path_factory):
    logs = tmp_path_factory.mktemp("logs")
    res = train(GO1, iterations=1, log_dir=logs, compile=False, eval_lanes=0, progress=False,
                config=tiny("Go1WalkFlat"))
    return play(GO1, res.checkpoint, steps=1, export="onnx", progress=False).onnx


def test_the_controller_observes_and_moves_as_the_env_s_policy_does(deploy, exported):
    command = (0.5, -0.2, 0.3)
    env = make_rsl_rl(GO1, num_envs=1, compile=False, progress=False, mode="play", command=command)
    policy = OnnxPolicy(exported)
    model = deploy.task_model(GO1)
    data = mujoco.MjData(model)
    controller = deploy.Controller(exported, model)
    data.qpos[:] = env.env.sim.qpos[0].numpy()  # the env's reset state
    data.qvel[:] = env.env.sim.qvel[0].numpy()
    mujoco.mj_forward(model, data)
    obs = env.get_observations()
    gaps = []
    for _ in range(50):
        controller.step(model, data, np.array(command))
        np.testing.assert_allclose(controller.obs[0], obs["policy"][0].numpy(), rtol=0, atol=1e-5)
        with torch.inference_mode():
            obs, _, dones, _ = env.step(policy(obs))
        assert not dones.any()
        gaps.append(np.abs(data.qpos - env.env.sim.qpos[0].numpy()).max())
    assert max(gaps) < 1e-5, gaps  # float32 observations rounded otherwise than torch rounds them
    # the joints moved: the comparison is not of two robots standing still
    assert np.abs(data.qpos[7:] - controller.default).max() > 0.01
    env.close()


def test_the_controller_refuses_what_it_cannot_build(deploy, exported, tmp_path):
    import onnx

    proto = onnx.load(exported)
    for entry in proto.metadata_props:
        if entry.key == "observation_functions":
            entry.value = entry.value.replace("mdp.observations.command", "mdp.observations.gait_phase")
    other = tmp_path / "gait.onnx"
    onnx.save(proto, other)
    with pytest.raises(ValueError, match=r"cannot build the observation terms \['command \(motrix_gym.mdp."
                                         r"observations.gait_phase\)'\]"):
        deploy.Controller(other, deploy.task_model(GO1))


def test_the_example_runs_from_the_command_line_on_the_task_s_model_or_a_changed_copy(deploy, exported, tmp_path):
    def example(*args: str) -> str:
        run = subprocess.run([sys.executable, "examples/deploy_mujoco.py", str(exported), *args],
                             capture_output=True, text=True, cwd=ROOT)
        assert run.returncode == 0, run.stderr
        return run.stdout

    assert example("--seconds", "1").startswith("1.00 s: mean planar-velocity error ")
    saved = tmp_path / "elsewhere" / "go1.xml"
    saved.parent.mkdir()
    assert example("--save-model", str(saved)) == ""
    text = saved.read_text()
    assert '<option timestep="0.005"' in text
    saved.write_text(text.replace('<option timestep="0.005"', '<option timestep="0.002" integrator="implicitfast"'))
    model = mujoco.MjModel.from_xml_path(str(saved))  # its meshes found from another folder
    own = deploy.task_model(GO1)
    assert (model.nbody, model.njnt, model.nu, model.opt.timestep) == (own.nbody, own.njnt, own.nu, 0.002)
    assert deploy.Controller(exported, model).substeps == 10
    assert example("--model", str(saved), "--seconds", "1").startswith("1.00 s: mean planar-velocity error ")
