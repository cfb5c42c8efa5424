"""Mirror symmetry: each robot's joint map reflects its kinematics, each task's reflection of its
observations is what the mirrored world observes, and PPO trains with it (augmentation, mirror
loss)."""

import dataclasses
import json
import subprocess
import sys

import mujoco
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import tensorboard_scalars, tiny
from motrix_gym.envs import task_config
from motrix_gym.envs.robots import G1, GO1, T1
from motrix_gym.learn.config import PpoConfig, PpoConfigError
from motrix_gym.learn.train import train
from motrix_gym.manager.config import Mirror
from motrix_gym.manager.patterns import lookup
from motrix_gym.manager.resolver import TaskConfigError
from motrix_gym.mdp.observations import base_ang_vel
from motrix_gym.mdp.terrain import scan_mirror, scan_points
from motrix_gym.vector_env import MotrixVectorEnv

MIRRORED = ("G1WalkFlat", "G1WalkRough", "G1WalkStairs", "G1WalkSlope", "T1WalkFlat", "T1WalkRough", "Go1WalkFlat",
            "Go1WalkRough", "Go1WalkStairs", "Go1BallBalance")


def _hinges(m: mujoco.MjModel) -> list[int]:
    return [j for j in range(m.njnt) if m.jnt_type[j] in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE)]


@pytest.mark.parametrize("robot", [G1, T1, GO1], ids=lambda r: r.name)
def test_a_robot_s_mirror_reflects_its_bodies_and_every_joint_s_sign_matters(robot):
    """The pose the mirror map gives puts every body and primitive geom where the reflection of
    the pose puts it (within 1 mm: the vendored models are symmetric to 10 um, their meshes
    less, so meshes are left out); flipping any one joint's sign in the map misplaces something."""
    m = mujoco.MjModel.from_xml_path(str(robot.xml))
    d = mujoco.MjData(m)
    joints = _hinges(m)
    names = [m.joint(j).name for j in joints]
    prim = [g for g in range(m.ngeom) if m.geom_type[g] != mujoco.mjtGeom.mjGEOM_MESH]
    q = np.random.default_rng(0).uniform(-0.8, 0.8, len(joints))
    source = [names.index(robot.mirror.counterpart(n)) for n in names]
    sign = np.array([robot.mirror.sign(n) for n in names])

    def points(pose: np.ndarray) -> np.ndarray:
        d.qpos[:] = 0.0
        d.qpos[3] = 1.0  # the root at the origin, unrotated
        d.qpos[m.jnt_qposadr[joints]] = pose
        mujoco.mj_kinematics(m, d)
        return np.concatenate([d.xpos, d.geom_xpos[prim]])

    reflected = points(q) * np.array([1.0, -1.0, 1.0])

    def misplaced(pose: np.ndarray) -> float:  # the farthest reflected point from any point of ``pose``
        return np.linalg.norm(reflected[:, None] - points(pose)[None], axis=-1).min(axis=1).max()

    assert misplaced(q[source] * sign) < 1e-3
    for k in range(len(names)):
        wrong = sign.copy()
        wrong[k] = -wrong[k]
        assert misplaced(q[source] * wrong) > 3e-3, names[k]


@pytest.mark.parametrize("robot", [G1, T1, GO1], ids=lambda r: r.name)
def test_a_robot_s_default_pose_is_its_own_mirror_image(robot):
    m = mujoco.MjModel.from_xml_path(str(robot.xml))
    names = [m.joint(j).name for j in _hinges(m)]
    pose = {n: lookup(robot.default_joint_pos, n) or 0.0 for n in names}
    assert {n: robot.mirror.sign(n) * pose[robot.mirror.counterpart(n)] for n in names} == pose


def _twin(task: str, command: tuple[float, float, float] | None) -> MotrixVectorEnv:
    options = {} if command is None else {"command": command}
    if task.endswith(("Stairs", "Slope")):  # spawn at a tile's centre, about which pyramids are symmetric
        options["overrides"] = {"resets.default_pose.params.xy_noise": 0.0}
    cfg = task_config(task, mode="play", **options)
    return MotrixVectorEnv(cfg, 1, compile=False, obs_groups=("policy", "critic"), output="torch")


