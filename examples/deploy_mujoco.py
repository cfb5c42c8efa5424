"""An exported policy (``play --export onnx``) driving its robot as the robot's controller would:
each control period, one observation built from the robot's state with nothing but the file's
metadata, onnxruntime, and position targets for the servos. The physics is a plain
``mujoco.MjModel`` stepped by ``mujoco.mj_step``, not motrix_gym's batch or runtime: by default
the task's own model (``--model`` takes another MJCF of the robot, e.g. its maker's, whose
actuators are position servos on the metadata's joints).

    python examples/deploy_mujoco.py logs/Go1WalkFlat/<run>/policy.onnx --command 0.5 0 0 --seconds 10
    python examples/deploy_mujoco.py <run>/policy.onnx --save-model go1.xml  # then edit it, and:
    python examples/deploy_mujoco.py <run>/policy.onnx --model go1.xml
    python examples/deploy_mujoco.py <run>/policy.onnx --viewer  # watch it, steer it with the arrow keys
    python examples/deploy_mujoco.py logs/Go1WalkStairs/<run>/policy.onnx --tile 5 0  # a mid-level tile

It prints the mean planar-velocity and yaw-rate errors against the command, as ``play`` does,
and when the robot fell, if it did. The observation terms it can build are those in ``TERMS``
(the velocity-tracking tasks', a height scan by ray casts onto the ground); a file whose policy
observes others is refused, naming them. Needs onnxruntime (``pip install -e ".[onnx]"``).
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import mujoco
import numpy as np
import onnxruntime

MDP = "motrix_gym.mdp.observations"
TERRAIN = "motrix_gym.mdp.terrain"


Policy = str | Path | onnxruntime.InferenceSession


def load(policy: Policy) -> onnxruntime.InferenceSession:
    """An exported policy file opened once, on the CPU (a session passes through)."""
    if isinstance(policy, onnxruntime.InferenceSession):
        return policy
    return onnxruntime.InferenceSession(str(policy), providers=["CPUExecutionProvider"])


def metadata(policy: Policy) -> dict[str, str]:
    """The metadata of an exported policy (``motrix_gym/learn/export.py`` says what each means)."""
    return dict(load(policy).get_modelmeta().custom_metadata_map)


def _rotate_inverse(quat: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``v`` (world) in the frame of the unit quaternion ``quat`` (w, x, y, z)."""
    out = np.empty(3)
    mujoco.mju_rotVecQuat(out, v, np.array([quat[0], -quat[1], -quat[2], -quat[3]]))
    return out


