"""Terrain generation: a grid of tiles, each a sub-terrain at a difficulty, as one height map;
and the built-in sub-terrains' functions.

Deterministic: the same ``TerrainConfig`` (seed included) gives the same heights. Rows are
difficulty levels along x (``TerrainConfig.row_difficulty``); columns are assigned to the
sub-terrains by their proportions, along y. Every tile has a flat square platform in its centre,
where robots spawn; the built-in tiles meet at height 0 on their edges (rough ones: their bumps'
mean; stepping stones' pits and obstacles may reach them), and a flat border surrounds the grid.
A sub-terrain of one's own is a function of a ``Tile`` and its parameters, as the built-in ones
are.

The map is sampled every ``resolution`` m. ``scene.py`` turns it into a MuJoCo heightfield,
which MuJoCo triangulates by splitting each grid cell along the diagonal from sample (i, j) to
(i + 1, j + 1); ``math.heightfield`` answers height queries the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from motrix_gym.manager.config import SubTerrain, TerrainConfig
from motrix_gym.manager.resolver import TaskConfigError, check_params
from motrix_gym.manager.terms import Count, NonNegative, Positive


@dataclass(frozen=True)
class HeightMap:
    """Heights on a regular grid: ``heights[j, i]`` is the ground at x = x0 + i * spacing,
    y = y0 + j * spacing (``origin`` = (x0, y0)). ``tile_centers[r, c]`` is the world (x, y, z)
    of tile (r, c)'s platform centre; ``tile_kinds[c]`` the name of column c's sub-terrain."""

    heights: np.ndarray  # (ny, nx) float64
    origin: tuple[float, float]
    spacing: float
    tile_centers: np.ndarray  # (rows, cols, 3)
    tile_kinds: tuple[str, ...]
    tile_size: float
    platform: float  # side of the smallest spawn platform (m)

    @property
    def size(self) -> tuple[float, float]:
        """Extent in x and y (m)."""
        ny, nx = self.heights.shape
        return (nx - 1) * self.spacing, (ny - 1) * self.spacing

    def height(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Ground height at world (x, y), on MuJoCo's triangles (outside the map: its edge)."""
        ny, nx = self.heights.shape
        u = np.clip((np.asarray(x) - self.origin[0]) / self.spacing, 0.0, nx - 1.0)
        v = np.clip((np.asarray(y) - self.origin[1]) / self.spacing, 0.0, ny - 1.0)
        i = np.minimum(np.floor(u).astype(int), nx - 2)
        j = np.minimum(np.floor(v).astype(int), ny - 2)
        fu, fv = u - i, v - j
        h = self.heights
        h00, h10, h01, h11 = h[j, i], h[j, i + 1], h[j + 1, i], h[j + 1, i + 1]
        lower = h00 + fu * (h10 - h00) + fv * (h11 - h10)  # fu >= fv: triangle (0,0) (1,0) (1,1)
        upper = h00 + fv * (h01 - h00) + fu * (h11 - h01)  # fu < fv: triangle (0,0) (0,1) (1,1)
        return np.where(fu >= fv, lower, upper)


def columns(cfg: TerrainConfig) -> tuple[SubTerrain, ...]:
    """The sub-terrain of each column: proportional shares, largest remainders first, at least one
    column each."""
    total = sum(s.proportion for s in cfg.sub_terrains)
    share = [cfg.cols * s.proportion / total for s in cfg.sub_terrains]
    count = [max(1, int(np.floor(x))) for x in share]
    order = sorted(range(len(share)), key=lambda k: share[k] - np.floor(share[k]), reverse=True)
    k = 0
    while sum(count) < cfg.cols:
        count[order[k % len(order)]] += 1
        k += 1
    while sum(count) > cfg.cols:
        k = max(range(len(count)), key=lambda i: count[i])
        count[k] -= 1
    return tuple(s for s, c in zip(cfg.sub_terrains, count) for _ in range(c))