@pytest.mark.parametrize("task", ["G1WalkFlat", "T1WalkFlat", "Go1WalkFlat", "Go1WalkStairs", "Go1BallBalance"])
def test_the_reflection_of_an_observation_is_what_the_mirrored_world_observes(task):
    """Two worlds start in play mode, mirror images of each other (the default pose facing +x,
    mirrored commands); one acts at random, the other the reflection of those actions. For three
    steps the second observes the reflection of what the first does, within what the models'
    own asymmetries (centres of mass a few mm off) let grow; the gait clock, which the twin
    cannot start half a stride on, reflects to the clock half a stride on."""
    walk = "Ball" not in task
    first = _twin(task, (0.6, 0.3, 0.5) if walk else None)
    second = _twin(task, (0.6, -0.3, -0.5) if walk else None)
    rt = first.runtime
    mirror = rt.mirror()
    a, _ = first.reset(seed=0)
    b, _ = second.reset(seed=0)
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        act = torch.rand(1, first.single_action_space.shape[0], generator=g) * 2 - 1
        a = first.step(act)[0]
        b = second.step(mirror.action(act))[0]
    for group in ("policy", "critic"):
        reflected = mirror.observations[group](a[group])[0]
        for name, cols in rt.observation_columns(group).items():
            if name == "gait_phase":
                sin, cos = a[group][0, cols]
                on = 2 * torch.pi * (torch.atan2(sin, cos) / (2 * torch.pi) + 0.5)
                torch.testing.assert_close(reflected[cols], torch.stack((torch.sin(on), torch.cos(on))))
                continue
            assert (reflected[cols] - b[group][0, cols]).abs().max() < 0.02, (group, name)
        assert (a[group] - b[group]).abs().max() > 0.5  # unreflected, the twins' observations differ
    first.close()
    second.close()


@pytest.mark.parametrize("task", MIRRORED)
def test_a_reflection_twice_is_the_identity_and_maps_each_term_onto_itself(task):
    env = MotrixVectorEnv(task, 1, compile=False, obs_groups=("policy", "critic"))
    mirror = env.runtime.mirror()
    x = torch.randn(5, env.single_action_space.shape[0])
    torch.testing.assert_close(mirror.action(mirror.action(x)), x, rtol=0, atol=0)
    for group, reflect in mirror.observations.items():
        cols = env.runtime.observation_columns(group)
        assert len(reflect.index) == max(c.stop for c in cols.values())
        x = torch.randn(5, len(reflect.index))
        torch.testing.assert_close(reflect(reflect(x)), x, rtol=0, atol=0)
        for c in cols.values():  # a term's values stay in its columns
            assert set(reflect.index[c].tolist()) == set(range(c.start, c.stop))
    env.close()


def test_a_term_with_a_history_reflects_each_of_its_observations_alike():
    cfg = task_config("G1WalkFlat", overrides={"observations.policy.joint_pos.history": 3})
    env = MotrixVectorEnv(cfg, 1, compile=False)
    mirror = env.runtime.mirror()
    cols = env.runtime.observation_columns("policy")["joint_pos"]
    x = torch.randn(4, len(mirror.observations["policy"].index))
    chunks = x[:, cols].reshape(4, 3, -1)  # oldest first; the joints are the action's, in model order
    torch.testing.assert_close(mirror.observations["policy"](x)[:, cols], mirror.action(chunks).reshape(4, -1),
                               rtol=0, atol=0)
    env.close()


@settings(max_examples=30, deadline=None)
@given(nx=st.integers(1, 20), ny=st.integers(1, 20), resolution=st.sampled_from([0.05, 0.1, 0.2]))
def test_a_height_scan_reflects_each_point_onto_the_one_across_the_base_s_x_z_plane(nx, ny, resolution):
    size = ((nx - 1) * resolution, (ny - 1) * resolution)
    p = scan_points(size, resolution)
    perm = scan_mirror(size, resolution)
    torch.testing.assert_close(p[perm], p * torch.tensor([1.0, -1.0]), rtol=0, atol=1e-6)


def _with_mirror(task: str, **changes):
    cfg = task_config(task)
    return dataclasses.replace(cfg, scene=dataclasses.replace(cfg.scene, robot=dataclasses.replace(
        cfg.scene.robot, **changes)))


def _with_term(task: str, term: str = "base_ang_vel", **changes):
    cfg = task_config(task)
    policy = tuple(dataclasses.replace(t, **changes) if t.name == term else t for t in cfg.observations["policy"])
    return dataclasses.replace(cfg, observations={**cfg.observations, "policy": policy})