class Controller:
    """The exported ``policy`` with the state a controller keeps between control periods: the last
    action, each term's history and a recurrent policy's state."""

    def __init__(self, policy: Policy, model: mujoco.MjModel) -> None:
        self.session = load(policy)
        meta = metadata(self.session)
        self.model = model

        def floats(key: str) -> np.ndarray:
            return np.array([float(x) for x in meta[key].split(",")])

        self.joints = meta["joint_names"].split(",")
        self.default = floats("default_joint_pos")
        self.scale, self.clip = floats("action_scale"), float(meta["action_clip"])
        self.control_dt = float(meta["control_dt"])
        self.substeps = round(self.control_dt / model.opt.timestep)
        if abs(self.substeps * model.opt.timestep - self.control_dt) > 1e-9:
            raise ValueError(f"the control period {self.control_dt} s is not a whole number of the model's "
                             f"{model.opt.timestep} s steps")
        ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in self.joints]
        missing = [j for j, i in zip(self.joints, ids) if i < 0]
        if missing:
            raise ValueError(f"the model has no joints {missing}")
        self.qpos_adr, self.dof_adr = model.jnt_qposadr[ids], model.jnt_dofadr[ids]
        by_joint = {model.actuator_trnid[a, 0]: a for a in range(model.nu)}
        if any(i not in by_joint for i in ids):
            raise ValueError("every joint the policy drives needs a position actuator in the model")
        self.actuators = np.array([by_joint[i] for i in ids])
        if model.njnt == 0 or model.jnt_type[0] != mujoco.mjtJoint.mjJNT_FREE:
            raise ValueError("the model's first joint must be the robot's free joint")
        self.root_qpos = model.jnt_qposadr[0]
        self.root_dof = model.jnt_dofadr[0]

        names, funcs = meta["observation_names"].split(","), meta["observation_functions"].split(",")
        unknown = [f"{n} ({f})" for n, f in zip(names, funcs) if f not in TERMS]
        if unknown:
            raise ValueError(f"this controller cannot build the observation terms {unknown}")
        self.terms = [TERMS[f] for f in funcs]
        # joint terms read the action's joints here (a file from before observation_params: all joints)
        params = json.loads(meta.get("observation_params", "[]")) or [{}] * len(names)
        scans = [p for f, p in zip(funcs, params) if f == f"{TERRAIN}.height_scan"]
        if scans and not scans[0]:
            raise ValueError("the policy observes a height scan, but the file does not say its grid "
                             "(observation_params): export it again")
        self.scan = _scan_grid(scans[0]["size"], scans[0]["resolution"], scans[0]["offset"]) if scans else None
        self.ground = _ground(model)
        hinges = [model.joint(j).name for j in range(model.njnt) if model.jnt_type[j] != mujoco.mjtJoint.mjJNT_FREE]
        for name, p in zip(names, params):
            if "joints" in p and [j for j in hinges if any(re.fullmatch(x, j) for x in p["joints"])] != self.joints:
                raise ValueError(f"observation term {name!r} reads joints {p['joints']}, not the action's")
        self.histories = [int(h) for h in meta["observation_history"].split(",")]
        self.term_scales = [float(s) for s in meta["observation_scales"].split(",")]
        self.term_clips = [None if c == "none" else tuple(float(x) for x in c.split(":"))
                           for c in meta["observation_clips"].split(",")]
        self.state_shapes = {i.name: tuple(i.shape) for i in self.session.get_inputs() if i.name != "obs"}
        if f"{MDP}.gait_phase" in funcs and "gait_period" not in meta:
            raise ValueError("the policy observes a gait clock, but the file does not say its period "
                             "(gait_period): export it again")
        # the clock's phase as the env keeps it, in float32
        self.gait_rate = np.float32(self.control_dt / float(meta.get("gait_period", "inf")))
        self.reset()

    def reset(self) -> None:
        """An episode starts: no last action, histories filled by the first observation, zero state."""
        self.last_action = np.zeros(len(self.joints))
        self.history: list[list[np.ndarray]] = [[] for _ in self.terms]
        self.state = {n: np.zeros(s, np.float32) for n, s in self.state_shapes.items()}
        self.gait_phase = np.float32(0.0)

    def observe(self, data: mujoco.MjData, command: np.ndarray) -> np.ndarray:
        """The policy's input now: each term scaled and clipped, its history oldest first."""
        parts = []
        for i, term in enumerate(self.terms):
            value = term(self, data, command) * self.term_scales[i]
            if self.term_clips[i] is not None:
                value = np.clip(value, *self.term_clips[i])
            h = self.history[i]
            if h:
                h.pop(0)
                h.append(value)
            else:  # an episode's first observation fills the history
                h.extend([value] * self.histories[i])
            parts += h
        return np.concatenate(parts).astype(np.float32)[None]

    def act(self, data: mujoco.MjData, command: np.ndarray) -> np.ndarray:
        """The servos' position targets for the next control period (``self.obs``: what the
        policy observed)."""
        self.obs = self.observe(data, command)
        out = dict(zip([o.name for o in self.session.get_outputs()],
                       self.session.run(None, {"obs": self.obs, **self.state})))
        for name in self.state:
            self.state[name] = out[name.removesuffix("_in") + "_out"]
        self.last_action = np.clip(out["actions"][0].astype(np.float64), -self.clip, self.clip)
        return self.default + self.scale * self.last_action

    def step(self, model: mujoco.MjModel, data: mujoco.MjData, command: np.ndarray) -> None:
        """One control period: act, then hold the targets for the period's physics steps."""
        data.ctrl[self.actuators] = self.act(data, command)
        for _ in range(self.substeps):
            mujoco.mj_step(model, data)
        self.gait_phase = np.remainder(self.gait_phase + self.gait_rate, np.float32(1.0))