@dataclass(frozen=True)
class Tile:
    """One tile as a sub-terrain's function sees it: its samples at ``x``, ``y`` ((n, n), m from
    the tile's corner, ``spacing`` apart and symmetric about its centre), its side ``size``, the
    side of the flat ``platform`` in its middle, its row's ``difficulty`` in [0, 1], and the
    terrain's random generator, the only randomness a function may draw from (so that the terrain
    follows from its seed); ``edge``, ``inner`` and ``from_platform`` say where a sample lies."""

    x: np.ndarray
    y: np.ndarray
    spacing: float
    size: float
    platform: float
    difficulty: float
    rng: np.random.Generator

    @property
    def edge(self) -> np.ndarray:
        """Each sample's distance to the tile's border (m)."""
        return np.minimum.reduce([self.x, self.y, self.size - self.x, self.size - self.y])

    @property
    def inner(self) -> float:
        """How far the platform starts from the border (m)."""
        return (self.size - self.platform) / 2.0

    @property
    def from_platform(self) -> np.ndarray:
        """Each sample's distance out from the platform (m): 0 on it, ``inner`` at the border."""
        return np.maximum(self.inner - self.edge, 0.0)

    def lerp(self, r: tuple[float, float]) -> float:
        """A range (at difficulty 0, at difficulty 1) at this tile's difficulty."""
        return r[0] + (r[1] - r[0]) * self.difficulty


def flat(tile: Tile) -> np.ndarray:
    """Level ground."""
    return np.zeros_like(tile.x)