@pytest.mark.parametrize("cfg, message", [
    (lambda: task_config("G1WbtDance"), "G1WbtDance: robot 'g1' has no mirror|does not say how it mirrors"),
    (lambda: _with_mirror("Go1WalkFlat", mirror=None), "Go1WalkFlat: robot 'go1' has no mirror"),
    (lambda: _with_mirror("Go1WalkFlat", mirror=Mirror(swap=(("FR_", "FX_"),), flip=(".*_hip_joint",))),
     "joint 'FR_hip_joint' mirrors to 'FX_hip_joint', which is not among its joints"),
    (lambda: _with_mirror("Go1WalkFlat", mirror=Mirror(swap=(("FR_", "FL_"), ("RR_", "RL_")), flip=("FR_hip_joint",))),
     "joint 'FR_hip_joint' and its counterpart 'FL_hip_joint' differ in whether they change sign"),
    (lambda: _with_term("Go1WalkFlat", "command", mirror=None),
     r"term 'command': does not say how it mirrors \(ObservationTerm.mirror, or @reflects on command\)"),
    (lambda: _with_term("Go1WalkFlat", mirror=(-1, 1)), "term 'base_ang_vel': mirrors 2 values, but it observes 3"),
    (lambda: _with_term("Go1WalkFlat", mirror=(-1, 0.5, -1)), "mirror signs must each be 1 or -1"),
    (lambda: _with_term("Go1WalkFlat", mirror="joints"), "mirror='joints' needs a Joints parameter 'joints'"),
    (lambda: _with_term("Go1WalkFlat", mirror=lambda: [0, 0, 1]), "must return a permutation of its 3 values"),
    (lambda: _with_term("Go1WalkFlat", mirror="legs"), "mirror must be signs, 'joints', 'actions' or a function"),
    (lambda: _with_term("Go1WalkFlat", clip=(-1.0, 2.0)), r"need a clip symmetric about 0, got \(-1.0, 2.0\)"),
])
def test_a_task_that_cannot_mirror_is_refused_naming_what_is_missing(cfg, message):
    env = MotrixVectorEnv(cfg(), 1, compile=False)
    with pytest.raises(TaskConfigError, match=message):
        env.runtime.mirror()
    env.close()


def test_a_term_s_own_mirror_overrides_its_function_s():
    """``base_ang_vel`` reflects as an angular velocity unless its term says otherwise."""
    def policy_reflection(cfg):
        env = MotrixVectorEnv(cfg, 1, compile=False)
        reflection = env.runtime.mirror().observations["policy"]
        env.close()
        return reflection

    assert base_ang_vel.mirror == (-1, 1, -1)
    default = policy_reflection(task_config("Go1WalkFlat"))
    own = policy_reflection(_with_term("Go1WalkFlat", mirror=(1, -1, 1)))
    assert default.sign[:3].tolist() == [-1.0, 1.0, -1.0]
    assert own.sign[:3].tolist() == [1.0, -1.0, 1.0]
    torch.testing.assert_close(own.sign[3:], default.sign[3:], rtol=0, atol=0)
    torch.testing.assert_close(own.index, default.index, rtol=0, atol=0)


def test_symmetry_settings_go_to_rsl_rl_and_refuse_recurrent_models():
    assert PpoConfig().to_rsl_rl()["algorithm"]["symmetry_cfg"] is None
    sym = PpoConfig(symmetry_augmentation=True, symmetry_loss_coef=0.5).to_rsl_rl()["algorithm"]["symmetry_cfg"]
    assert sym == {"data_augmentation_func": "motrix_gym.integrations.rsl_rl:mirror_augmentation",
                   "use_data_augmentation": True, "use_mirror_loss": True, "mirror_loss_coeff": 0.5}
    with pytest.raises(PpoConfigError, match="symmetry .* needs feed-forward models; rnn_type is 'lstm'"):
        PpoConfig(symmetry_loss_coef=0.1, rnn_type="lstm")
    with pytest.raises(PpoConfigError, match="symmetry_loss_coef must be a finite number >= 0"):
        PpoConfig(symmetry_loss_coef=-1.0)
    with pytest.raises(PpoConfigError, match="symmetry_augmentation must be a bool"):
        PpoConfig(symmetry_augmentation=1)


