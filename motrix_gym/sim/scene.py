"""MjSpec assembly: robot + ground + actuators + sensors, compiled into one MjModel.

The vendored robot XML is loaded unchanged; everything the task needs (position actuators with
PD gains, the floor, contact sensors, solver options, the per-lane memory cap) is added here.
"""

from __future__ import annotations

import functools
from collections.abc import Collection

import numpy as np

from motrix_gym.manager.config import TERRAIN, Ball, ContactSensor, SceneConfig, TerrainConfig
from motrix_gym.manager.resolver import ModelInfo, TaskConfigError
from motrix_gym.sim.engine import mujoco
from motrix_gym.sim.terrain import HeightMap, generate

GROUND = TERRAIN  # the ground geom; its body has the same name


def build_spec(scene: SceneConfig, sim_dt: float, visual: bool = False, sensors: bool = True) -> mujoco.MjSpec:
    """The scene's spec. Without ``visual``, geoms that never collide (visual meshes) are
    discarded: the physics is the same, and the model is ~2 MB instead of ~70 MB of meshes and
    their collision trees, which the batch would copy again. Without ``sensors``, the sensors
    are there (same addresses) but not computed: for a physics model whose readings come from
    the sensing model, faster steps with the same motion, bit for bit."""
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

    # Each light that casts shadows costs a further pass over the scene per frame: the robot's
    # own lights only light it, and the scene's light below casts the shadows.
    for light in spec.lights:
        light.castshadow = False
    # from above and a little aside, so that steps and slopes show in their shading
    spec.worldbody.add_light(pos=[0, 0, 3], dir=[0.4, 0.25, -1], type=mujoco.mjtLightType.mjLIGHT_DIRECTIONAL)
    add_ground(spec, scene.terrain, visual)
    if visual:
        add_sky(spec)
    for ball in scene.balls:
        add_ball(spec, ball)

    hinges = [j for j in spec.joints if j.type in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE)]
    for joint in hinges:
        group = robot.actuator_of(joint.name)
        if group is None:
            continue
        joint.armature = group.armature
        act = spec.add_actuator(name=joint.name, target=joint.name,
                                trntype=mujoco.mjtTrn.mjTRN_JOINT)
        act.set_to_position(kp=group.stiffness, kv=group.damping)
        act.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
        act.forcerange = [-group.effort_limit, group.effort_limit]

    body_names = {b.name for b in spec.bodies}
    geom_names = {g.name for g in spec.geoms}
    for s in scene.contact_sensors:
        for body in (s.body or s.subtree or s.other, s.other):
            if body not in body_names:
                raise TaskConfigError(f"contact sensor {s.name!r}: body {body!r} not in the model")
        if s.geom and s.geom not in geom_names:
            raise TaskConfigError(f"contact sensor {s.name!r}: geom {s.geom!r} not in the model")
        kind = (mujoco.mjtObj.mjOBJ_GEOM if s.geom else mujoco.mjtObj.mjOBJ_XBODY if s.subtree
                else mujoco.mjtObj.mjOBJ_BODY)
        spec.add_sensor(name=s.name, type=mujoco.mjtSensor.mjSENS_CONTACT, objtype=kind,
                        objname=s.geom or s.body or s.subtree,
                        reftype=mujoco.mjtObj.mjOBJ_BODY, refname=s.other,
                        intprm=[1, 0, 1])  # data="found", reduce="none", num=1: position stage only
    return spec


def sensed_geoms(spec: mujoco.MjSpec, sensor: ContactSensor) -> list[mujoco.MjsGeom]:
    """The geoms whose contacts ``sensor`` counts."""
    if sensor.geom:
        return [g for g in spec.geoms if g.name == sensor.geom]
    if sensor.body:
        return [g for g in spec.geoms if g.parent.name == sensor.body]
    below, inside = spec.body(sensor.subtree), []
    stack = [below]
    while stack:
        b = stack.pop()
        inside.append(b.name)
        stack += list(b.bodies)
    return [g for g in spec.geoms if g.parent.name in inside]


