"""Command terms: per-lane stateful processes with ``reset`` / ``update`` / ``advance`` hooks (and
``placed``, after a reset's terms, for those that read the new state).

State lives in tensors allocated once and written in place; every draw comes from the lane RNG
and advances only the lanes that draw.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor

from motrix_gym.arguments import is_number
from motrix_gym.manager.resolver import SensorSlice
from motrix_gym.manager.terms import Positive, Probability
from motrix_gym.math import quat_apply, yaw_cos_sin
from motrix_gym.mdp.command_names import VelocityCommandName
from motrix_gym.mdp.markers import COMMAND, MEASURED, Arrows
from motrix_gym.mdp.observations import base_lin_vel, in_contact
from motrix_gym.runtime.context import Context


def velocity_triple(value: object, what: str) -> tuple[float, float, float]:
    """``value`` as (vx, vy, yaw rate): three finite real numbers, or a ValueError naming ``what``."""
    values = () if isinstance(value, (str, bytes)) else tuple(value) if isinstance(value, Iterable) else ()
    if len(values) != 3 or not all(map(is_number, values)):
        raise ValueError(f"{what} must be (vx, vy, yaw_rate), three finite numbers, got {value!r}")
    return tuple(float(v) for v in values)


ARROW_SCALE = 0.5  # m of a rendered velocity arrow per m/s: 1 m/s fits a close camera's frame


class VelocityCommand:
    """Target base velocity ``value = (vx, vy, wz)``, uniform in ``ranges``.

    A fraction ``standing_fraction`` of draws are zero (standing lanes). Resampled at reset and
    every ``resample_s`` seconds. Rendered, its arrows start ``marker_height`` (m) above the base.

    ``levels``: a per-lane curriculum over the ranges, each level a factor on them, easiest first
    (one level: none). A lane starts at the first. At a reset that ends an episode (one that ran
    a step), a lane whose episode ran to its time-out with a mean planar velocity error below
    ``good_error`` (m/s) moves one level up, one whose episode ended early (a fall) one down.
    Like the terrain curriculum it reads nothing of other lanes, so a lane's run does not depend
    on how many run beside it.

    ``heading``: a range of world yaw (rad). Each draw then picks a target heading in it instead
    of a yaw rate, and the yaw rate asked is a heading controller, ``clip(heading_gain *
    wrap(target - yaw), *ranges[2])`` (the clip scaled by the lane's level), recomputed every
    step and after a reset has placed the robot; standing lanes stay at zero.

    ``hold(value)`` asks every lane for one command from then on, as a person steering the robots
    live does (``play --viewer``); ``ranges`` stay the limits such a person keeps within.
    """

    def __init__(self, env: Context, ranges: tuple = ((-1.0, 1.0), (-1.0, 1.0), (-1.0, 1.0)),
                 standing_fraction: Probability = 0.2, resample_s: Positive = 10.0, marker_height: float = 0.5,
                 levels: tuple[float, ...] = (1.0,), good_error: Positive = 0.25,
                 heading: tuple[float, float] | None = None, heading_gain: Positive = 0.5) -> None:
        pairs = tuple(ranges) if isinstance(ranges, (tuple, list)) else ()
        if len(pairs) != 3 or not all(len(r) == 2 and all(map(is_number, r)) and r[0] <= r[1] for r in pairs):
            raise ValueError(f"velocity command: ranges must be three (lo, hi) pairs of finite numbers with "
                             f"lo <= hi (vx, vy, yaw rate), got {ranges!r}")
        if not (isinstance(levels, (tuple, list)) and levels and all(map(is_number, levels)) and levels[0] > 0
                and all(a <= b for a, b in zip(levels, levels[1:]))):
            raise ValueError(f"velocity command: levels must be increasing factors > 0, got {levels!r}")
        if heading is not None and not (isinstance(heading, (tuple, list)) and len(heading) == 2
                                        and all(map(is_number, heading)) and heading[0] <= heading[1]):
            raise ValueError(f"velocity command: heading must be (lo, hi) with lo <= hi, got {heading!r}")
        L = env.num_lanes
        self.lo = torch.tensor([r[0] for r in ranges], dtype=torch.float32, device=env.device)
        self.hi = torch.tensor([r[1] for r in ranges], dtype=torch.float32, device=env.device)
        self.ranges = tuple(tuple(float(v) for v in r) for r in ranges)
        # a tensor, as are the ranges, so that ``hold`` changes what compiled graphs read
        self.standing_fraction = torch.tensor(float(standing_fraction), device=env.device)
        self.resample_steps = max(1, round(resample_s / env.step_dt))
        self.value = torch.zeros(L, 3, device=env.device)
        self.standing = torch.ones(L, dtype=torch.bool, device=env.device)
        self.steps_left = torch.zeros(L, dtype=torch.int64, device=env.device)
        self.marker_offset = torch.tensor([0.0, 0.0, marker_height], device=env.device)
        self.levels = torch.tensor(levels, dtype=torch.float32, device=env.device)
        self.good_error = good_error
        self.num_envs = env.num_envs
        self.level = torch.zeros(L, dtype=torch.long, device=env.device)
        self.error_sum = torch.zeros(L, device=env.device)  # planar velocity error over the episode
        self.started = torch.zeros(L, dtype=torch.bool, device=env.device)  # the lane has had an episode
        self.heading, self.heading_gain = heading, heading_gain
        # the heading asked (rad, world)
        self.target = torch.zeros(L, device=env.device) if heading is not None else None

    @property
    def curriculum(self) -> bool:
        return len(self.levels) > 1

    def _resample(self, env: Context, mask: torch.Tensor) -> None:
        u = env.rng.uniform((4,), mask)
        standing = u[:, 3] < self.standing_fraction
        value = self.lo + (self.hi - self.lo) * u[:, :3]
        if self.curriculum:
            value = value * self.levels[self.level].unsqueeze(-1)
        value = torch.where(standing.unsqueeze(-1), 0.0, value)
        m = mask.unsqueeze(-1)
        self.value.copy_(torch.where(m, value, self.value))
        self.standing.copy_(torch.where(mask, standing, self.standing))
        self.steps_left.copy_(torch.where(mask, self.resample_steps, self.steps_left))
        if self.heading is not None:
            lo, hi = self.heading
            self.target.copy_(torch.where(mask, lo + (hi - lo) * u[:, 2], self.target))

    @property
    def can_hold(self) -> bool:
        """Whether ``hold`` can set the commands: not with heading control or a curriculum."""
        return self.heading is None and not self.curriculum

    def hold(self, value: Iterable[float]) -> None:
        """Every lane's command is ``value`` = (vx, vy, yaw rate) from now on, through resamples
        and resets, as if the task had been made with it (zero: the lanes stand); the lane RNG
        streams advance as they would. Not with heading control or a curriculum, which make
        commands of their own."""
        if not self.can_hold:
            raise ValueError("velocity command: hold gives every lane one command; this one "
                             f"{'draws headings' if self.heading is not None else 'has a curriculum'}")
        fixed = velocity_triple(value, "velocity command: hold's value")
        v = torch.tensor(fixed, dtype=torch.float32, device=self.value.device)
        standing = not any(fixed)
        self.lo.copy_(v)
        self.hi.copy_(v)
        self.standing_fraction.fill_(float(standing))
        self.value.copy_(v.expand_as(self.value))
        self.standing.fill_(standing)

    def _steer(self, env: Context, mask: Tensor | None = None) -> None:
        """The yaw rate of heading control, for the lanes in ``mask`` (all when None)."""
        c, s = yaw_cos_sin(env.root_quat())
        ct, st = torch.cos(self.target), torch.sin(self.target)
        error = torch.atan2(st * c - ct * s, ct * c + st * s)  # target - yaw, wrapped to [-pi, pi]
        lo, hi = self.lo[2], self.hi[2]
        if self.curriculum:
            f = self.levels[self.level]
            lo, hi = lo * f, hi * f
        rate = torch.where(self.standing, 0.0, (self.heading_gain * error).clamp(lo, hi))
        self.value[:, 2].copy_(rate if mask is None else torch.where(mask, rate, self.value[:, 2]))

    def reset(self, env: Context, mask: torch.Tensor) -> None:
        if self.curriculum:
            mean_error = self.error_sum / env.episode_step.clamp(min=1)
            ran = env.episode_ran()
            up = ran & env.truncated & (mean_error < self.good_error)
            down = ran & ~env.truncated
            level = (self.level + up.long() - down.long()).clamp(0, len(self.levels) - 1)
            level = torch.where(self.started, level, 0)
            self.level.copy_(torch.where(mask, level, self.level))
            self.started.logical_or_(mask)
            self.error_sum.masked_fill_(mask, 0.0)
        self._resample(env, mask)

    def placed(self, env: Context, mask: Tensor) -> None:
        """After a reset has placed the robots of the lanes in ``mask``: their heading control."""
        if self.heading is not None:
            self._steer(env, mask)

    def update(self, env: Context) -> None:
        self.steps_left.sub_(1)
        self._resample(env, self.steps_left <= 0)
        if self.heading is not None:
            self._steer(env)

    def advance(self, env: Context) -> None:
        if self.curriculum:
            self.error_sum.add_(self._planar_error(env))

    def restart(self) -> None:
        """Every lane starts again at the first level at its next reset."""
        self.started.fill_(False)

    def log_totals(self) -> dict[str, tuple[float, float]]:
        """The mean factor on the ranges, as a sum and a count (summed over ranks when distributed)."""
        if not self.curriculum:
            return {}
        return {"Curriculum/command_scale": (float(self.levels[self.level[:self.num_envs]].sum()),
                                             float(self.num_envs))}

    def _planar_error(self, env: Context) -> Tensor:
        """(lanes,) m/s between the commanded and the base's planar velocity, in the base frame."""
        return (self.value[:, :2] - base_lin_vel(env)[:, :2]).norm(dim=-1)

    def metrics(self, env: Context) -> dict[str, Tensor]:
        """Per-lane tracking errors now: planar velocity (m/s, base frame) and yaw rate (rad/s)."""
        return {"lin_vel_error": self._planar_error(env),
                "yaw_rate_error": (self.value[:, 2] - env.root_ang_vel_b()[:, 2]).abs()}

    def markers(self, env: Context) -> tuple[Arrows, Arrows]:
        """The commanded planar velocity (green) and the base's own (blue), in the world frame,
        ``ARROW_SCALE`` m long per m/s."""
        c, s = yaw_cos_sin(env.root_quat())
        vx, vy = self.value[:, 0], self.value[:, 1]
        asked = ARROW_SCALE * torch.stack((c * vx - s * vy, s * vx + c * vy, torch.zeros_like(vx)), dim=-1)
        done = ARROW_SCALE * env.root_lin_vel_w() * torch.tensor([1.0, 1.0, 0.0], device=env.device)
        start = env.root_pos() + self.marker_offset
        return (Arrows(start[:, None], (start + asked)[:, None], COMMAND),
                Arrows(start[:, None], (start + done)[:, None], MEASURED))


class GaitClock:
    """A gait phase in [0, 1) advancing by ``step_dt / period`` (bipeds: the left foot's stance in
    the first half, the right's in the second); ``command`` names the velocity command whose
    standing lanes need no gait."""

    def __init__(self, env: Context, command: VelocityCommandName, period: Positive = 0.8) -> None:
        self.command = command
        self.period = period
        self.rate = env.step_dt / period
        self.phase = torch.zeros(env.num_lanes, device=env.device)

    def reset(self, env: Context, mask: torch.Tensor) -> None:
        self.phase.masked_fill_(mask, 0.0)

    def update(self, env: Context) -> None:
        pass

    def advance(self, env: Context) -> None:
        self.phase.copy_(torch.remainder(self.phase + self.rate, 1.0))


class FeetState:
    """Per foot, from its contact sensor and its body: ``contact``, ``first_contact`` (touched down
    this step), ``air_time`` (s in the air so far), ``last_air_time`` (of the last swing), and the
    sole point's world position ``pos`` and velocity ``vel`` (by differences over the control
    step), all (lanes, feet, ...). ``sole`` is each foot's sole point in its body's frame."""

    def __init__(self, env: Context, sensors: tuple, bodies: tuple, sole: tuple) -> None:
        if not len(sensors) == len(bodies) == len(sole):
            raise ValueError(f"feet: {len(sensors)} sensors, {len(bodies)} bodies and {len(sole)} sole points")
        L, k, dev = env.num_lanes, len(sensors), env.device
        self.sensors: tuple[SensorSlice, ...] = sensors
        self.bodies = torch.cat([b.reshape(-1)[:1] for b in bodies]).to(dev)
        self.sole = torch.tensor(sole, dtype=torch.float32, device=dev)
        self.contact = torch.zeros(L, k, dtype=torch.bool, device=dev)
        self.first_contact = torch.zeros(L, k, dtype=torch.bool, device=dev)
        self.air_time = torch.zeros(L, k, device=dev)
        self.last_air_time = torch.zeros(L, k, device=dev)
        self.pos = torch.zeros(L, k, 3, device=dev)
        self.vel = torch.zeros(L, k, 3, device=dev)
        self.fresh = torch.ones(L, dtype=torch.bool, device=dev)  # no position since the reset yet

    def sole_pos(self, env: Context) -> Tensor:
        q = env.xquat[:, self.bodies]
        return env.xpos[:, self.bodies] + quat_apply(q, self.sole.expand(q.shape[0], -1, -1))

    def reset(self, env: Context, mask: torch.Tensor) -> None:
        m = mask.unsqueeze(-1)
        self.air_time.masked_fill_(m, 0.0)
        self.last_air_time.masked_fill_(m, 0.0)
        self.first_contact.masked_fill_(m, False)
        self.contact.masked_fill_(m, True)
        self.vel.masked_fill_(m.unsqueeze(-1), 0.0)
        # the reset pose is written after the commands' resets: velocities start from the
        # position the first update finds
        self.fresh.logical_or_(mask)

    def update(self, env: Context) -> None:
        contact = in_contact(env, self.sensors)
        first = contact & (self.air_time > 0)
        self.first_contact.copy_(first)
        self.last_air_time.copy_(torch.where(first, self.air_time, self.last_air_time))
        self.air_time.copy_(torch.where(contact, 0.0, self.air_time + env.step_dt))
        self.contact.copy_(contact)
        pos = self.sole_pos(env)
        self.vel.copy_(torch.where(self.fresh.view(-1, 1, 1), 0.0, (pos - self.pos) / env.step_dt))
        self.pos.copy_(pos)
        self.fresh.fill_(False)

    def advance(self, env: Context) -> None:
        pass
