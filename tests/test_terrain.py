"""Generated terrain: heights equal MuJoCo's own ray casts, robots spawn standing on the ground,
the height scan reads the steps, the curriculum moves lanes."""

import re

import mujoco
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from motrix_gym.manager.config import SubTerrain, TerrainConfig
from motrix_gym.manager.resolver import TaskConfigError
from motrix_gym.manager.terms import term_params
from motrix_gym.math.heightfield import HeightField
from motrix_gym.mdp.terrain import commanded_distance
from motrix_gym.sim import terrain
from motrix_gym.sim.scene import GROUND, add_ground, ground_colours, height_map
from motrix_gym.sim.terrain import BUILT_IN, Tile, generate
from motrix_gym.vector_env import MotrixVectorEnv

TERRAIN_TASKS = ("G1WalkRough", "G1WalkStairs", "G1WalkSlope", "T1WalkRough", "Go1WalkRough", "Go1WalkStairs")


def ground_model(cfg: TerrainConfig) -> mujoco.MjModel:
    spec = mujoco.MjSpec()
    add_ground(spec, cfg)
    return spec.compile()


@pytest.mark.parametrize("func", BUILT_IN, ids=lambda f: f.__name__)
def test_height_lookup_equals_mujoco_ray_cast(func):
    cfg = TerrainConfig(sub_terrains=(SubTerrain(func.__name__, func),), rows=4, cols=2, tile_size=4.0, border=1.0,
                        seed=3)
    hm = generate(cfg)
    model = ground_model(cfg)
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    rng = np.random.default_rng(0)
    sx, sy = hm.size
    x = hm.origin[0] + rng.uniform(0.0, sx, 500)
    y = hm.origin[1] + rng.uniform(0.0, sy, 500)
    geom = np.zeros(1, np.int32)
    top = hm.heights.max() + 5.0
    ray = np.array([top - mujoco.mj_ray(model, data, np.array([a, b, top]), np.array([0.0, 0.0, -1.0]), None, 1, -1,
                                        geom) for a, b in zip(x, y)])
    assert (geom == model.geom(GROUND).id).all()
    np.testing.assert_allclose(hm.height(x, y), ray, atol=1e-3)
    field = HeightField(torch.from_numpy(hm.heights), hm.origin, hm.spacing)
    got = field.height(torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.float32))
    np.testing.assert_allclose(got.numpy(), ray, atol=1e-3)
    if func is not terrain.flat:
        assert np.ptp(ray) > 0.02  # the points saw relief, not a plane


@pytest.mark.parametrize("task", ("G1WalkRough", "Go1WalkStairs"))
def test_the_drawn_pieces_of_a_heightfield_are_the_field(task):
    """Every sample of the field is in a drawn piece, at its place and height (to float32), and
    neighbouring pieces share their edge's samples, so the drawn ground has no gaps; the pieces
    never collide, and the physics model has none."""
    from motrix_gym.envs import task_config
    from motrix_gym.sim.scene import build_model, ground_pieces

    scene = task_config(task).scene
    hm, model = height_map(scene.terrain), build_model(scene, 0.005, visual=True)
    covered = np.zeros(hm.heights.shape, int)
    for g in ground_pieces(model):
        h = model.geom_dataid[g]
        rows, cols = model.hfield_nrow[h], model.hfield_ncol[h]
        half_x, half_y, span = model.hfield_size[h, :3]
        x0, y0, lo = model.geom_pos[g] - [half_x, half_y, 0.0]
        i, j = round((y0 - hm.origin[1]) / hm.spacing), round((x0 - hm.origin[0]) / hm.spacing)
        assert (half_x * 2, half_y * 2) == pytest.approx(((cols - 1) * hm.spacing, (rows - 1) * hm.spacing))
        data = model.hfield_data[model.hfield_adr[h]:model.hfield_adr[h] + rows * cols].reshape(rows, cols)
        np.testing.assert_allclose(lo + span * data, hm.heights[i:i + rows, j:j + cols], atol=1e-5)
        covered[i:i + rows, j:j + cols] += 1
        assert model.geom_contype[g] == model.geom_conaffinity[g] == 0
    assert covered.min() == 1 and covered.max() == 4  # a corner shared by four pieces
    assert len(ground_pieces(build_model(scene, 0.005))) == 0


