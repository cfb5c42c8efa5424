"""Render the pictures of the README: one frame per task (docs/tasks/<id>.png), each built-in
sub-terrain's hardest tile (docs/terrains.png) and the G1 dance reference as an animation
(docs/g1_dance.gif).

    python scripts/make_media.py
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
from PIL import Image, ImageDraw

import motrix_gym  # noqa: F401  (registers the ids)
from motrix_gym.envs.robots import G1, GO1, T1
from motrix_gym.envs.wbt.tracking import MOTIONS
from motrix_gym.manager.config import SceneConfig, SubTerrain, TerrainConfig
from motrix_gym.manager.resolver import default_pose
from motrix_gym.motion import MotionClip
from motrix_gym.motion.kinematics import hinge_joints
from motrix_gym.registry import BUILTIN, env_id
from motrix_gym.sim.render import LaneRenderer
from motrix_gym.sim.scene import build_model, height_map, model_info
from motrix_gym.sim.terrain import BUILT_IN

DOCS = Path(__file__).resolve().parents[1] / "docs"


# The moment of each tracking task's reference that shows what it is about.
MOMENTS = {"G1WbtDance": ("g1_dance", 19.5), "G1WbtKick": ("g1_kick", 3.3), "G1WbtMix": ("g1_squat", 2.8),
           "T1WbtDance": ("t1_dance", 19.5), "T1WbtKick": ("t1_kick", 3.3)}


def clip_qpos(model, clip: MotionClip, frame: int) -> np.ndarray:
    joints = hinge_joints(model)
    q = model.qpos0.copy()
    q[:3], q[3:7] = clip.body_pos_w[frame, 0], clip.body_quat_w[frame, 0]  # the root is the first body
    q[[model.jnt_qposadr[j] for j in joints]] = clip.joint_pos[frame, [clip.joint_names.index(model.joint(j).name)
                                                                        for j in joints]]
    return q


def task_frames(size: tuple[int, int] = (240, 180)) -> None:
    """Tracking tasks: their reference at a telling moment; the others: the robot in play mode
    after 5 steps of zero actions."""
    (DOCS / "tasks").mkdir(parents=True, exist_ok=True)
    for task in BUILTIN:
        out = DOCS / "tasks" / f"{env_id(task).replace('/', '_')}.png"
        if task in MOMENTS:
            name, t = MOMENTS[task]
            clip = MotionClip.load(MOTIONS / f"{name}.npz")
            model = build_model(SceneConfig(G1 if name.startswith("g1") else T1), 0.005, visual=True)
            renderer = LaneRenderer(model, width=size[0], height=size[1], distance=2.6, azimuth=150.0,
                                    elevation=-10.0)
            Image.fromarray(renderer.render(clip_qpos(model, clip, round(t * clip.fps)))).save(out)
            renderer.close()
            continue
        env = gym.make_vec(env_id(task), num_envs=1, compile=False, render_mode="rgb_array", progress=False,
                           mode="play", width=640, height=480)
        curriculum = env.unwrapped.runtime.ctx.commands.get("terrain")
        for seed in range(100):  # on generated terrain: a hard tile, so that the terrain shows
            env.reset(seed=seed)
            if curriculum is None or int(curriculum.level[0]) >= 6:
                break
        for _ in range(5):
            env.step(np.zeros(env.action_space.shape, np.float32))
        Image.fromarray(env.render()[0]).resize(size).save(out)
        env.close()


def terrain_gallery(size: tuple[int, int] = (256, 192), per_row: int = 5) -> None:
    """One 8 m tile of each built-in sub-terrain at difficulty 1 (default parameters, the tasks'
    0.1 m resolution), with a Go1 in its default pose on the platform for scale."""
    panels = []
    for func in BUILT_IN:
        cfg = TerrainConfig(sub_terrains=(SubTerrain(func.__name__, func),), rows=1, cols=1, border=0.0)
        model = build_model(SceneConfig(GO1, cfg), 0.005, visual=True)
        qpos = default_pose(GO1, model_info(model)).double().numpy()
        qpos[2] += height_map(cfg).tile_centers[0, 0, 2]
        renderer = LaneRenderer(model, width=size[0], height=size[1], distance=9.0, azimuth=120.0, elevation=-35.0)
        image = Image.fromarray(renderer.render(qpos))
        renderer.close()
        ImageDraw.Draw(image).text((6, 4), func.__name__, fill=(255, 255, 255))
        panels.append(image)
    rows = -(-len(panels) // per_row)
    sheet = Image.new("RGB", (per_row * size[0], rows * size[1]))
    for k, image in enumerate(panels):
        sheet.paste(image, ((k % per_row) * size[0], (k // per_row) * size[1]))
    sheet.save(DOCS / "terrains.png")


def dance_gif(every: int = 6, size: int = 200) -> None:
    clip = MotionClip.load(MOTIONS / "g1_dance.npz")
    model = build_model(SceneConfig(G1), 0.005, visual=True)
    renderer = LaneRenderer(model, width=size, height=size, distance=2.6, azimuth=150.0, elevation=-10.0)
    frames = [Image.fromarray(renderer.render(clip_qpos(model, clip, f))).quantize(colors=48)
              for f in range(0, clip.num_frames, every)]
    renderer.close()
    frames[0].save(DOCS / "g1_dance.gif", save_all=True, append_images=frames[1:],
                   duration=round(1000 * every / clip.fps), loop=0, optimize=True)


if __name__ == "__main__":
    import sys

    task_frames()
    terrain_gallery()
    if "--no-gif" not in sys.argv:
        dance_gif()
    print("wrote", sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.png")), "and docs/g1_dance.gif")