def add_ball(spec: mujoco.MjSpec, ball: Ball) -> None:
    """A free hollow ball resting on the ground at the origin (see ``manager.config.Ball``)."""
    body = spec.worldbody.add_body(name=ball.name, pos=[0.0, 0.0, ball.radius], mass=ball.mass,
                                   inertia=[2.0 / 3.0 * ball.mass * ball.radius**2] * 3, explicitinertial=True)
    body.add_freejoint(name=ball.name).damping = [ball.damping, 0.0, 0.0]  # linear damping (no higher terms)
    body.add_geom(name=ball.name, type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[ball.radius, 0, 0], condim=6,
                  friction=list(ball.friction), solref=[ball.softness, 1.0], rgba=[0.85, 0.35, 0.55, 1.0],
                  contype=1, conaffinity=1)


@functools.lru_cache(maxsize=4)
def height_map(terrain: TerrainConfig) -> HeightMap | None:
    """The terrain's heights (None for a plane); generated once for the models of an env (its
    physics, sensing and rendering models), and for envs made with the same terrain."""
    return None if terrain.flat else generate(terrain)


# Height per turn of a rendered heightfield's colour wheel: neighbouring steps of every staircase
# here (3-20 cm) differ in colour, and bumps of a few cm show.
COLOUR_CYCLE = 0.25
# The wheel: a grey, plus cos and sin of the height's angle times two axes (blue to sand, green to mauve).
GREY, COS_AXIS, SIN_AXIS = np.array([0.62, 0.64, 0.66]), np.array([-0.07, -0.01, 0.07]), np.array([0.04, -0.05, 0.04])


def ground_colours(hm: HeightMap) -> np.ndarray:
    """(ny, nx, 3) uint8 colour of each sample of ``hm`` (same indices as its heights): a colour
    wheel turned by the height once every ``COLOUR_CYCLE`` m, so that steps, slopes and bumps
    show from any angle, darker on alternate 1 m squares, so that motion shows on level ground."""
    ny, nx = hm.heights.shape
    x = hm.origin[0] + hm.spacing * np.arange(nx)
    y = hm.origin[1] + hm.spacing * np.arange(ny)
    angle = (2 * np.pi / COLOUR_CYCLE * hm.heights)[..., None]
    rgb = GREY + np.cos(angle) * COS_AXIS + np.sin(angle) * SIN_AXIS
    # + 1e-9: a sample on a whole metre, up to rounding, starts the square beyond it
    odd = (np.floor(y + 1e-9)[:, None] + np.floor(x + 1e-9)[None, :]) % 2 == 1
    return np.round(np.where(odd[..., None], 0.88 * rgb, rgb) * 255).astype(np.uint8)


SKY = [0.22, 0.3, 0.38]


def add_sky(spec: mujoco.MjSpec) -> None:
    """A sky of one colour, which is also the fog's: without it the space beyond the ground's far
    edge is drawn black, and with the renderer's fog the ground fades into it, so that the
    horizon has no edge."""
    spec.add_texture(name="sky", type=mujoco.mjtTexture.mjTEXTURE_SKYBOX, builtin=mujoco.mjtBuiltin.mjBUILTIN_FLAT,
                     rgb1=SKY, rgb2=SKY, width=8, height=8)
    spec.visual.rgba.fog = [*SKY, 1.0]


PIECE = 64  # samples along each side of a drawn piece of a heightfield
PIECES = f"{GROUND}_piece_"  # a piece's name: this, then its row and column


