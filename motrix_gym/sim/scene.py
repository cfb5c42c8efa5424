"""MjSpec assembly: robot + ground + actuators + sensors, compiled into one MjModel.

The vendored robot XML is loaded unchanged; everything the task needs (position actuators with
PD gains, the floor, contact sensors, solver options, the per-lane memory cap) is added here.
"""

from __future__ import annotations

import re
from collections.abc import Collection

import mujoco
import numpy as np

from motrix_gym.manager.config import SceneConfig
from motrix_gym.manager.resolver import ModelInfo, TaskConfigError

GROUND = "terrain"


def build_spec(scene: SceneConfig, sim_dt: float, visual: bool = False, sensors: bool = True) -> mujoco.MjSpec:
    """The scene's spec. Without ``visual``, geoms that never collide (visual meshes) are
    discarded: the physics is the same, and the model is ~2 MB instead of ~70 MB of meshes and
    their collision trees, which the batch would copy again. Without ``sensors``, the sensors
    are there (same addresses) but not computed: for a physics model whose readings come from
    the sensing model, 5% faster steps (G1, 512 lanes) with the same motion, bit for bit."""
    robot = scene.robot
    spec = mujoco.MjSpec.from_file(str(robot.xml))
    spec.compiler.discardvisual = not visual
    spec.option.timestep = sim_dt
    # Warm-started Newton converges in a few iterations; the caps bound the worst case.
    spec.option.iterations = 10
    spec.option.ls_iterations = 20
    spec.memory = scene.memory_mb << 20
    if not sensors:
        spec.option.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_SENSOR)
    # Actuators and keyframes are the task's business: drop any the vendored model brings.
    for element in [*spec.actuators, *spec.keys]:
        spec.delete(element)
    root = spec.body(robot.root_body)
    if root is None:
        raise TaskConfigError(f"robot {robot.name!r}: root body {robot.root_body!r} not in the model")
    root.pos = [0.0, 0.0, robot.base_height]

    if scene.terrain != "flat":
        raise TaskConfigError(f"scene: unknown terrain {scene.terrain!r} (available: 'flat')")
    spec.worldbody.add_light(pos=[0, 0, 3], dir=[0, 0, -1], type=mujoco.mjtLightType.mjLIGHT_DIRECTIONAL)
    tex = spec.add_texture(name="grid", type=mujoco.mjtTexture.mjTEXTURE_2D,
                           builtin=mujoco.mjtBuiltin.mjBUILTIN_CHECKER, width=256, height=256,
                           rgb1=[0.2, 0.3, 0.4], rgb2=[0.1, 0.15, 0.2])
    mat = spec.add_material(name="grid", texrepeat=[8, 8])
    mat.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = tex.name
    spec.worldbody.add_geom(name=GROUND, type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 0.05],
                            material="grid", contype=1, conaffinity=1, friction=[1.0, 0.005, 0.0001])

    hinges = [j for j in spec.joints if j.type in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE)]
    for joint in hinges:
        group = next((g for g in robot.actuators if any(re.fullmatch(p, joint.name) for p in g.joints)), None)
        if group is None:
            continue
        joint.armature = group.armature
        act = spec.add_actuator(name=joint.name, target=joint.name,
                                trntype=mujoco.mjtTrn.mjTRN_JOINT)
        act.set_to_position(kp=group.stiffness, kv=group.damping)
        act.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
        act.forcerange = [-group.effort_limit, group.effort_limit]

    body_names = {b.name for b in spec.bodies}
    for s in scene.contact_sensors:
        if s.body not in body_names:
            raise TaskConfigError(f"contact sensor {s.name!r}: body {s.body!r} not in the model")
        spec.add_sensor(name=s.name, type=mujoco.mjtSensor.mjSENS_CONTACT,
                        objtype=mujoco.mjtObj.mjOBJ_BODY, objname=s.body,
                        reftype=mujoco.mjtObj.mjOBJ_GEOM, refname=GROUND,
                        intprm=[1, 0, 1])  # data="found", reduce="none", num=1: position stage only
    return spec


def build_model(scene: SceneConfig, sim_dt: float, visual: bool = False, sensors: bool = True) -> mujoco.MjModel:
    return build_spec(scene, sim_dt, visual, sensors).compile()


