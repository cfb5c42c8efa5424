"""The sensing batch: the derived fields a task reads, the same as a forward pass of the physics
model, bit for bit."""

import dataclasses

import mujoco
import numpy as np
import pytest
import torch
from mujoco import batch as mjbatch

from conftest import random_actions
from motrix_gym.manager.resolver import TaskConfigError
from motrix_gym.registry import BUILTIN
from motrix_gym.sim.scene import build_model
from motrix_gym.vector_env import MotrixVectorEnv

DERIVED = ("xpos", "xquat", "cvel", "subtree_com", "sensordata")


def randomized_with_com():
    """A task with per-lane masses and centres of mass that reads ``cvel`` and ``subtree_com``."""
    from motrix_gym.envs import task_config

    cfg = task_config("G1WalkRough")
    assert cfg.randomization is not None
    return dataclasses.replace(cfg, extra_reads=("cvel", "subtree_com"))


@pytest.mark.parametrize("task", [*BUILTIN, "randomized_with_com"])
def test_sensing_equals_physics_forward(task):
    """Every lane, after steps with falls (contacts of the sensed bodies with the ground), resets
    and pushes: the fields the task reads, and the sensors its terms read, equal those of an
    mjSTAGE_VEL forward of the physics model with the same per-lane masses, inertias and
    centres of mass; sensors no term reads are not computed."""
    n = 16
    cfg = randomized_with_com() if task == "randomized_with_com" else task
    # NEXT_STEP: a lane that ended is compared in its last state (on the ground) before its reset
    env = MotrixVectorEnv(cfg, n, compile=False, autoreset_mode="NextStep")
    env.reset(seed=0)
    sim = env.sim
    lying = np.arange(4, dtype=np.int32)  # four robots start face down, their sensed bodies touching
    qpos = sim.qpos.numpy()[lying].copy()
    qpos[:, 2], qpos[:, 3:7] = 0.08, [np.cos(np.pi / 4), 0.0, np.sin(np.pi / 4), 0.0]
    sim.reset(lying, qpos, np.zeros_like(sim.qvel.numpy()[lying]), full=False)
    model = build_model(env.task.scene, env.task.sim_dt)  # the physics model, computing its sensors
    assert sim.model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_SENSOR  # the env's does not
    reference = mjbatch.Batch(model, n, 1)

    def same_lane_models() -> None:  # the physics batch's per-lane values (randomisation at resets)
        for field in mjbatch.MODEL_FIELDS:
            values = sim.batch.expanded(field)
            if values is not None:
                reference.expand(field)[:] = values
        reference.set_const()
    read = [f for f in DERIVED if f in env.runtime.program.reads]
    ref = {f: reference.bind(f) for f in read}
    sensed = {f: sim.sensing.bind(f) for f in read}
    exact = np.zeros(model.nsensordata, bool)  # the sensors terms read; the others stay zero
    for name in env.runtime.program.sensors:
        i = model.sensor(name).id
        exact[model.sensor_adr[i]:model.sensor_adr[i] + model.sensor_dim[i]] = True
    assert exact.any()
    contacts = 0
    for a in random_actions(60, n, env.single_action_space.shape[0], std=2.0):
        env.step(a)
        same_lane_models()
        reference.state[:] = sim.batch.state
        reference.forward(None, stage=mujoco.mjtStage.mjSTAGE_VEL)
        for f in read:
            got, want = sensed[f], ref[f]
            if f == "sensordata":
                assert not got[:, ~exact].any(), f"{task}: a sensor no term reads was computed"
                got, want = got[:, exact], want[:, exact]
            np.testing.assert_array_equal(got, want, err_msg=f"{task}: {f}")
        contacts += int((ref["sensordata"][:, exact] != 0).sum())
    assert contacts > 0, f"{task}: no sensor fired; the test saw no contacts"
    env.close()


def test_acceleration_sensor_is_refused():
    """A term reading an acceleration-stage sensor (G1's accelerometer) fails at make time."""
    from motrix_gym.envs import task_config
    from motrix_gym.manager.terms import ObservationTerm, Sensor
    from motrix_gym.mdp import observations as obs

    cfg = task_config("G1WalkFlat")
    policy = (*cfg.observations["policy"],
              ObservationTerm("acc", obs.in_contact, params={"sensors": (Sensor("imu_lin_acc"),)}))
    cfg = dataclasses.replace(cfg, observations={**cfg.observations, "policy": policy})
    with pytest.raises(TaskConfigError, match="imu_lin_acc.*accelerations"):
        MotrixVectorEnv(cfg, 2, compile=False)


def test_sensing_stops_at_the_stage_the_reads_need():
    """Walking reads positions and contacts only: its sensing pass skips the velocity stage. A
    velocity-stage sensor (the gyro) in a term, or body velocities (cvel), bring it back."""
    from motrix_gym.envs import task_config
    from motrix_gym.manager.terms import ObservationTerm, Sensor

    def readings(env, sensors):
        return torch.cat([env.sensordata[:, s.adr:s.adr + s.dim] for s in sensors], dim=-1)

    POS, VEL = mujoco.mjtStage.mjSTAGE_POS, mujoco.mjtStage.mjSTAGE_VEL
    cfg = task_config("G1WalkFlat")
    assert MotrixVectorEnv(cfg, 2, compile=False).sim.stage == POS
    assert MotrixVectorEnv("G1WbtDance", 2, compile=False).sim.stage == VEL  # reads cvel
    policy = (*cfg.observations["policy"],
              ObservationTerm("gyro", readings, params={"sensors": (Sensor("imu_ang_vel"),)}))
    gyro = dataclasses.replace(cfg, observations={**cfg.observations, "policy": policy})
    env = MotrixVectorEnv(gyro, 2, compile=False)
    assert env.sim.stage == VEL and "imu_ang_vel" in env.runtime.program.sensors
    env.reset(seed=0)
    env.sim.qvel[:, 3:6] = torch.tensor([0.1, -0.2, 0.3], dtype=torch.float64)  # the root turning
    env.sim.reset(np.arange(2, dtype=np.int32), env.sim.qpos.numpy().copy(), env.sim.qvel.numpy().copy(), full=False)
    env.runtime.read()
    sensors = env.runtime.program.observations["policy"][-1].params["sensors"]
    assert readings(env.runtime.ctx, sensors)[:2].abs().sum() > 0  # the sensing model computes the gyro
    env.close()
    assert MotrixVectorEnv(dataclasses.replace(cfg, extra_reads=("cvel",)), 2, compile=False).sim.stage == VEL
