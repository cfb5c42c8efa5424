"""Each robot's actuators, default pose and action scales, with its root welded 2 m in the air
(a test-only weld constraint; the free joint stays, so MuJoCo still ignores contacts between a
body and its parent): zero actions hold the default pose, and an action of +-1 on one joint
moves it to ``default +- scale`` (clipped to its range)."""

import mujoco
import numpy as np
import pytest

from motrix_gym.envs.robots import G1, GO1, T1, action_scale
from motrix_gym.manager.config import RobotConfig, SceneConfig
from motrix_gym.manager.patterns import lookup
from motrix_gym.sim.scene import build_spec

ROBOTS = {"g1": G1, "t1": T1, "go1": GO1}
# Under gravity a servo sags by load / stiffness. G1's waist pitch servo (two 5020 motors through a
# linkage, 28 N m/rad) lets the upper body lean 0.08 rad, and its shoulder-roll servos (14 N m/rad)
# let the arms fall in by 0.06 rad; every other joint of the three robots stays within 0.05 rad.
GRAVITY_SAG = {"g1": {"waist_pitch_joint": 0.09, "left_shoulder_roll_joint": 0.07, "right_shoulder_roll_joint": 0.07}}


def welded(robot: RobotConfig, gravity: bool) -> mujoco.MjModel:
    spec = build_spec(SceneConfig(robot), 0.005)
    spec.body(robot.root_body).pos = [0.0, 0.0, 2.0]
    weld = spec.add_equality(type=mujoco.mjtEq.mjEQ_WELD, objtype=mujoco.mjtObj.mjOBJ_BODY, name1=robot.root_body)
    weld.data = [0.0] * 10 + [1.0, 0.0]  # anchor, relative pose from qpos0, torque scale 1
    weld.solref = [0.004, 1.0]
    model = spec.compile()
    if not gravity:
        model.opt.gravity[:] = 0.0
    return model


def settle(model: mujoco.MjModel, robot: RobotConfig, action: np.ndarray, seconds: float = 2.0):
    data = mujoco.MjData(model)
    names = [model.actuator(i).name for i in range(model.nu)]
    adr = np.array([model.jnt_qposadr[model.actuator_trnid[i, 0]] for i in range(model.nu)])
    default = np.array([lookup(robot.default_joint_pos, n) or 0.0 for n in names])
    scale = np.array([lookup(action_scale(robot), n) for n in names])
    data.qpos[adr] = default
    data.ctrl[:] = default + scale * action
    worst = np.zeros(model.nu)
    for _ in range(round(seconds / model.opt.timestep)):
        mujoco.mj_step(model, data)
        worst = np.maximum(worst, np.abs(data.qpos[adr] - data.ctrl))
    lo, hi = model.jnt_range[model.actuator_trnid[:, 0]].T
    return names, data.qpos[adr].copy(), np.clip(default + scale * action, lo, hi), default, worst, data


def blocked_by_own_body(model: mujoco.MjModel, data: mujoco.MjData, actuator: int) -> bool:
    """Whether the bodies that joint moves touch another body of the robot."""
    moved = {model.jnt_bodyid[model.actuator_trnid[actuator, 0]]}
    for b in range(model.nbody):
        if model.body_parentid[b] in moved:
            moved.add(b)
    return any((model.geom_bodyid[c.geom1] in moved) != (model.geom_bodyid[c.geom2] in moved)
               for c in data.contact[:data.ncon])


@pytest.mark.parametrize("name", ROBOTS)
def test_zero_actions_hold_the_default_pose(name):
    robot = ROBOTS[name]
    names, _, _, _, worst, _ = settle(welded(robot, gravity=True), robot, np.zeros(len(robot_actuators(robot))))
    bound = np.array([GRAVITY_SAG.get(name, {}).get(n, 0.05) for n in names])
    bad = {n: round(float(w), 3) for n, w, b in zip(names, worst, bound) if w > b}
    assert not bad, f"{name}: joints off their default pose by more than 0.05 rad within 2 s: {bad}"
    _, _, _, _, still, _ = settle(welded(robot, gravity=False), robot, np.zeros(len(names)))
    assert still.max() < 1e-6  # without gravity nothing at all moves: no contact in the default pose


@pytest.mark.parametrize("name", ROBOTS)
def test_unit_action_moves_each_joint_to_its_target(name):
    """Gravity off: what is checked is the map from action to target, not the servo's stiffness.
    A limb that meets the robot's own body first stops there (G1's arms rolled in against its
    torso); that is counted, and so is every other joint reaching its target."""
    robot = ROBOTS[name]
    model = welded(robot, gravity=False)
    misses, stopped = {}, []
    for i in range(model.nu):
        for sign in (1.0, -1.0):
            action = np.zeros(model.nu)
            action[i] = sign
            names, q, target, default, _, data = settle(model, robot, action)
            if abs(q[i] - target[i]) <= 0.05:
                continue
            moved = (q[i] - default[i]) * sign  # towards the target, from the default
            if blocked_by_own_body(model, data, i) and moved > 0:
                stopped.append(f"{names[i]} {sign:+.0f}")
            else:
                misses[f"{names[i]} {sign:+.0f}"] = round(float(q[i] - target[i]), 3)
    assert not misses, f"{name}: joints short of default +- scale by more than 0.05 rad: {misses}"
    assert len(stopped) <= 2, f"{name}: stopped by the robot's own body: {stopped}"


def robot_actuators(robot: RobotConfig) -> list[str]:
    model = welded(robot, gravity=False)
    return [model.actuator(i).name for i in range(model.nu)]
