"""Render the pictures of the README: one frame per task (docs/tasks/<id>.png) and the G1 dance
reference as an animation (docs/g1_dance.gif).

    python scripts/make_media.py
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
from PIL import Image

import motrix_gym  # noqa: F401  (registers the ids; picks an off-screen GL backend)
from motrix_gym.envs.robots import G1
from motrix_gym.envs.wbt.tracking import MOTIONS
from motrix_gym.manager.config import SceneConfig
from motrix_gym.motion import MotionClip
from motrix_gym.motion.kinematics import hinge_joints
from motrix_gym.registry import REGISTERED, env_id
from motrix_gym.sim.render import LaneRenderer
from motrix_gym.sim.scene import build_model

DOCS = Path(__file__).resolve().parents[1] / "docs"


def task_frames(steps: int = 40) -> None:
    """Each task after ``steps`` steps: tracking tasks play their reference with PD targets on it."""
    (DOCS / "tasks").mkdir(parents=True, exist_ok=True)
    for task in REGISTERED:
        tracking = "Wbt" in task
        kwargs = {"mode": "play"} if tracking else {}
        env = gym.make_vec(env_id(task), num_envs=1, compile=False, render_mode="rgb_array", progress=False, **kwargs)
        env.reset(seed=0)
        rt = env.unwrapped.runtime
        act = rt.program.action
        default = rt.ctx.default_qpos[act.joints.qpos]
        for _ in range(steps):
            target = rt.ctx.commands["motion"].joint_pos[:1] if tracking else default[None]
            env.step(((target - default) / act.scale).numpy())
        frame = Image.fromarray(env.render()).resize((240, 180))
        frame.save(DOCS / "tasks" / f"{env_id(task).replace('/', '_')}.png")
        env.close()


def dance_gif(every: int = 5, size: int = 240) -> None:
    clip = MotionClip.load(MOTIONS / "g1_dance.npz")
    model = build_model(SceneConfig(G1), 0.005, visual=True)
    renderer = LaneRenderer(model, width=size, height=size, distance=2.6, azimuth=150.0, elevation=-10.0)
    joints = hinge_joints(model)
    adr = [model.jnt_qposadr[j] for j in joints]
    names = [model.joint(j).name for j in joints]
    idx = [clip.joint_names.index(n) for n in names]
    root = clip.body_names.index("pelvis")
    frames = []
    for f in range(0, clip.num_frames, every):
        q = model.qpos0.copy()
        q[:3], q[3:7], q[adr] = clip.body_pos_w[f, root], clip.body_quat_w[f, root], clip.joint_pos[f, idx]
        frames.append(Image.fromarray(renderer.render(q)).quantize(colors=64))
    renderer.close()
    frames[0].save(DOCS / "g1_dance.gif", save_all=True, append_images=frames[1:],
                   duration=round(1000 * every / clip.fps), loop=0, optimize=True)


if __name__ == "__main__":
    task_frames()
    dance_gif()
    print("wrote", sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.png")), "and docs/g1_dance.gif")