def _root_quat(c: Controller, data: mujoco.MjData) -> np.ndarray:
    return data.qpos[c.root_qpos + 3:c.root_qpos + 7]


# what each observation function of the metadata measures (its docstring in motrix_gym.mdp)
TERMS: dict[str, Callable[[Controller, mujoco.MjData, np.ndarray], np.ndarray]] = {
    f"{MDP}.base_lin_vel": lambda c, d, cmd: _rotate_inverse(_root_quat(c, d), d.qvel[c.root_dof:c.root_dof + 3]),
    f"{MDP}.base_ang_vel": lambda c, d, cmd: d.qvel[c.root_dof + 3:c.root_dof + 6].copy(),  # a free joint's: local
    f"{MDP}.projected_gravity": lambda c, d, cmd: _rotate_inverse(_root_quat(c, d), np.array([0.0, 0.0, -1.0])),
    f"{MDP}.command": lambda c, d, cmd: np.asarray(cmd, dtype=np.float64),
    f"{MDP}.joint_pos_rel": lambda c, d, cmd: d.qpos[c.qpos_adr] - c.default,
    f"{MDP}.joint_vel": lambda c, d, cmd: d.qvel[c.dof_adr].copy(),
    f"{MDP}.last_action": lambda c, d, cmd: c.last_action.copy(),
    f"{MDP}.gait_phase": lambda c, d, cmd: np.array([np.sin(2 * np.pi * c.gait_phase),
                                                     np.cos(2 * np.pi * c.gait_phase)]),
    f"{TERRAIN}.height_scan": lambda c, d, cmd: height_scan(c, d),
}


def _scan_grid(size: list[float], resolution: float, offset: float) -> tuple[np.ndarray, float]:
    """A height scan's points in the base's yaw frame (x forward, y left; x-major) and its offset."""
    x = np.linspace(-size[0] / 2, size[0] / 2, round(size[0] / resolution) + 1)
    y = np.linspace(-size[1] / 2, size[1] / 2, round(size[1] / resolution) + 1)
    return np.stack(np.meshgrid(x, y, indexing="ij"), -1).reshape(-1, 2), offset


def _ground(model: mujoco.MjModel) -> int:
    """The ground geom: motrix_gym's ``terrain``, else the first plane or heightfield fixed to the world."""
    kinds = (int(mujoco.mjtGeom.mjGEOM_PLANE), int(mujoco.mjtGeom.mjGEOM_HFIELD))
    named = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "terrain")
    found = [named] if named >= 0 else [g for g in range(model.ngeom) if model.body_weldid[model.geom_bodyid[g]] == 0
                                        and int(model.geom_type[g]) in kinds]
    if not found:
        raise ValueError("the model has no ground: a plane or heightfield geom fixed to the world")
    return found[0]


def ground_height(model: mujoco.MjModel, data: mujoco.MjData, geom: int, x: float, y: float) -> float:
    """The ground's height at (x, y): a ray cast down onto the ground geom (a plane or heightfield)."""
    if model.geom_type[geom] == mujoco.mjtGeom.mjGEOM_PLANE:
        return float(data.geom_xpos[geom, 2])
    top = float(data.geom_xpos[geom, 2] + model.hfield_size[model.geom_dataid[geom], 2]) + 1.0
    down = mujoco.mj_rayHfield(model, data, geom, np.array([x, y, top]), np.array([0.0, 0.0, -1.0]))
    return top - down if down >= 0 else float(data.geom_xpos[geom, 2])  # off the field: its base