def build_sensing_model(scene: SceneConfig, sim_dt: float, sensors: Collection[str] | None = None) -> mujoco.MjModel:
    """The scene cut down to what a forward pass after stepping must produce: body frames,
    velocities and the sensors of the position and velocity stages.

    Bodies, joints and sensors are those of :func:`build_model`, so every address is the same
    and, from the same ``qpos``/``qvel``, ``xpos``, ``xquat``, ``cvel``, ``subtree_com`` and
    those sensors come out bit for bit the same. Nothing else is computed: no actuators, joint
    limits, springs, dampers or gravity, and only the geoms of contact-sensor bodies collide,
    with the ground only, as explicit pairs, each contact with one constraint row (condim 1).
    This pass costs about a third of the physics model's (G1: 3.4 vs 5.5 ms for 512 lanes,
    before condim 1).
    Acceleration-stage sensors are not computed here (zeros).

    ``sensors`` names the sensors to compute (default: all). The others keep their place and
    size as user sensors, which MuJoCo leaves at zero: G1's own IMU sensors, which no task
    reads, cost 9% of the pass (256 lanes).
    """
    spec = build_spec(scene, sim_dt)
    for element in list(spec.actuators):
        spec.delete(element)
    sensing = {s.body for s in scene.contact_sensors}
    ground = next(g for g in spec.geoms if g.name == GROUND)
    # A geom of a sensed body collides with the ground exactly when it would in the physics model
    # (contype 1, conaffinity 1). Those pairs are listed explicitly and nothing else collides, so
    # MuJoCo tests just them, without the broad phase over every geom (G1 tracking, 2048 lanes:
    # the pass 8.0 -> 7.2 ms). Margin and gap are the larger of the two geoms', as for contacts
    # found by the broad phase; condim 1: a contact is found all the same, with one constraint row.
    touching = [g for g in spec.geoms if g is not ground and g.parent.name in sensing
                and (ground.contype & g.conaffinity or ground.conaffinity & g.contype)]
    for geom in spec.geoms:
        geom.contype = geom.conaffinity = 0
    for i, geom in enumerate(touching):
        geom.name = geom.name or f"sensed_geom_{i}"
        spec.add_pair(geomname1=GROUND, geomname2=geom.name, condim=1, margin=max(geom.margin, ground.margin),
                      gap=max(geom.gap, ground.gap))
    for joint in spec.joints:
        joint.limited = mujoco.mjtLimited.mjLIMITED_FALSE
    off = mujoco.mjtDisableBit
    spec.option.disableflags |= int(off.mjDSBL_SPRING | off.mjDSBL_DAMPER | off.mjDSBL_GRAVITY | off.mjDSBL_LIMIT
                                    | off.mjDSBL_EQUALITY | off.mjDSBL_FRICTIONLOSS | off.mjDSBL_ACTUATION)
    if sensors is None:
        return spec.compile()
    unknown = set(sensors) - {s.name for s in spec.sensors}
    if unknown:
        raise TaskConfigError(f"sensing model: sensors {sorted(unknown)} are not in the scene")
    dims = dict(zip((s.name for s in spec.sensors), spec.compile().sensor_dim.tolist()))
    for s in spec.sensors:
        if s.name not in sensors:
            s.type, s.dim, s.needstage = mujoco.mjtSensor.mjSENS_USER, dims[s.name], mujoco.mjtStage.mjSTAGE_POS
            s.objtype = s.reftype = mujoco.mjtObj.mjOBJ_UNKNOWN
            s.objname = s.refname = ""
    return spec.compile()


def model_info(model: mujoco.MjModel) -> ModelInfo:
    """Names and addresses of ``model`` for the resolver."""
    def names(kind: mujoco.mjtObj, n: int) -> tuple[str, ...]:
        return tuple(mujoco.mj_id2name(model, kind, i) or "" for i in range(n))

    trn = model.actuator_trnid[:, 0]
    return ModelInfo(
        body_names=names(mujoco.mjtObj.mjOBJ_BODY, model.nbody),
        joint_names=names(mujoco.mjtObj.mjOBJ_JOINT, model.njnt),
        joint_types=tuple(int(t) for t in model.jnt_type),
        joint_qposadr=tuple(int(a) for a in model.jnt_qposadr),
        joint_dofadr=tuple(int(a) for a in model.jnt_dofadr),
        joint_range=tuple((float(lo), float(hi)) for lo, hi in model.jnt_range),
        actuator_joints=tuple(int(j) for j in np.asarray(trn)),
        sensor_names=names(mujoco.mjtObj.mjOBJ_SENSOR, model.nsensor),
        sensor_adr=tuple(int(a) for a in model.sensor_adr),
        sensor_dim=tuple(int(d) for d in model.sensor_dim),
        sensor_stage=tuple(int(s) for s in model.sensor_needstage),
        nq=model.nq,
        nv=model.nv,
    )