def test_mirror_augmentation_appends_the_reflected_batch():
    from motrix_gym.integrations.rsl_rl import make_rsl_rl, mirror_augmentation

    env = make_rsl_rl("Motrix/G1WalkFlat-v0", num_envs=3, compile=False, progress=False)
    mirror = env.env.runtime.mirror()
    obs, act = env.get_observations(), torch.randn(3, env.num_actions)
    both, acts = mirror_augmentation(env, obs=obs, actions=act)
    assert both.batch_size[0] == 6 and set(both.keys()) == {"policy", "critic"}
    for group in ("policy", "critic"):
        torch.testing.assert_close(both[group][:3], obs[group], rtol=0, atol=0)
        torch.testing.assert_close(both[group][3:], mirror.observations[group](obs[group]), rtol=0, atol=0)
    torch.testing.assert_close(acts, torch.cat([act, mirror.action(act)]), rtol=0, atol=0)
    assert mirror_augmentation(env, obs=None, actions=act)[0] is None
    assert mirror_augmentation(env, obs=obs, actions=None)[1] is None
    env.close()


def _asymmetry(run_dir, task: str) -> float:
    """Mean squared difference between the trained policy's action on reflected observations and
    the reflection of its action, over a few hundred observations of random play."""
    from motrix_gym.integrations.rsl_rl import make_rsl_rl
    from motrix_gym.learn.play import load_policy

    env = make_rsl_rl(f"Motrix/{task}-v0", num_envs=64, compile=False, progress=False)
    policy, _ = load_policy(sorted(run_dir.glob("model_*.pt"), key=lambda p: int(p.stem[6:]))[-1], env)
    mirror = env.env.runtime.mirror()
    obs, out = env.get_observations(), []
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for _ in range(5):
            reflected = obs.clone()
            for group in ("policy", "critic"):
                reflected[group] = mirror.observations[group](obs[group])
            out.append((policy(reflected) - mirror.action(policy(obs))).square().mean())
            obs = env.step(torch.rand(64, env.num_actions, generator=g) * 2 - 1)[0]
    env.close()
    return float(torch.stack(out).mean())


def test_training_with_the_mirror_loss_makes_the_policy_symmetric_and_logs_it(tmp_path):
    cfg = tiny("Go1WalkFlat").with_(num_envs=16, num_steps_per_env=8, num_learning_epochs=4)
    common = {"iterations": 6, "compile": False, "eval_lanes": 0, "progress": False}
    plain = train("Motrix/Go1WalkFlat-v0", log_dir=tmp_path / "plain", config=cfg, **common)
    mirrored = train("Motrix/Go1WalkFlat-v0", log_dir=tmp_path / "sym", **common,
                     config=cfg.with_(symmetry_augmentation=True, symmetry_loss_coef=10.0))
    sym = tensorboard_scalars(mirrored.run_dir)["Loss/symmetry"]
    assert sym.keys() == set(range(6)) and all(np.isfinite(v) for v in sym.values())
    assert "Loss/symmetry" not in tensorboard_scalars(plain.run_dir)
    assert json.loads((mirrored.run_dir / "config.json").read_text())["ppo"]["symmetry_loss_coef"] == 10.0
    asym = _asymmetry(mirrored.run_dir, "Go1WalkFlat"), _asymmetry(plain.run_dir, "Go1WalkFlat")
    print("asymmetry", asym)
    assert asym[0] < 0.2 * asym[1]


def test_the_cli_refuses_symmetry_where_it_cannot_train_before_writing_anything(tmp_path):
    def run(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "motrix_gym", "train", *argv, "--iterations", "1",
                               "--no-compile", "--log-dir", str(tmp_path)], capture_output=True, text=True)

    out = run("Motrix/G1WbtDance-v0", "--ppo", "symmetry_augmentation=true", "--num-envs", "2")
    assert out.returncode == 2 and out.stderr.startswith("error: G1WbtDance:"), out.stderr
    out = run("Motrix/Go1WalkFlat-v0", "--ppo", "symmetry_loss_coef=1", "--ppo", "rnn_type=gru")
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip() == ("error: PpoConfig: symmetry (symmetry_augmentation, symmetry_loss_coef) needs "
                                  "feed-forward models; rnn_type is 'gru'")
    assert not list(tmp_path.iterdir())