def height_scan(c: Controller, data: mujoco.MjData) -> np.ndarray:
    """The base's height above the ground at the scan's points around it, minus the offset,
    clipped to [-1, 1] (what a robot's height map, sampled at those points, gives)."""
    (points, offset), pos = c.scan, data.qpos[c.root_qpos:c.root_qpos + 3]
    w, x, y, z = _root_quat(c, data)
    yaw = np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
    cos, sin = np.cos(yaw), np.sin(yaw)
    ground = [ground_height(c.model, data, c.ground, pos[0] + cos * px - sin * py, pos[1] + sin * px + cos * py)
              for px, py in points]
    return np.clip(pos[2] - np.array(ground) - offset, -1.0, 1.0)


def task_spec(task: str, visual: bool = False) -> mujoco.MjSpec:
    """The physics model of ``task`` (an id) in play mode, as motrix_gym builds it (``visual``:
    with the meshes that are only drawn, for a viewer)."""
    from motrix_gym.envs import task_config
    from motrix_gym.sim.scene import build_spec

    cfg = task_config(task, mode="play")
    spec = build_spec(cfg.scene, cfg.sim_dt, visual=visual)
    spec.meshdir = str(Path(cfg.scene.robot.xml).parent / spec.meshdir)  # so that a saved copy finds them
    return spec


def task_model(task: str) -> mujoco.MjModel:
    return task_spec(task).compile()


def spawn_point(task: str, tile: tuple[int, int] | None = None) -> tuple[float, float]:
    """Where the robot starts on ``task`` (an id): on generated terrain, the centre of tile
    ``tile`` = (row, column), whose flat platform robots spawn on (the row is the difficulty level,
    from 0; default (0, 0), the easiest); on flat ground, the origin."""
    from motrix_gym.envs import task_config
    from motrix_gym.sim.terrain import generate

    terrain = task_config(task, mode="play").scene.terrain
    if terrain.flat:
        if tile is not None:
            raise ValueError(f"tile {tile}: {task} walks on flat ground, which has no tiles")
        return 0.0, 0.0
    centers = generate(terrain).tile_centers
    row, col = (0, 0) if tile is None else tile
    rows, cols = centers.shape[:2]
    if not (0 <= row < rows and 0 <= col < cols):
        raise ValueError(f"tile ({row}, {col}): {task}'s terrain has rows 0-{rows - 1} and columns 0-{cols - 1}")
    return float(centers[row, col, 0]), float(centers[row, col, 1])


def stand(model: mujoco.MjModel, data: mujoco.MjData, c: Controller, lift: float = 0.02,
          at: tuple[float, float] = (0.0, 0.0)) -> None:
    """The robot at rest in its default pose at ``at`` (x, y), ``lift`` m above its standing
    height over the ground there."""
    mujoco.mj_resetData(model, data)
    data.qpos[c.root_qpos:c.root_qpos + 2] = at
    mujoco.mj_kinematics(model, data)
    data.qpos[c.qpos_adr] = c.default
    data.qpos[c.root_qpos + 2] += lift + ground_height(model, data, c.ground, *at)
    data.ctrl[c.actuators] = c.default
    mujoco.mj_forward(model, data)


def command_ranges(task: str) -> tuple[tuple[float, float], ...]:
    """The (lo, hi) of vx, vy and yaw rate that ``task`` (an id) draws its velocity commands from."""
    from motrix_gym.envs import task_config
    from motrix_gym.mdp.commands import VelocityCommand

    return next(t.params["ranges"] for t in task_config(task).commands if t.cls is VelocityCommand)