@pytest.mark.parametrize("task", ("G1WalkStairs", "Go1WalkStairs"))
def test_neighbouring_steps_differ_in_colour(task):
    """Rendered terrain is coloured by height: every step of a staircase stands out from the next."""
    from motrix_gym.envs import task_config

    hm = height_map(task_config(task).scene.terrain)
    rgb = ground_colours(hm).astype(int)
    assert rgb.shape == (*hm.heights.shape, 3)
    for axis in (0, 1):
        step = np.abs(np.diff(hm.heights, axis=axis))
        colour = np.abs(np.diff(rgb, axis=axis)).max(axis=-1)
        square = np.diff(np.floor(hm.origin[1 - axis] + hm.spacing * np.arange(hm.heights.shape[axis]) + 1e-9))
        same_square = np.expand_dims(square == 0, 1 - axis)  # the 1 m squares' shade is not in the way
        risers = (step > 0.02) & same_square
        assert risers.sum() > 1000 and colour[risers].min() >= 3, (axis, colour[risers].min())
        level = (step == 0) & same_square
        assert level.any() and colour[level].max() == 0


def test_terrain_is_deterministic_and_seeded():
    cfg = TerrainConfig(sub_terrains=(SubTerrain("rough", terrain.rough, platform=0.5),), rows=2, cols=2, tile_size=2.0,
                        border=0.5)
    np.testing.assert_array_equal(generate(cfg).heights, generate(cfg).heights)
    other = TerrainConfig(sub_terrains=cfg.sub_terrains, rows=2, cols=2, tile_size=2.0, border=0.5, seed=1)
    assert not np.array_equal(generate(cfg).heights, generate(other).heights)
    with pytest.raises(ValueError, match="platform"):
        TerrainConfig(sub_terrains=(SubTerrain("rough", terrain.rough),), tile_size=2.0)


