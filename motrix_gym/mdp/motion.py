"""Whole-body motion tracking terms: the motion command with its start-frame sampler, and the
observations, rewards, terminations, resets and events that read it.

The command holds a :class:`~motrix_gym.motion.loader.MotionCorpus` (all bodies of the robot in
model order, joints in hinge order) and, per lane, the current reference frame. Each step it
advances one frame and refreshes the reference of the anchor and the tracked bodies, also
re-anchored to the robot: translated to the robot's anchor (keeping the reference height) and
turned by the yaw between the two anchors, so body terms measure posture, not drift.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from motrix_gym.manager.terms import Fraction, NonNegative, NonNegativeInt, Positive, Probability
from motrix_gym.math import (
    normalize,
    quat_angle,
    quat_apply,
    quat_apply_inverse,
    quat_conjugate,
    quat_mul,
    quat_rot6d,
    yaw_quat,
)
from motrix_gym.mdp.command_names import MotionCommandName
from motrix_gym.mdp.markers import REFERENCE, Spheres
from motrix_gym.motion.loader import load_corpus
from motrix_gym.runtime.context import Context

SAMPLING = ("adaptive", "uniform", "start", "sequential")


class MotionCommand:
    """The reference motion of each lane.

    Args:
        clips: motion files (or folders of them), resampled to the control rate on load.
        anchor: the body whose pose anchors the reference (``torso_link`` for G1).
        bodies: the tracked bodies.
        sampling: start frames: ``"adaptive"`` (bins of ``bin_s`` seconds weighted by recent
            failures, mixed with a uniform ``floor``, smoothed towards earlier bins by
            ``smoothing`` ** k over ``kernel`` bins), ``"uniform"``, ``"start"`` (the first frame
            of a uniformly drawn clip) or ``"sequential"`` (clip after clip; after the step at a
            clip's last frame the next one starts with a teleport that does not end the episode).
        alpha: weight of one reset's failures in the moving average of failures per bin.
    """

    def __init__(self, env: Context, clips: tuple, anchor: Tensor, bodies: Tensor,
                 sampling: str = "adaptive", bin_s: Positive = 1.0, floor: Probability = 0.1,
                 alpha: Fraction = 0.001, smoothing: Probability = 0.8, kernel: NonNegativeInt = 3) -> None:
        if sampling not in SAMPLING:
            raise ValueError(f"motion command: sampling must be one of {SAMPLING}, got {sampling!r}")
        corpus = load_corpus(list(clips), env.joint_names, env.robot_body_names, fps=1.0 / env.step_dt)
        if abs(corpus.fps * env.step_dt - 1.0) > 1e-6:
            raise ValueError(f"motion command: corpus at {corpus.fps} fps, the task steps at {1 / env.step_dt:g} Hz")
        self.sampling, self.floor, self.alpha = sampling, floor, alpha
        corpus = self.c = corpus.to(env.device)
        # the corpus holds the robot's bodies, which follow one another from the root in the model
        self.anchor = int(anchor[0]) - env.root_body
        self.anchor_body = int(anchor[0])
        self.bodies = bodies - env.root_body
        self.body_ids = bodies
        L, B = env.num_lanes, len(bodies)
        dev = env.device
        ends = corpus.clip_start + corpus.clip_length - 1
        self.clip_last = ends
        self.frame = torch.zeros(L, dtype=torch.long, device=dev)
        self.clip = torch.zeros(L, dtype=torch.long, device=dev)
        # bins of start frames (the last frame of a clip cannot start an episode)
        per_bin = max(1, round(bin_s * corpus.fps))
        starts, lens, clip_of_bin = [], [], []
        for c, (s, n) in enumerate(zip(corpus.clip_start.tolist(), corpus.clip_length.tolist())):
            for b0 in range(0, n - 1, per_bin):
                starts.append(s + b0)
                lens.append(min(per_bin, n - 1 - b0))
                clip_of_bin.append(c)
        self.bin_start = torch.tensor(starts, dtype=torch.long, device=dev)
        self.bin_len = torch.tensor(lens, dtype=torch.long, device=dev)
        self.bin_clip = torch.tensor(clip_of_bin, dtype=torch.long, device=dev)
        nb = len(starts)
        self.bin_of_frame = torch.zeros(corpus.num_frames, dtype=torch.long, device=dev)
        for b, (s, n) in enumerate(zip(starts, lens)):
            self.bin_of_frame[s:s + n + 1] = b
        # failure at bin j raises the chance to start k bins earlier, by smoothing ** k
        i, j = torch.meshgrid(torch.arange(nb), torch.arange(nb), indexing="ij")
        near = (j - i >= 0) & (j - i <= kernel) & (self.bin_clip[i] == self.bin_clip[j])
        self.smooth = torch.where(near, smoothing ** (j - i).float(), 0.0).to(dev)
        self.failures = torch.zeros(nb, device=dev)
        self.probs = torch.full((nb,), 1.0 / nb, device=dev)
        # failures per bin at the lanes that reset, summed over every process (see shared_stats)
        self.stats = torch.zeros(nb, device=dev) if sampling == "adaptive" else None
        self.started = torch.zeros(L, dtype=torch.bool, device=dev)  # the lane's episode began since the restart
        # Everything the reference at a frame holds, packed in one row per frame: refreshing a
        # lane is one contiguous gather, not eight scattered ones over every body of the corpus.
        parts = (corpus.joint_pos, corpus.joint_vel, corpus.body_pos_w[:, self.bodies],
                 corpus.body_quat_w[:, self.bodies], corpus.body_lin_vel_w[:, self.bodies],
                 corpus.body_ang_vel_w[:, self.bodies], corpus.body_pos_w[:, self.anchor],
                 corpus.body_quat_w[:, self.anchor])
        self.table = torch.cat([x.reshape(x.shape[0], -1) for x in parts], dim=-1)
        self.reference = torch.zeros(L, self.table.shape[1], device=dev)
        views, start = [], 0
        for x in parts:
            size = math.prod(x.shape[1:])
            views.append(self.reference[:, start:start + size].unflatten(-1, x.shape[1:]))
            start += size
        (self.joint_pos, self.joint_vel, self.body_pos_w, self.body_quat_w, self.body_lin_vel_w,
         self.body_ang_vel_w, self.anchor_pos_w, self.anchor_quat_w) = views
        self.body_pos_rel_w = torch.zeros(L, B, 3, device=dev)  # re-anchored to the robot
        self.body_quat_rel_w = torch.zeros(L, B, 4, device=dev)

    # ---------------------------------------------------------------- reference at the frames
    def root_state(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Reference root position, orientation, linear and angular velocity (world), per lane."""
        f = self.frame
        return (self.c.body_pos_w[f, 0], self.c.body_quat_w[f, 0], self.c.body_lin_vel_w[f, 0],
                self.c.body_ang_vel_w[f, 0])

    def refresh(self, env: Context) -> None:
        self.reference.copy_(self.table[self.frame])
        robot_pos, robot_quat = env.xpos[:, self.anchor_body], env.xquat[:, self.anchor_body]
        delta_pos = torch.cat((robot_pos[:, :2], self.anchor_pos_w[:, 2:]), dim=-1)
        delta_quat = yaw_quat(quat_mul(robot_quat, quat_conjugate(self.anchor_quat_w))).unsqueeze(1)
        self.body_quat_rel_w.copy_(quat_mul(delta_quat, self.body_quat_w))
        self.body_pos_rel_w.copy_(delta_pos.unsqueeze(1) + quat_apply(
            delta_quat, self.body_pos_w - self.anchor_pos_w.unsqueeze(1)))

    # ---------------------------------------------------------------- sampling
    def shared_stats(self, env: Context, mask: Tensor) -> Tensor:
        """This process's part of the statistic every lane's sampling shares: failures (ends that
        are not time-outs) per bin among the lanes in ``mask`` whose episode began since the last
        ``restart`` (a seeded reset replays the run from uniform start frames) and ran a step (a
        lane reset again before its next step failed in an episode counted already). The runtime
        sums it over the ranks into ``stats`` before the reset that uses it."""
        ran = self.started & env.episode_ran()
        failed = (mask & ran & env.terminated & ~env.diverged).float()
        return torch.zeros_like(self.failures).scatter_add_(0, self.bin_of_frame[self.frame], failed)

    def _update_probs(self) -> None:
        self.failures.mul_(1.0 - self.alpha).add_(self.alpha * self.stats)
        total = self.failures.sum()
        fail_p = self.smooth @ (self.failures / total.clamp_min(1e-12))
        fail_p = fail_p / fail_p.sum().clamp_min(1e-12)
        uniform = torch.full_like(fail_p, 1.0 / fail_p.shape[0])
        self.probs.copy_(torch.where(total > 0, (1.0 - self.floor) * fail_p + self.floor * uniform, uniform))

    def sample(self, env: Context, mask: Tensor) -> Tensor:
        """Start frames for the lanes in ``mask`` (others: their current frame)."""
        u = env.rng.uniform((2,), mask)
        if self.sampling in ("adaptive", "uniform"):
            probs = self.probs if self.sampling == "adaptive" else self.bin_len.float() / self.bin_len.sum()
            cdf = torch.cumsum(probs, 0)
            b = torch.searchsorted(cdf, (u[:, 0] * cdf[-1]).contiguous()).clamp(max=cdf.shape[0] - 1)
            frame = self.bin_start[b] + (u[:, 1] * self.bin_len[b]).long()
        elif self.sampling == "start":
            n = self.c.clip_start.shape[0]
            frame = self.c.clip_start[(u[:, 0] * n).long().clamp(max=n - 1)]
        else:
            frame = torch.zeros_like(self.frame)
        return torch.where(mask, frame, self.frame)

    # ---------------------------------------------------------------- hooks
    def reset(self, env: Context, mask: Tensor) -> None:
        if self.sampling == "adaptive":
            self._update_probs()
        self.frame.copy_(self.sample(env, mask))
        self.clip.copy_(self.c.clip_of_frame[self.frame])
        self.started.logical_or_(mask)
        self.refresh(env)

    def update(self, env: Context) -> None:
        self.frame.copy_(torch.minimum(self.frame + 1, self.clip_last[self.clip]))
        self.refresh(env)

    def advance(self, env: Context) -> None:
        """In sequential play, lanes that reached their clip's last frame (and did not end)
        continue with the next clip: teleported onto its first frame after this step's terms ran,
        so that terms never see the teleported joints with the frames from before."""
        if self.sampling != "sequential":
            return
        wrap = (self.frame >= self.clip_last[self.clip]) & ~(env.terminated | env.truncated)
        first_of_next = self.c.clip_start[(self.clip + 1) % self.c.clip_start.shape[0]]
        self.frame.copy_(torch.where(wrap, first_of_next, self.frame))
        self.clip.copy_(self.c.clip_of_frame[self.frame])
        place_at_reference(env, self, wrap)
        env.dirty.logical_or_(wrap)  # written into the simulation and observed again
        # the observations' reference rows at the new frames; the re-anchored bodies wait for the
        # next update, which recomputes them from the teleported frames before any term reads them
        self.reference.copy_(self.table[self.frame])

    def at_clip_end(self) -> Tensor:
        """Lanes whose reference reached its clip's last frame (never in sequential play, where
        the next clip follows)."""
        if self.sampling == "sequential":
            return torch.zeros_like(self.frame, dtype=torch.bool)
        return self.frame >= self.clip_last[self.clip]

    def restart(self) -> None:
        """Forget the failure statistics: start frames are uniform again, and the episodes
        running now, of the run before, count no failures when they end."""
        self.failures.zero_()
        self.started.fill_(False)
        self.probs.fill_(1.0 / self.probs.shape[0])

    def metrics(self, env: Context) -> dict[str, Tensor]:
        """Per-lane tracking errors now: mean position error of the tracked bodies (m, against
        the re-anchored reference), of the anchor (m, world), and mean joint error (rad)."""
        return {"body_pos_error_m": (self.body_pos_rel_w - env.xpos[:, self.body_ids]).norm(dim=-1).mean(-1),
                "anchor_pos_error_m": (self.anchor_pos_w - env.xpos[:, self.anchor_body]).norm(dim=-1),
                "joint_pos_error_rad": (env.qpos[:, -self.joint_pos.shape[1]:] - self.joint_pos).abs().mean(-1)}

    def markers(self, env: Context) -> tuple[Spheres]:
        """The tracked bodies' reference positions, re-anchored to the robot as the rewards
        compare them (orange)."""
        return (Spheres(self.body_pos_rel_w, REFERENCE),)

    def log(self) -> dict[str, float]:
        p = self.probs
        n = p.shape[0]
        entropy = float(-(p * p.clamp_min(1e-12).log()).sum()) / math.log(n) if n > 1 else 1.0
        return {"Motion/sampling_entropy": entropy, "Motion/top_bin_prob": float(p.max()),
                "Motion/top_bin": float(p.argmax())}


def _cmd(env: Context, command: MotionCommandName) -> MotionCommand:
    return env.commands[command]


# -------------------------------------------------------------------- observations
def motion_command(env: Context, command: MotionCommandName) -> Tensor:
    """Reference joint positions and velocities."""
    c = _cmd(env, command)
    return torch.cat((c.joint_pos, c.joint_vel), dim=-1)


def motion_anchor_ori_b(env: Context, command: MotionCommandName) -> Tensor:
    """Reference anchor orientation in the robot's anchor frame (6D)."""
    c = _cmd(env, command)
    return quat_rot6d(c.anchor_quat_w, frame=env.xquat[:, c.anchor_body])


def motion_anchor_pos_b(env: Context, command: MotionCommandName) -> Tensor:
    c = _cmd(env, command)
    return quat_apply_inverse(env.xquat[:, c.anchor_body], c.anchor_pos_w - env.xpos[:, c.anchor_body])


def robot_body_pos_b(env: Context, command: MotionCommandName) -> Tensor:
    """Tracked robot bodies' positions in the robot's anchor frame, flattened."""
    c = _cmd(env, command)
    rel = env.xpos[:, c.body_ids] - env.xpos[:, c.anchor_body].unsqueeze(1)
    return quat_apply_inverse(env.xquat[:, c.anchor_body].unsqueeze(1), rel).flatten(1)


def robot_body_ori_b(env: Context, command: MotionCommandName) -> Tensor:
    c = _cmd(env, command)
    return quat_rot6d(env.xquat[:, c.body_ids], frame=env.xquat[:, c.anchor_body].unsqueeze(1)).flatten(1)


# -------------------------------------------------------------------- rewards
def body_velocities(env: Context, ids: Tensor) -> tuple[Tensor, Tensor]:
    """World linear velocity at each body's origin and angular velocity, from ``cvel``
    (spatial velocity about the subtree centre of mass of the floating root)."""
    w = env.cvel[:, ids, 0:3]
    v = env.cvel[:, ids, 3:6] + torch.linalg.cross(w, env.xpos[:, ids] - env.subtree_com[:, 1:2], dim=-1)
    return v, w


def anchor_pos_exp(env: Context, command: MotionCommandName, std: Positive) -> Tensor:
    c = _cmd(env, command)
    return torch.exp(-(c.anchor_pos_w - env.xpos[:, c.anchor_body]).square().sum(-1) / std**2)


def anchor_ori_exp(env: Context, command: MotionCommandName, std: Positive) -> Tensor:
    c = _cmd(env, command)
    return torch.exp(-quat_angle(c.anchor_quat_w, env.xquat[:, c.anchor_body]).square() / std**2)


def body_pos_exp(env: Context, command: MotionCommandName, std: Positive) -> Tensor:
    c = _cmd(env, command)
    err = (c.body_pos_rel_w - env.xpos[:, c.body_ids]).square().sum(-1).mean(-1)
    return torch.exp(-err / std**2)


def body_ori_exp(env: Context, command: MotionCommandName, std: Positive) -> Tensor:
    c = _cmd(env, command)
    err = quat_angle(c.body_quat_rel_w, env.xquat[:, c.body_ids]).square().mean(-1)
    return torch.exp(-err / std**2)


def body_lin_vel_exp(env: Context, command: MotionCommandName, std: Positive) -> Tensor:
    c = _cmd(env, command)
    v, _ = body_velocities(env, c.body_ids)
    return torch.exp(-(c.body_lin_vel_w - v).square().sum(-1).mean(-1) / std**2)


def body_ang_vel_exp(env: Context, command: MotionCommandName, std: Positive) -> Tensor:
    c = _cmd(env, command)
    _, w = body_velocities(env, c.body_ids)
    return torch.exp(-(c.body_ang_vel_w - w).square().sum(-1).mean(-1) / std**2)


# -------------------------------------------------------------------- terminations
def anchor_height_error(env: Context, command: MotionCommandName, threshold: Positive) -> Tensor:
    c = _cmd(env, command)
    return (c.anchor_pos_w[:, 2] - env.xpos[:, c.anchor_body, 2]).abs() > threshold


def anchor_tilt_error(env: Context, command: MotionCommandName, threshold: Positive) -> Tensor:
    """The anchor's gravity direction (z component) differs from the reference's by more than
    ``threshold``."""
    c = _cmd(env, command)
    g = torch.tensor([0.0, 0.0, -1.0], device=env.device).expand(c.anchor_quat_w.shape[0], 3)
    ref = quat_apply_inverse(c.anchor_quat_w, g)[:, 2]
    robot = quat_apply_inverse(env.xquat[:, c.anchor_body], g)[:, 2]
    return (ref - robot).abs() > threshold


def body_height_error(env: Context, command: MotionCommandName, bodies: Tensor, threshold: Positive) -> Tensor:
    """Any of ``bodies`` (among the tracked ones) off its reference height by more than ``threshold``."""
    c = _cmd(env, command)
    pick = (bodies.unsqueeze(1) == c.body_ids.unsqueeze(0)).float()  # (E, B): which tracked body each is
    ref_z = c.body_pos_rel_w[..., 2] @ pick.T
    return ((ref_z - env.xpos[:, bodies, 2]).abs() > threshold).any(-1)


def motion_end(env: Context, command: MotionCommandName) -> Tensor:
    """The reference reached the last frame of its clip."""
    return _cmd(env, command).at_clip_end()


# -------------------------------------------------------------------- reset and events
def reset_to_motion(env: Context, mask: Tensor, command: MotionCommandName, pos_noise: NonNegative = 0.0,
                    rot_noise: NonNegative = 0.0, lin_vel_noise: NonNegative = 0.0, ang_vel_noise: NonNegative = 0.0,
                    joint_noise: NonNegative = 0.0) -> None:
    """The robot at its reference frame, with uniform noise: root position (x, y; a quarter of it
    in z), root roll/pitch/yaw, root velocities, joints (clamped to their limits)."""
    place_at_reference(env, _cmd(env, command), mask, pos_noise, rot_noise, lin_vel_noise, ang_vel_noise,
                       joint_noise)


def place_at_reference(env: Context, c: MotionCommand, mask: Tensor, pos_noise: float = 0.0,
                       rot_noise: float = 0.0, lin_vel_noise: float = 0.0, ang_vel_noise: float = 0.0,
                       joint_noise: float = 0.0) -> None:
    """Write the state of the lanes in ``mask`` from ``c``'s reference frame (see reset_to_motion)."""
    pos, quat, lin, ang = c.root_state()
    nq = env.qpos.shape[1]
    u = env.rng.uniform((15,), mask) * 2.0 - 1.0
    pos = pos + pos_noise * u[:, 0:3] * torch.tensor([1.0, 1.0, 0.25], device=env.device)
    half = 0.5 * rot_noise * u[:, 3:6]
    for axis in range(3):
        e = torch.zeros(3, device=env.device)
        e[axis] = 1.0
        dq = torch.cat((torch.cos(half[:, axis:axis + 1]), torch.sin(half[:, axis:axis + 1]) * e), dim=-1)
        quat = quat_mul(dq, quat)
    quat = normalize(quat)
    lin = lin + lin_vel_noise * u[:, 6:9]
    ang_b = quat_apply_inverse(quat, ang) + ang_vel_noise * u[:, 9:12]
    joints = c.joint_pos + joint_noise * env.rng.uniform((c.joint_pos.shape[1],), mask) * 2.0 - joint_noise
    qpos = torch.cat((pos, quat, joints), dim=-1)[:, :nq]
    qpos = torch.maximum(torch.minimum(qpos, env.qpos_limits[:, 1]), env.qpos_limits[:, 0])
    qvel = torch.cat((lin, ang_b, c.joint_vel), dim=-1)
    m = mask.unsqueeze(-1)
    env.qpos.copy_(torch.where(m, qpos, env.qpos))
    env.qvel.copy_(torch.where(m, qvel, env.qvel))