def run(policy: Policy, command: Sequence[float], seconds: float, model_path: str | None = None,
        viewer: bool = False, at: tuple[float, float] | None = None) -> dict:
    """Drive the robot for ``seconds`` with ``command`` from ``at`` (x, y; default: the task's
    ``spawn_point``); the mean tracking errors, and when it fell. ``viewer``: show it in real time
    in MuJoCo's viewer, whose keys steer the command (until the window is closed, at most
    ``seconds``)."""
    policy = load(policy)
    task = metadata(policy)["task"]
    at = spawn_point(task) if at is None else at
    model = mujoco.MjModel.from_xml_path(model_path) if model_path else task_model(task)
    data = mujoco.MjData(model)
    c = Controller(policy, model)
    stand(model, data, c, at=at)
    cmd = np.asarray(command, dtype=np.float64)
    window = None
    if viewer:
        from motrix_gym.learn import steering
        from motrix_gym.sim.viewer import LaneViewer

        shown = model if model_path else task_spec(task, visual=True).compile()  # the same joints, drawn
        window, ranges = LaneViewer(shown, period=c.control_dt, follow=model.jnt_bodyid[0]), command_ranges(task)
        print(f"keys in the window: {steering.HELP}; close the window to stop")
    lin, yaw, fell = [], [], None
    try:
        for k in range(round(seconds / c.control_dt)):
            if window is not None:
                for key in window.pressed():
                    if (value := steering.steer(cmd, key, ranges)) is not None:
                        cmd = np.array(value)
                        print(steering.describe(cmd), flush=True)
                window.show(data.qpos, qvel=data.qvel, ctrl=data.ctrl)
                if not window.running:
                    break
                pull = window.forces()  # a body dragged with the mouse (Ctrl and a button)
                data.xfrc_applied[:] = 0.0 if pull is None else pull
            c.step(model, data, cmd)
            v = TERMS[f"{MDP}.base_lin_vel"](c, data, cmd)
            lin.append(np.linalg.norm(cmd[:2] - v[:2]))
            yaw.append(abs(cmd[2] - data.qvel[c.root_dof + 5]))
            if TERMS[f"{MDP}.projected_gravity"](c, data, cmd)[2] > -0.34:  # tilted beyond 70 degrees
                fell = (k + 1) * c.control_dt
                break
    finally:
        if window is not None:
            window.close()
    if not lin:  # seconds shorter than a control period, or the window closed before the first
        return {"lin_vel_error": None, "yaw_rate_error": None, "fell_at_s": None, "seconds": 0.0}
    return {"lin_vel_error": float(np.mean(lin)), "yaw_rate_error": float(np.mean(yaw)), "fell_at_s": fell,
            "seconds": len(lin) * c.control_dt}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("policy", help="a policy.onnx written by play --export onnx")
    parser.add_argument("--command", type=float, nargs=3, default=(0.5, 0.0, 0.0), metavar=("VX", "VY", "YAW_RATE"))
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--viewer", action="store_true", help="watch it in MuJoCo's viewer, in real time; the "
                        "arrow keys steer the command")
    parser.add_argument("--tile", type=int, nargs=2, metavar=("ROW", "COL"), default=None,
                        help="on a task with generated terrain, the tile to start on (row: difficulty level from "
                             "0; default 0 0, the easiest)")
    parser.add_argument("--model", help="an MJCF of the robot (default: the task's own model)")
    parser.add_argument("--save-model", metavar="XML", help="write the task's own model as MJCF, to change and "
                        "pass as --model (a timestep, integrator, friction, ...), and stop")
    args = parser.parse_args()
    for path in (args.policy, args.model):
        if path is not None and not Path(path).is_file():
            parser.error(f"no file {path!r}")
    if not (np.isfinite(args.seconds) and args.seconds > 0) or not np.isfinite(args.command).all():
        parser.error(f"--seconds must be a finite number > 0 and --command three finite numbers, got {args.seconds} "
                     f"and {args.command}")
    policy = load(args.policy)
    task = metadata(policy)["task"]
    if args.save_model:
        Path(args.save_model).write_text(task_spec(task).to_xml())
        return
    try:
        at = spawn_point(task, None if args.tile is None else tuple(args.tile))
    except ValueError as e:
        parser.error(f"--tile: {e}")
    result = run(policy, args.command, args.seconds, args.model, args.viewer, at)
    if result["lin_vel_error"] is None:
        print("no control period ran: --seconds is shorter than one, or the window was closed first")
        return
    print(f"{result['seconds']:.2f} s: mean planar-velocity error {result['lin_vel_error']:.3f} m/s, "
          f"yaw-rate error {result['yaw_rate_error']:.3f} rad/s"
          + (f"; fell at {result['fell_at_s']:.2f} s" if result["fell_at_s"] is not None else ""))


if __name__ == "__main__":
    main()
