"""The README's learning table from ``python -m motrix_gym train`` runs.

    python scripts/learning_report.py logs/G1WalkFlat/<run> logs/Go1WalkFlat/<run> ...

For each run directory: its ``summary.json`` (written by ``train``) becomes a row, and its
``curve.png`` is copied to ``docs/learning/<task>.png``. Prints the markdown table.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from motrix_gym.envs import task_name

DOCS = Path(__file__).resolve().parents[1] / "docs" / "learning"


def row(run: Path) -> str:
    s = json.loads((run / "summary.json").read_text())
    cfg = json.loads((run / "config.json").read_text())
    task = task_name(s["env_id"])
    DOCS.mkdir(parents=True, exist_ok=True)
    shutil.copy(run / "curve.png", DOCS / f"{task}.png")
    e = s["eval"]
    if e is None:
        sys.exit(f"{run}: no final comparison (trained with --eval-lanes 0, or stopped by Ctrl-C), so no row")

    def cell(name: str) -> str:
        return f"{e[name]['mean_return']:.2f} / {e[name]['mean_episode_length']:.0f}"

    track = e["policy"]["reward_terms"]
    key = next((k for k in ("track_lin_vel", "body_pos", "ball_centred") if k in track), None)
    terms = (f"{key}: {1e3 * e['policy']['reward_terms'][key]:.2f} / {1e3 * e['random']['reward_terms'][key]:.2f}"
             f" / {1e3 * e['zero']['reward_terms'][key]:.2f}") if key else ""
    training = ("no episode ended" if s["final_train_mean_return"] is None
                else f"{s['final_train_mean_return']:.2f} / {s['final_train_mean_episode_length']:.0f}")
    budget = f"--minutes {cfg['minutes']:g}" if cfg.get("minutes") else f"--iterations {cfg['iterations']}"
    for key, option in (("started_from", "--start-from"), ("resumed_from", "--resume")):
        if cfg.get(key):  # the source run's folder, as its own row names it
            source = Path(cfg[key])
            budget += f" {option} logs/{source.parts[-3]}/<run>/{source.name}"
    return (f"| `{s['env_id']}` | `train {s['env_id']} {budget}` ({cfg['ppo']['num_envs']} lanes) | "
            f"{s['train_seconds'] / 60:.0f} min, {s['env_steps'] / 1e6:.1f} M steps | "
            f"{training} | "
            f"{cell('policy')} | {cell('random')} | {cell('zero')} | {terms} | ![](docs/learning/{task}.png) |")


def main() -> None:
    print("| task | command | budget | training, last 100 episodes: return / length | final policy | "
          "random actions | zero actions | per-step reward x1e3 of the main term: policy / random / zero | "
          "curve |")
    print("|---|---|---|---|---|---|---|---|---|")
    for run in sys.argv[1:]:
        print(row(Path(run)))


if __name__ == "__main__":
    main()