def add_ground(spec: mujoco.MjSpec, terrain: TerrainConfig, visual: bool = False) -> None:
    """A static body ``terrain`` holding the geom ``terrain``: a plane at height 0, or the
    heightfield of ``terrain`` (MuJoCo stores its samples normalised to [0, 1]: the geom sits at
    the lowest height and the field's elevation spans the range). A ``visual`` ground is drawn
    with a texture: a checker on the plane; a heightfield is drawn as pieces instead
    (``add_ground_pieces``), and its own geom, which still collides, is not drawn."""
    hm = height_map(terrain)
    ground = spec.worldbody.add_body(name=TERRAIN)
    common = dict(name=GROUND, contype=1, conaffinity=1, friction=[1.0, 0.005, 0.0001])
    if hm is None:
        if visual:
            tex = spec.add_texture(name="grid", type=mujoco.mjtTexture.mjTEXTURE_2D,
                                   builtin=mujoco.mjtBuiltin.mjBUILTIN_CHECKER, width=256, height=256,
                                   rgb1=[0.2, 0.3, 0.4], rgb2=[0.12, 0.18, 0.24])
            mat = spec.add_material(name="grid", texrepeat=[8, 8], texuniform=True)
            mat.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = tex.name
            common["material"] = mat.name
        ground.add_geom(type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 0.05], **common)
        return
    if visual:
        common["rgba"] = [0.5, 0.5, 0.5, 0.0]  # MuJoCo draws no geom of alpha 0
    add_heightfield(spec, ground, hm.heights, hm.origin, hm.spacing, **common)
    if visual:
        add_ground_pieces(spec, ground, hm)


def add_heightfield(spec: mujoco.MjSpec, body: mujoco.MjsBody, heights: np.ndarray, origin: tuple[float, float],
                    spacing: float, name: str, **geom: object) -> mujoco.MjsGeom:
    """A heightfield ``name`` of ``heights`` (``[row, col]`` at ``origin + spacing * (col,
    row)``) and its geom ``name``, in ``body``."""
    lo, hi = float(heights.min()), float(heights.max())
    span = max(hi - lo, 1e-3)
    ny, nx = heights.shape
    sx, sy = (nx - 1) * spacing, (ny - 1) * spacing
    spec.add_hfield(name=name, nrow=ny, ncol=nx, size=[sx / 2, sy / 2, span, 1.0],
                    userdata=((heights - lo) / span).flatten().tolist())
    return body.add_geom(name=name, type=mujoco.mjtGeom.mjGEOM_HFIELD, hfieldname=name,
                         pos=[origin[0] + sx / 2, origin[1] + sy / 2, lo], **geom)


def add_ground_pieces(spec: mujoco.MjSpec, body: mujoco.MjsBody, hm: HeightMap) -> None:
    """The heightfield of ``hm`` cut into pieces of ``PIECE`` samples a side (neighbours share
    their edge's samples), each a geom ``terrain_piece_<row>_<col>`` that never collides and is
    drawn with the heights' colours (``ground_colours``, one texel per sample). A renderer draws
    only the pieces its camera can see (``render.LaneRenderer``): a whole field is millions of
    triangles, which a CPU's OpenGL spends most of a frame on."""
    ny, nx = hm.heights.shape
    colours = ground_colours(hm)
    for r, i in enumerate(range(0, ny - 1, PIECE)):
        for c, j in enumerate(range(0, nx - 1, PIECE)):
            name = f"{PIECES}{r}_{c}"
            rows, cols = slice(i, min(i + PIECE, ny - 1) + 1), slice(j, min(j + PIECE, nx - 1) + 1)
            rgb = np.flipud(colours[rows, cols])  # an image's first row is the field's +y edge
            tex = spec.add_texture(name=name, type=mujoco.mjtTexture.mjTEXTURE_2D, width=rgb.shape[1],
                                   height=rgb.shape[0], nchannel=3)
            tex.data = rgb.tobytes()
            mat = spec.add_material(name=name, texrepeat=[1, 1], texuniform=False)
            mat.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = tex.name
            origin = (hm.origin[0] + j * hm.spacing, hm.origin[1] + i * hm.spacing)
            add_heightfield(spec, body, hm.heights[rows, cols], origin, hm.spacing, name, material=mat.name,
                            contype=0, conaffinity=0)


