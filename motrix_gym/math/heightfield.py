"""Ground heights from a height map, batched, on the triangles MuJoCo collides with.

MuJoCo splits each cell of a heightfield along the diagonal from sample (i, j) to (i + 1, j + 1)
and interpolates linearly on the two triangles; ``HeightField.height`` does the same, so spawn
heights, height scans and heights above ground agree with the contacts the physics makes.
"""

from __future__ import annotations

import torch
from torch import Tensor


class HeightField:
    """``heights[j, i]``: the ground at (x0 + i * spacing, y0 + j * spacing). Points outside the
    grid get the height of its nearest edge. A flat ground is a 2 x 2 grid of zeros."""

    def __init__(self, heights: Tensor, origin: tuple[float, float], spacing: float) -> None:
        if heights.dim() != 2 or min(heights.shape) < 2:
            raise ValueError(f"heights must be a (ny, nx) grid with nx, ny >= 2, got {tuple(heights.shape)}")
        self.heights = heights.to(torch.float32).contiguous()
        self.flat_heights = self.heights.flatten()
        self.ny, self.nx = heights.shape
        self.x0, self.y0 = float(origin[0]), float(origin[1])
        self.inv_spacing = 1.0 / float(spacing)

    @classmethod
    def flat(cls, device: torch.device | str = "cpu") -> HeightField:
        return cls(torch.zeros(2, 2, device=device), (-1e6, -1e6), 2e6)

    def height(self, x: Tensor, y: Tensor) -> Tensor:
        """Ground height under world points (x, y), any matching shapes."""
        u = ((x - self.x0) * self.inv_spacing).clamp(0.0, self.nx - 1.0)
        v = ((y - self.y0) * self.inv_spacing).clamp(0.0, self.ny - 1.0)
        i = u.floor().clamp(max=self.nx - 2)
        j = v.floor().clamp(max=self.ny - 2)
        fu, fv = u - i, v - j
        k = j.long() * self.nx + i.long()
        h = self.flat_heights
        h00, h10 = h[k], h[k + 1]
        h01, h11 = h[k + self.nx], h[k + self.nx + 1]
        lower = h00 + fu * (h10 - h00) + fv * (h11 - h10)
        upper = h00 + fv * (h01 - h00) + fu * (h11 - h01)
        return torch.where(fu >= fv, lower, upper)