def rough(tile: Tile, noise: tuple[NonNegative, NonNegative] = (0.02, 0.10), noise_step: Positive = 0.1) -> np.ndarray:
    """Zero-mean uniform bumps of ``noise`` m peak to peak, one per ``noise_step`` m square."""
    a = tile.lerp(noise)
    n = tile.x.shape[0]
    k = max(1, round(noise_step / tile.spacing))
    coarse = tile.rng.uniform(0.0, a, (-(-n // k), -(-n // k)))
    h = np.repeat(np.repeat(coarse, k, 0), k, 1)[:n, :n]
    return np.where(tile.edge >= tile.inner, 0.0, h - a / 2.0)


def pyramid_stairs(tile: Tile, step_height: tuple[NonNegative, NonNegative] = (0.05, 0.20),
                   step_width: Positive = 0.3) -> np.ndarray:
    """Steps ``step_height`` m high and ``step_width`` m deep, rising from the border to the platform."""
    edge, inner = tile.edge, tile.inner
    level = np.floor(np.minimum(edge, inner) / step_width)
    top = np.floor(inner / step_width)
    return np.where(edge >= inner, top, level) * tile.lerp(step_height)


def inverted_pyramid_stairs(tile: Tile, step_height: tuple[NonNegative, NonNegative] = (0.05, 0.20),
                            step_width: Positive = 0.3) -> np.ndarray:
    """``pyramid_stairs`` falling to the platform."""
    return -pyramid_stairs(tile, step_height, step_width)


def pyramid_slope(tile: Tile, slope: tuple[NonNegative, NonNegative] = (0.0, 0.4)) -> np.ndarray:
    """Ground rising at ``slope`` (rise over run) from the border to the platform."""
    return tile.lerp(slope) * np.minimum(tile.edge, tile.inner)


def inverted_pyramid_slope(tile: Tile, slope: tuple[NonNegative, NonNegative] = (0.0, 0.4)) -> np.ndarray:
    """``pyramid_slope`` falling to the platform."""
    return -pyramid_slope(tile, slope)


def wave(tile: Tile, amplitude: tuple[NonNegative, NonNegative] = (0.0, 0.2), waves: Count = 3) -> np.ndarray:
    """``waves`` smooth ridges ``amplitude`` m high ringing the platform, evenly spaced between it
    and the border (level with both)."""
    return tile.lerp(amplitude) / 2.0 * (1.0 - np.cos(2.0 * np.pi * waves * tile.from_platform / tile.inner))


def stepping_stones(tile: Tile, stone: tuple[Positive, Positive] = (0.8, 0.35),
                    gap: tuple[NonNegative, NonNegative] = (0.1, 0.35), depth: NonNegative = 0.5) -> np.ndarray:
    """Square stones ``stone`` m wide, ``gap`` m apart on a grid centred on the tile, level with the
    platform, over pits ``depth`` m deep."""
    side = tile.lerp(stone)
    pitch = side + tile.lerp(gap)

    def on_stone(u: np.ndarray) -> np.ndarray:  # within half a stone of the nearest stone's centre line
        return np.abs((u - tile.size / 2.0 + pitch / 2.0) % pitch - pitch / 2.0) <= side / 2.0

    return np.where((tile.edge >= tile.inner) | (on_stone(tile.x) & on_stone(tile.y)), 0.0, -depth)


def gap(tile: Tile, width: tuple[NonNegative, NonNegative] = (0.1, 0.5), depth: NonNegative = 0.5) -> np.ndarray:
    """A trench ``width`` m wide and ``depth`` m deep around the platform."""
    out = tile.from_platform
    return np.where((out > 0.0) & (out <= tile.lerp(width)), -depth, 0.0)


def obstacles(tile: Tile, height: tuple[NonNegative, NonNegative] = (0.05, 0.2), count: Count = 40,
              width: tuple[Positive, Positive] = (0.3, 1.0)) -> np.ndarray:
    """``count`` boxes at random places on the tile (the platform stays clear), their sides drawn
    from ``width`` m, each ``height`` m above or below the ground at random (a later box covers
    an earlier one)."""
    centre = tile.rng.uniform(0.0, tile.size, (count, 2))
    half = tile.rng.uniform(*width, (count, 2)) / 2.0
    top = tile.rng.choice((-1.0, 1.0), count) * tile.lerp(height)
    # sample k lies (k + 0.5) spacings from the corner: the first and last index each box covers
    first = np.maximum(np.ceil((centre - half) / tile.spacing - 0.5), 0).astype(int)
    last = np.floor((centre + half) / tile.spacing - 0.5).astype(int)
    h = np.zeros_like(tile.x)
    for (i0, j0), (i1, j1), z in zip(first, last, top):
        h[j0:j1 + 1, i0:i1 + 1] = z
    return np.where(tile.edge >= tile.inner, 0.0, h)


BUILT_IN = (flat, rough, pyramid_stairs, inverted_pyramid_stairs, pyramid_slope, inverted_pyramid_slope, wave,
            stepping_stones, gap, obstacles)


def tile(sub: SubTerrain, difficulty: float, n: int, spacing: float, rng: np.random.Generator) -> np.ndarray:
    """(n, n) heights of one tile of ``sub``; sample (j, i) sits at ((i + 0.5) * spacing,
    (j + 0.5) * spacing) from the tile's corner, so the tile is symmetric about its centre."""
    c = (np.arange(n) + 0.5) * spacing
    x, y = np.meshgrid(c, c)
    where = f"sub-terrain {sub.name!r}"
    try:
        h = sub.func(Tile(x, y, spacing, n * spacing, sub.platform, difficulty, rng), **sub.params)
    except Exception as e:
        raise TaskConfigError(f"{where}: {type(e).__name__}: {e}") from e
    h = np.asarray(h)
    if h.shape != (n, n) or h.dtype.kind not in "fiu" or not np.isfinite(h).all():
        raise TaskConfigError(f"{where}: its function must return ({n}, {n}) finite real heights, got a {h.dtype} "
                              f"array of shape {h.shape}")
    return h


def generate(cfg: TerrainConfig) -> HeightMap:
    """The height map of ``cfg`` (which must have sub-terrains), centred on the world origin."""
    if cfg.flat:
        raise ValueError("a flat terrain is a plane, not a height map")
    (n, b), (nx, ny) = cfg.cells, cfg.samples
    heights = np.zeros((ny, nx))
    for sub in cfg.sub_terrains:
        check_params(sub.func, sub.params, 1, f"sub-terrain {sub.name!r}", {})
    rng = np.random.default_rng(cfg.seed)
    kinds = columns(cfg)
    for r in range(cfg.rows):
        for c, sub in enumerate(kinds):
            heights[b + c * n:b + (c + 1) * n, b + r * n:b + (r + 1) * n] = tile(sub, cfg.row_difficulty(r), n,
                                                                                  cfg.resolution, rng)
    x0 = -(nx - 1) * cfg.resolution / 2.0
    y0 = -(ny - 1) * cfg.resolution / 2.0
    centers = np.zeros((cfg.rows, cfg.cols, 3))
    for r in range(cfg.rows):
        for c in range(cfg.cols):
            # the tile's middle lies between its two central samples (n is even) or on one
            i, j = b + r * n + (n - 1) / 2.0, b + c * n + (n - 1) / 2.0
            centers[r, c, :2] = x0 + i * cfg.resolution, y0 + j * cfg.resolution
    hm = HeightMap(heights, (x0, y0), cfg.resolution, centers, tuple(s.name for s in kinds), cfg.tile_size,
                   min(s.platform for s in cfg.sub_terrains))
    centers[..., 2] = hm.height(centers[..., 0], centers[..., 1])
    return hm