def ground_pieces(model: mujoco.MjModel) -> np.ndarray:
    """The geom ids of the drawn pieces of ``model``'s heightfield (none on a plane)."""
    return np.array([i for i in range(model.ngeom) if model.geom(i).name.startswith(PIECES)], dtype=np.int64)


def build_model(scene: SceneConfig, sim_dt: float, visual: bool = False, sensors: bool = True) -> mujoco.MjModel:
    return build_spec(scene, sim_dt, visual, sensors).compile()


def build_sensing_model(scene: SceneConfig, sim_dt: float, sensors: Collection[str] | None = None) -> mujoco.MjModel:
    """The scene cut down to what a forward pass after stepping must produce: body frames,
    velocities and the sensors of the position and velocity stages.

    Bodies, joints and sensors are those of :func:`build_model`, so every address is the same
    and, from the same ``qpos``/``qvel``, ``xpos``, ``xquat``, ``cvel``, ``subtree_com`` and
    those sensors come out bit for bit the same. Nothing else is computed: no actuators, joint
    limits, springs, dampers or gravity, and only the geoms of contact-sensor bodies collide, with
    the geoms of the body each is sensed against only, as explicit pairs, each contact with one
    constraint row (condim 1).
    This pass costs about a third of the physics model's (numbers in docs/performance.md).
    Acceleration-stage sensors are not computed here (zeros).

    ``sensors`` names the sensors to compute (default: all). The others keep their place and
    size as user sensors, which MuJoCo leaves at zero.
    """
    spec = build_spec(scene, sim_dt)
    for element in list(spec.actuators):
        spec.delete(element)
    # A geom of a sensed body and one of the body it is sensed against collide exactly when they
    # would in the physics model (contype/conaffinity). Those pairs are listed explicitly and
    # nothing else collides, so MuJoCo tests just them, without the broad phase over every geom.
    # Margin and gap are the larger of the two geoms', as for contacts found by the broad phase;
    # condim 1: a contact is found all the same, with one constraint row.
    pairs: dict[tuple[int, int], tuple[mujoco.MjsGeom, mujoco.MjsGeom]] = {}
    for sensor in scene.contact_sensors:
        for a in (g for g in spec.geoms if g.parent.name == sensor.other):
            for b in sensed_geoms(spec, sensor):
                if a.contype & b.conaffinity or a.conaffinity & b.contype:
                    pairs[(id(a), id(b))] = (a, b)
    for geom in spec.geoms:
        geom.contype = geom.conaffinity = 0
    for i, (a, b) in enumerate(pairs.values()):
        a.name = a.name or f"sensed_geom_{i}_a"
        b.name = b.name or f"sensed_geom_{i}_b"
        spec.add_pair(geomname1=a.name, geomname2=b.name, condim=1, margin=max(a.margin, b.margin),
                      gap=max(a.gap, b.gap))
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


def model_info(model: mujoco.MjModel, heightfield: HeightMap | None = None) -> ModelInfo:
    """Names and addresses of ``model`` for the resolver, with the terrain's height map."""
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
        joint_limited=tuple(bool(x) for x in model.jnt_limited),
        actuator_joints=tuple(int(j) for j in np.asarray(trn)),
        sensor_names=names(mujoco.mjtObj.mjOBJ_SENSOR, model.nsensor),
        sensor_adr=tuple(int(a) for a in model.sensor_adr),
        sensor_dim=tuple(int(d) for d in model.sensor_dim),
        sensor_stage=tuple(int(s) for s in model.sensor_needstage),
        nq=model.nq,
        nv=model.nv,
        nu=model.nu,
        nbody=model.nbody,
        nsensordata=model.nsensordata,
        geom_names=names(mujoco.mjtObj.mjOBJ_GEOM, model.ngeom),
        geom_bodies=tuple(int(b) for b in model.geom_bodyid),
        joint_bodies=tuple(int(b) for b in model.jnt_bodyid),
        body_parents=tuple(int(b) for b in model.body_parentid),
        qpos0=tuple(float(q) for q in model.qpos0),
        heightfield=heightfield,
    )