@pytest.mark.parametrize("make, message", [
    (lambda: SubTerrain("", terrain.flat), "sub-terrain: name must be a non-empty str, got ''"),
    (lambda: SubTerrain("bumps", "rough"), "sub-terrain 'bumps': func must be callable, got 'rough'"),
    (lambda: SubTerrain("bumps", terrain.rough, proportion=0.0), "sub-terrain 'bumps': proportion must be a finite "
                                                                  "number > 0, got 0.0"),
    (lambda: SubTerrain("bumps", terrain.rough, params=(("noise", 1.0),)), "sub-terrain 'bumps': params must be a "
                                                                          "dict, got tuple"),
    (lambda: TerrainConfig(resolution=0.0), "terrain: resolution must be a finite number > 0, got 0.0"),
    (lambda: TerrainConfig(tile_size=-8.0), "terrain: tile_size must be a finite number > 0, got -8.0"),
    (lambda: TerrainConfig(border=-1.0), "terrain: border must be a finite number >= 0, got -1.0"),
    (lambda: TerrainConfig(seed=-1), "terrain: seed must be an int >= 0, got -1"),
    (lambda: TerrainConfig(rows=2.0), "terrain: rows must be an int >= 1, got 2.0"),
    (lambda: TerrainConfig(difficulty=(0.5, 0.2)), "terrain: difficulty must be (lo, hi) with 0 <= lo <= hi <= 1, "
                                                   "got (0.5, 0.2)"),
    (lambda: TerrainConfig(difficulty=(0.0, 1.5)), "difficulty must be (lo, hi) with 0 <= lo <= hi <= 1"),
    (lambda: TerrainConfig(sub_terrains=(SubTerrain("rough", terrain.rough),), border=4.05),
     "terrain: border 4.05 is not a multiple of resolution 0.1"),
    (lambda: TerrainConfig(sub_terrains=(SubTerrain("a", terrain.flat), SubTerrain("a", terrain.rough))),
     "terrain: sub-terrain names ['a', 'a'] repeat one"),
    (lambda: TerrainConfig(sub_terrains=(SubTerrain("rough", terrain.rough),), resolution=0.002),
     "are a heightfield of 44000 x 44000 samples, more than the 1e+08 a terrain may have"),
])
def test_a_terrain_part_with_a_value_it_cannot_build_is_refused_naming_it(make, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        make()


def steps(tile: Tile, height: float, width: float = 0.5) -> np.ndarray:
    """A sub-terrain of one's own: ``height`` m steps across the tile along x."""
    return np.floor(tile.x / width) * height * tile.difficulty


@settings(max_examples=200, deadline=None)
@given(proportions=st.lists(st.floats(0.01, 10.0), min_size=1, max_size=6), extra=st.integers(0, 20))
def test_columns_are_shared_by_proportion_in_order_one_each_at_least(proportions, extra):
    subs = tuple(SubTerrain(f"s{k}", terrain.flat, proportion=p) for k, p in enumerate(proportions))
    cfg = TerrainConfig(sub_terrains=subs, cols=len(subs) + extra)
    got = terrain.columns(cfg)
    count = [got.count(s) for s in subs]
    assert got == tuple(s for s, c in zip(subs, count) for _ in range(c))  # each in one block, in order
    assert len(got) == cfg.cols and min(count) >= 1
    share = [cfg.cols * p / sum(proportions) for p in proportions]
    if min(share) >= 1.0:  # no sub-terrain needed its one column: shares rounded by largest remainders
        assert all(abs(c - x) < 1.0 for c, x in zip(count, share))


@pytest.mark.parametrize("sub, message", [
    (SubTerrain("stairs", terrain.pyramid_stairs, params={"step_width": 0.0}),
     "sub-terrain 'stairs': parameter 'step_width' must be a finite number > 0, got 0.0"),
    (SubTerrain("stairs", terrain.pyramid_stairs, params={"step_height": (-0.05, 0.2)}),
     "sub-terrain 'stairs': parameter 'step_height' item 0 must be a finite number >= 0, got -0.05"),
    (SubTerrain("bumps", terrain.rough, params={"noise": (0.02, float("nan"))}),
     "parameter 'noise' item 1 must be a finite number >= 0, got nan"),
    (SubTerrain("bumps", terrain.rough, params={"noise_size": 0.1}),
     "sub-terrain 'bumps': unknown parameter(s) ['noise_size'] for rough (takes ['noise', 'noise_step'])"),
    (SubTerrain("own", steps), "sub-terrain 'own': missing parameter(s) ['height'] for steps"),
    (SubTerrain("own", lambda tile: tile.x.reshape(7, -1)),
     "sub-terrain 'own': ValueError: cannot reshape array of size 1600 into shape (7,newaxis)"),
    (SubTerrain("own", lambda tile: tile.x[:3]), "sub-terrain 'own': its function must return (40, 40) finite real "
                                                 "heights, got a float64 array of shape (3, 40)"),
    (SubTerrain("own", lambda tile: np.full_like(tile.x, np.nan)), "its function must return (40, 40) finite real"),
])
def test_a_sub_terrain_is_checked_as_a_term_when_its_terrain_is_built(sub, message):
    cfg = TerrainConfig(sub_terrains=(sub,), rows=2, cols=1, tile_size=4.0, border=0.0)
    with pytest.raises(TaskConfigError, match=re.escape(message)):
        generate(cfg)


@pytest.mark.parametrize("rows, difficulty, of_rows", [(3, (0.0, 1.0), (0.0, 0.5, 1.0)),
                                                       (3, (0.25, 0.75), (0.25, 0.5, 0.75)),
                                                       (1, (0.25, 0.75), (0.75,))])
def test_a_sub_terrain_of_one_s_own_is_a_function_of_its_tile(rows, difficulty, of_rows):
    """Its heights fill its tiles, at each row's difficulty, which rises evenly over the terrain's range."""
    cfg = TerrainConfig(sub_terrains=(SubTerrain("own", steps, platform=0.5, params={"height": 0.1}),), rows=rows,
                        cols=1, tile_size=2.0, border=0.0, difficulty=difficulty)
    hm = generate(cfg)
    x = (np.arange(20) + 0.5) * 0.1
    for row, d in enumerate(of_rows):
        np.testing.assert_array_equal(hm.heights[:, row * 20:(row + 1) * 20],
                                      np.broadcast_to(np.floor(x / 0.5) * 0.1 * d, (20, 20)))


def one_tile(func, difficulty: float = 1.0, spacing: float = 0.05, seed: int = 0, **params) -> np.ndarray:
    """Heights of one 8 m tile of ``func`` with a 2 m platform (3 m between it and the border)."""
    return terrain.tile(SubTerrain(func.__name__, func, params=params), difficulty, round(8.0 / spacing), spacing,
                        np.random.default_rng(seed))


def runs(values: np.ndarray) -> list[tuple[float, int]]:
    """(value, length) of each run of equal values, in order."""
    cut = np.flatnonzero(np.diff(values)) + 1
    return [(float(v[0]), len(v)) for v in np.split(values, cut)]


@pytest.mark.parametrize("func", BUILT_IN, ids=lambda f: f.__name__)
def test_a_built_in_sub_terrain_keeps_its_platform_flat_and_follows_its_generator(func):
    x, y = np.meshgrid((np.arange(160) + 0.5) * 0.05, (np.arange(160) + 0.5) * 0.05)
    platform = np.minimum(np.minimum(x, y), np.minimum(8.0 - x, 8.0 - y)) >= 3.0
    for difficulty in (0.0, 0.5, 1.0):
        h = one_tile(func, difficulty)
        assert np.ptp(h[platform]) == 0.0, difficulty
        np.testing.assert_array_equal(h, one_tile(func, difficulty))


def test_wave_rings_the_platform_with_its_ridges():
    line = one_tile(terrain.wave, 1.0, amplitude=(0.0, 0.3), waves=4)[80, :60]  # border to platform
    assert line[0] < 0.01 and line[-1] < 0.01 and abs(line.max() - 0.3) < 0.01
    assert sum(v for v, _ in runs(line > 0.27)) == 4  # four crests
    assert np.ptp(one_tile(terrain.wave, 0.0)) == 0.0  # no height at difficulty 0


def test_stepping_stones_are_as_wide_and_as_far_apart_as_asked():
    h = one_tile(terrain.stepping_stones, 1.0, stone=(0.8, 0.5), gap=(0.1, 0.2), depth=0.7)
    assert set(np.unique(h)) == {0.0, -0.7}
    line = runs(h[80, :60])  # along a row of stones (the tile's centre line), border to platform
    inner = line[1:-1]  # the first may be cut by the border, the last joins the platform
    assert {n for v, n in inner if v == 0.0} == {10} and {n for v, n in inner if v < 0} == {4}  # 0.5 m, 0.2 m


def test_a_gap_is_a_trench_around_the_platform():
    h = one_tile(terrain.gap, 0.5, width=(0.1, 0.9), depth=1.0)
    assert runs(h[80]) == [(0.0, 50), (-1.0, 10), (0.0, 40), (-1.0, 10), (0.0, 50)]  # 0.5 m wide at 0.5


@pytest.mark.parametrize("seed", range(3))
def test_obstacles_are_the_boxes_drawn_each_over_the_samples_within_it(seed):
    h = one_tile(terrain.obstacles, 0.5, seed=seed, height=(0.1, 0.3), count=40)
    rng = np.random.default_rng(seed)  # the same draws, in the same order
    centre, half = rng.uniform(0.0, 8.0, (40, 2)), rng.uniform(0.3, 1.0, (40, 2)) / 2.0
    top = rng.choice((-1.0, 1.0), 40) * 0.2
    x, y = np.meshgrid((np.arange(160) + 0.5) * 0.05, (np.arange(160) + 0.5) * 0.05)
    want = np.zeros_like(x)
    for (cx, cy), (hx, hy), z in zip(centre, half, top):
        want[(np.abs(x - cx) <= hx) & (np.abs(y - cy) <= hy)] = z  # a later box covers an earlier one
    want[np.minimum(np.minimum(x, y), np.minimum(8.0 - x, 8.0 - y)) >= 3.0] = 0.0  # the platform
    np.testing.assert_array_equal(h, want)
    assert set(np.unique(h)) == {-0.2, 0.0, 0.2} and 0.1 < np.mean(h != 0.0) < 0.9


@pytest.mark.parametrize("params, message", [
    ({"waves": 0}, "parameter 'waves' must be int >= 1, got int 0"),
    ({"waves": 2.5}, "parameter 'waves' must be int >= 1, got float 2.5"),
    ({"waves": True}, "parameter 'waves' must be int >= 1, got bool True"),
])
def test_a_count_must_be_a_positive_int(params, message):
    cfg = TerrainConfig(sub_terrains=(SubTerrain("waves", terrain.wave, params=params),), rows=2, cols=1,
                        tile_size=4.0, border=0.0)
    with pytest.raises(TaskConfigError, match=re.escape(message)):
        generate(cfg)


def lowest_points(model: mujoco.MjModel, data: mujoco.MjData, body: int) -> np.ndarray:
    """(k, 3): for each colliding geom of ``body``, its lowest point (spheres, capsules, boxes)."""
    out = []
    for g in range(model.ngeom):
        if model.geom_bodyid[g] != body or not (model.geom_contype[g] or model.geom_conaffinity[g]):
            continue
        pos, rot = data.geom_xpos[g], data.geom_xmat[g].reshape(3, 3)
        size, kind = model.geom_size[g], model.geom_type[g]
        if kind == mujoco.mjtGeom.mjGEOM_SPHERE:
            pts = [pos - [0, 0, size[0]]]
        elif kind == mujoco.mjtGeom.mjGEOM_CAPSULE:
            ends = [pos + rot[:, 2] * size[1] * s for s in (-1, 1)]
            pts = [e - [0, 0, size[0]] for e in ends]
        elif kind == mujoco.mjtGeom.mjGEOM_BOX:
            pts = [pos + rot @ (size * np.array(c)) for c in np.ndindex(2, 2, 2) for c in [np.array(c) * 2 - 1]]
        else:
            continue
        out.append(min(pts, key=lambda p: p[2]))
    return np.array(out)


@pytest.mark.parametrize("task", TERRAIN_TASKS)
def test_lanes_spawn_standing_on_the_ground(task):
    env = MotrixVectorEnv(task, 64, compile=False)
    for seed in (0, 1):
        env.reset(seed=seed)
        hm = env.runtime.program.model.heightfield
        feet = [env.sim.model.body(b).id for b in env.runtime.ctx.commands["feet"].bodies.tolist()]
        levels = env.runtime.ctx.commands["terrain"].level[:64]
        assert levels.min() >= 0 and levels.max() <= 4  # first episodes start on the easier rows
        for lane in range(64):
            data = env.sim.batch.get_data(lane)
            mujoco.mj_kinematics(env.sim.model, data)
            root = data.qpos[:3]
            assert root[2] > hm.height(root[0], root[1]), f"{task} lane {lane}: root below the ground"
            for f in feet:
                low = lowest_points(env.sim.model, data, f)
                gap = low[:, 2] - hm.height(low[:, 0], low[:, 1])
                assert gap.min() > -0.01 and gap.min() < 0.05, f"{task} lane {lane}: a foot {gap.min():.3f} m off"
    env.close()


def test_height_scan_reads_the_stair_steps():
    """A lane placed on the platform of a pyramid-stairs tile, near its edge, reads at every point
    of its scan the height of the step beneath that point (from the stairs' own geometry)."""
    env = MotrixVectorEnv("G1WalkStairs", 4, compile=False, obs_groups=("policy", "critic"))
    env.reset(seed=0)
    rt, hm = env.runtime, env.runtime.program.model.heightfield
    col = hm.tile_kinds.index("pyramid_stairs")
    row = hm.tile_centers.shape[0] - 1  # the hardest row: the tallest steps
    sub = env.task.scene.terrain.sub_terrains[0]
    params = term_params(sub)  # with the function's defaults
    step, step_width = params["step_height"][1], params["step_width"]
    center = hm.tile_centers[row, col]
    qpos = env.sim.qpos.numpy()[:1].copy()
    shift = 0.9  # off the platform's centre towards +x: the scan reaches over its edge onto the steps
    qpos[0, :3] = center[0] + shift, center[1], center[2] + 0.79
    qpos[0, 3:7] = 1.0, 0.0, 0.0, 0.0
    env.sim.reset(np.array([0], np.int32), qpos, np.zeros((1, env.sim.model.nv)), full=False)
    rt.read_lanes(np.array([0]))
    from motrix_gym.mdp.terrain import height_scan, scan_points

    scan = height_scan(rt.ctx)[0].numpy()
    pts = scan_points((1.6, 1.0), 0.1).numpy()
    ground = qpos[0, 2] - 0.5 - scan  # what the scan says the ground is
    # the stairs: from the tile's edge, one step up every step_width, up to the platform
    half = env.task.scene.terrain.tile_size / 2
    edge = half - np.maximum(np.abs(pts[:, 0] + shift), np.abs(pts[:, 1]))
    inner = (2 * half - sub.platform) / 2
    want = np.floor(np.minimum(edge, inner) / step_width) * step
    want[edge >= inner] = np.floor(inner / step_width) * step
    # the height map samples every 0.1 m, so within a cell of a step's edge the ground is a ramp
    d = np.minimum(edge, inner)
    clear = np.abs(d - np.round(d / step_width) * step_width) > hm.spacing
    clear |= edge > inner + hm.spacing
    np.testing.assert_allclose(ground[clear], want[clear], atol=2e-3)
    assert clear.sum() > 100 and len(np.unique(np.round(want[clear], 3))) >= 3  # several steps seen
    np.testing.assert_allclose(ground, hm.height(qpos[0, 0] + pts[:, 0], qpos[0, 1] + pts[:, 1]), atol=2e-3)
    env.close()


@pytest.mark.parametrize("size, points", [((1.6, 1.0), 17 * 11), ((1.2, 0.6), 13 * 7)])
def test_the_scan_s_markers_are_the_ground_points_it_reads(size, points):
    """Drawn once though both groups observe the scan: each point on the ground (the height map
    under it), as far below the base as the observed scan says, rotated with the base's yaw; the
    task's scan, its defaults or its own parameters."""
    from motrix_gym.mdp.markers import Spheres
    from motrix_gym.mdp.terrain import scan_points

    own = {} if size == (1.6, 1.0) else {f"observations.{g}.height_scan.params.size": size
                                          for g in ("policy", "critic")}
    env = MotrixVectorEnv("Go1WalkStairs", 4, compile=False, obs_groups=("policy", "critic"), output="torch",
                          overrides=own)
    env.reset(seed=0)
    for _ in range(20):
        obs, *_ = env.step(torch.rand(4, 12) * 2 - 1)
    (sensed,) = [m for m in env._markers() if isinstance(m, Spheres)]
    pos = sensed.pos[:4].double().numpy()
    assert pos.shape == (4, points, 3)
    hm = env.runtime.program.model.heightfield
    np.testing.assert_allclose(pos[..., 2], hm.height(pos[..., 0], pos[..., 1]), atol=1e-5)
    root = env.sim.qpos[:4, :3].double().numpy()
    scan = obs["critic"][:, env.runtime.observation_columns("critic")["height_scan"]].double().numpy()
    read = root[:, 2:3] - 0.5 - pos[..., 2]
    inside = np.abs(read) < 0.99  # not clipped
    np.testing.assert_allclose(scan[inside], read[inside], atol=1e-4)
    assert inside.mean() > 0.9
    yaw = np.arctan2(pos[:, -1, 1] - pos[:, 0, 1], pos[:, -1, 0] - pos[:, 0, 0])  # first to last point
    pts = scan_points(size, 0.1).numpy()
    q = env.sim.qpos[:4, 3:7].double().numpy()
    base_yaw = np.arctan2(2 * (q[:, 0] * q[:, 3] + q[:, 1] * q[:, 2]), 1 - 2 * (q[:, 2] ** 2 + q[:, 3] ** 2))
    offset = np.arctan2(pts[-1, 1] - pts[0, 1], pts[-1, 0] - pts[0, 0])
    np.testing.assert_allclose(np.angle(np.exp(1j * (yaw - base_yaw - offset))), 0.0, atol=1e-4)
    env.close()


def test_a_scan_observed_with_other_parameters_in_another_group_is_drawn_for_each():
    """A wider scan for the critic than for the policy: both grids drawn, the policy's 187 points
    and the critic's 21 x 13."""
    from motrix_gym.mdp.markers import Spheres

    env = MotrixVectorEnv("Go1WalkStairs", 2, compile=False, obs_groups=("policy", "critic"), output="torch",
                          overrides={"observations.critic.height_scan.params.size": (2.0, 1.2)})
    env.reset(seed=0)
    env.step(torch.zeros(2, 12))
    sizes = sorted(m.pos.shape[1] for m in env._markers() if isinstance(m, Spheres))
    assert sizes == [17 * 11, 21 * 13]
    env.close()


def move_roots(env: MotrixVectorEnv, dx: float) -> None:
    """One step of every lane's episode (the curriculum judges episodes that ran), then its
    robot put ``dx`` m along x from where it stands (as if it had walked there)."""
    n = env.num_envs
    env.step(np.zeros(env.action_space.shape, np.float32))
    qpos = env.sim.qpos.numpy().copy()
    qpos[:, 0] += dx
    ids = np.arange(n, dtype=np.int32)
    env.sim.reset(ids, qpos, env.sim.qvel.numpy().copy(), full=False)
    env.runtime.read_lanes(ids)


def test_curriculum_moves_lanes_up_and_down():
    n = 32
    env = MotrixVectorEnv("G1WalkRough", n, compile=False, autoreset_mode="Disabled")
    env.reset(seed=0)
    cur, cmd = env.runtime.ctx.commands["terrain"], env.runtime.ctx.commands["base_velocity"]
    everyone = {"reset_mask": np.ones(n, bool)}
    start, mean0 = cur.level[:n].clone(), env.log["Curriculum/terrain_level"]
    move_roots(env, 6.0)  # farther than half a tile: every lane moves up one level
    env.reset(options=everyone)
    torch.testing.assert_close(cur.level[:n], start + 1)
    assert env.log["Curriculum/terrain_level"] == pytest.approx(mean0 + 1)
    up, asked = cur.level[:n].clone(), commanded_distance(cmd.value[:n, :2], cmd.value[:n, 2], 20.0)
    move_roots(env, 0.0)
    env.reset(options=everyone)  # nobody walked: lanes asked to walk move down, standing ones stay
    moving = asked * 0.5 > 0.5  # the spawn offset is at most 0.36 m
    assert moving.sum() > n // 2
    torch.testing.assert_close(cur.level[:n][moving], (up[moving] - 1).clamp(min=0))
    assert env.log["Curriculum/terrain_level"] < mean0 + 1
    origin = torch.from_numpy(env.runtime.program.model.heightfield.tile_centers).float()
    torch.testing.assert_close(cur.origin[:n], origin[cur.level[:n], cur.col[:n]])
    env.close()


speed = st.floats(-1.0, 1.0, allow_nan=False)


@settings(max_examples=50, deadline=None)
@given(vx=speed, vy=speed, wz=st.floats(-2.0, 2.0, allow_nan=False), seconds=st.floats(0.1, 20.0))
def test_commanded_distance_is_where_an_exact_tracker_ends_up(vx, vy, wz, seconds):
    steps = 20_000  # integrate the path: heading advances by wz, the base-frame velocity turns with it
    t = (torch.arange(steps, dtype=torch.float64) + 0.5) * (seconds / steps)
    c, s = torch.cos(wz * t), torch.sin(wz * t)
    end = torch.stack((c * vx - s * vy, s * vx + c * vy)).sum(-1) * (seconds / steps)
    got = commanded_distance(torch.tensor([[vx, vy]], dtype=torch.float64), torch.tensor([wz], dtype=torch.float64),
                             seconds)
    assert float(got[0]) == pytest.approx(float(end.norm()), abs=1e-6)


def test_curriculum_asks_a_turning_lane_only_for_the_arc_its_command_walks():
    n = 16
    env = MotrixVectorEnv("Go1WalkRough", n, compile=False, autoreset_mode="Disabled")
    env.reset(seed=0)
    cur, cmd = env.runtime.ctx.commands["terrain"], env.runtime.ctx.commands["base_velocity"]
    turning = torch.arange(n) % 2 == 0
    # 0.5 m/s for 20 s: 10 m straight ahead; turning at 1 rad/s, a circle 1 m across (chord 0.54 m)
    cmd.value[:n] = torch.tensor([0.5, 0.0, 0.0])
    cmd.value[:n, 2] = turning.float()
    level = cur.level[:n].clone()
    assert (level[turning] > 0).any() and (level[~turning] > 0).any()
    move_roots(env, 2.0)  # each walked 2 m (+- its spawn offset, at most 0.36 m)
    env.reset(options={"reset_mask": np.ones(n, bool)})
    torch.testing.assert_close(cur.level[:n][turning], level[turning])
    torch.testing.assert_close(cur.level[:n][~turning], (level[~turning] - 1).clamp(min=0))
    env.close()
