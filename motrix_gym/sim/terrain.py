"""Terrain generation: a grid of tiles, each a sub-terrain at a difficulty, as one height map.

Deterministic: the same ``TerrainConfig`` (seed included) gives the same heights. Rows are
difficulty levels along x (row r: r / (rows - 1)); columns are assigned to the sub-terrains by
their proportions, along y. Every tile has a flat square platform in its centre, where robots
spawn; tiles meet at height 0 on their edges, and a flat border surrounds the grid.

The map is sampled every ``resolution`` m. ``scene.py`` turns it into a MuJoCo heightfield,
which MuJoCo triangulates by splitting each grid cell along the diagonal from sample (i, j) to
(i + 1, j + 1); ``math.heightfield`` answers height queries the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from motrix_gym.manager.config import SubTerrain, TerrainConfig


@dataclass(frozen=True)
class HeightMap:
    """Heights on a regular grid: ``heights[j, i]`` is the ground at x = x0 + i * spacing,
    y = y0 + j * spacing (``origin`` = (x0, y0)). ``tile_centers[r, c]`` is the world (x, y, z)
    of tile (r, c)'s platform centre; ``tile_kinds[c]`` the sub-terrain of column c."""

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


def lerp(r: tuple[float, float], d: float) -> float:
    return r[0] + (r[1] - r[0]) * d


def tile(sub: SubTerrain, difficulty: float, n: int, spacing: float, rng: np.random.Generator) -> np.ndarray:
    """(n, n) heights of one tile; sample (j, i) sits at ((i + 0.5) * spacing, (j + 0.5) * spacing)
    from the tile's corner, so the tile is symmetric about its centre."""
    size = n * spacing
    c = (np.arange(n) + 0.5) * spacing
    x, y = np.meshgrid(c, c)
    edge = np.minimum.reduce([x, y, size - x, size - y])  # distance to the tile's border
    inner = (size - sub.platform) / 2.0  # where the platform starts, from the border
    kind = sub.kind
    if kind == "flat":
        return np.zeros((n, n))
    if kind == "rough":
        a = lerp(sub.noise, difficulty)
        k = max(1, round(sub.noise_step / spacing))
        coarse = rng.uniform(0.0, a, (-(-n // k), -(-n // k)))
        h = np.repeat(np.repeat(coarse, k, 0), k, 1)[:n, :n]
        return np.where(edge >= inner, 0.0, h - a / 2.0)  # zero-mean bumps; a flat platform
    if kind in ("pyramid_stairs", "inverted_pyramid_stairs"):
        step = lerp(sub.step_height, difficulty)
        level = np.floor(np.minimum(edge, inner) / sub.step_width)
        top = np.floor(inner / sub.step_width)
        h = np.where(edge >= inner, top, level) * step
        return h if kind == "pyramid_stairs" else -h
    slope = lerp(sub.slope, difficulty)
    h = slope * np.minimum(edge, inner)
    return h if kind == "pyramid_slope" else -h


def generate(cfg: TerrainConfig) -> HeightMap:
    """The height map of ``cfg`` (which must have sub-terrains), centred on the world origin."""
    if cfg.flat:
        raise ValueError("a flat terrain is a plane, not a height map")
    n = round(cfg.tile_size / cfg.resolution)
    b = round(cfg.border / cfg.resolution)
    nx, ny = cfg.samples
    heights = np.zeros((ny, nx))
    rng = np.random.default_rng(cfg.seed)
    kinds = columns(cfg)
    for r in range(cfg.rows):
        difficulty = r / (cfg.rows - 1) if cfg.rows > 1 else 1.0
        for c, sub in enumerate(kinds):
            heights[b + c * n:b + (c + 1) * n, b + r * n:b + (r + 1) * n] = tile(sub, difficulty, n, cfg.resolution,
                                                                                  rng)
    x0 = -(nx - 1) * cfg.resolution / 2.0
    y0 = -(ny - 1) * cfg.resolution / 2.0
    centers = np.zeros((cfg.rows, cfg.cols, 3))
    for r in range(cfg.rows):
        for c in range(cfg.cols):
            # the tile's middle lies between its two central samples (n is even) or on one
            i, j = b + r * n + (n - 1) / 2.0, b + c * n + (n - 1) / 2.0
            centers[r, c, :2] = x0 + i * cfg.resolution, y0 + j * cfg.resolution
    hm = HeightMap(heights, (x0, y0), cfg.resolution, centers, tuple(s.kind for s in kinds), cfg.tile_size,
                   min(s.platform for s in cfg.sub_terrains))
    centers[..., 2] = hm.height(centers[..., 0], centers[..., 1])
    return hm
