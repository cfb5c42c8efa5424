"""Behaviour cloning from a Minari dataset, in one file: an MLP regresses the dataset's actions on
its observations, then runs on the task the dataset was recorded on.

    python -m motrix_gym dataset Motrix/Go1WalkFlat-v0 motrix/go1walkflat/ppo-v0 --checkpoint logs/Go1WalkFlat/<run>
    python examples/behaviour_cloning.py motrix/go1walkflat/ppo-v0 --epochs 20

Only Minari's API and ``gym.make_vec`` are used: any Minari dataset of a Gymnasium env with Box
observations and actions works. The clone is scored as ``evaluate`` scores policies: the first
episode of each of ``--lanes`` lanes, beside zero actions on the same lanes, and the dataset's own
mean return.
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import minari
import numpy as np
import torch
import torch.nn as nn

import motrix_gym  # noqa: F401  (registers the Motrix/ ids with Gymnasium)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dataset_id")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--hidden", default="256,256", help="hidden layer sizes, comma-separated")
    p.add_argument("--lanes", type=int, default=64, help="lanes the clone is scored on")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-compile", action="store_true", help="run the scoring envs eagerly")
    return p.parse_args(argv)


def transitions(ds: minari.MinariDataset) -> tuple[torch.Tensor, torch.Tensor]:
    """Every (observation, action) pair of the dataset (an episode's final observation has none)."""
    obs, act = zip(*((ep.observations[:-1], ep.actions) for ep in ds.iterate_episodes()))
    return torch.from_numpy(np.concatenate(obs)).float(), torch.from_numpy(np.concatenate(act)).float()


def first_episode_returns(env_spec: gym.envs.registration.EnvSpec, act, lanes: int, seed: int,
                          **make: object) -> float:
    """The mean return of each lane's first episode under ``act`` (observations -> actions)."""
    envs = gym.make_vec(env_spec, num_envs=lanes, **make)
    obs, _ = envs.reset(seed=seed)
    ret, alive = np.zeros(lanes), np.ones(lanes, dtype=bool)
    while alive.any():
        obs, rew, term, trunc, _ = envs.step(act(obs))
        ret += np.where(alive, rew, 0.0)
        alive &= ~(term | trunc)
    envs.close()
    return float(ret.mean())


def main(argv: list[str] | None = None) -> dict[str, float]:
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    ds = minari.load_dataset(args.dataset_id)
    x, y = transitions(ds)
    mean, std = x.mean(0), x.std(0).clamp_min(1e-6)
    sizes = [x.shape[1], *(int(h) for h in args.hidden.split(",")), y.shape[1]]
    layers: list[nn.Module] = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), nn.ELU()]
    net = nn.Sequential(*layers[:-1])
    opt = torch.optim.Adam(net.parameters(), lr=args.learning_rate)
    for epoch in range(args.epochs):
        order, total = torch.randperm(len(x)), 0.0
        for idx in order.split(args.batch_size):
            loss = ((net((x[idx] - mean) / std) - y[idx]) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        mse = total / len(x)
        print(f"epoch {epoch + 1:>3}: action MSE {mse:.4f}")

    @torch.no_grad()
    def clone(obs: np.ndarray) -> np.ndarray:
        return net((torch.from_numpy(obs) - mean) / std).numpy()

    spec, na = ds.spec.env_spec, y.shape[1]
    make = {"compile": False} if args.no_compile else {}
    scores = {"dataset": float(np.mean([ep.rewards.sum() for ep in ds.iterate_episodes()])),
              "clone": first_episode_returns(spec, clone, args.lanes, args.seed, **make),
              "zero actions": first_episode_returns(spec, lambda o: np.zeros((len(o), na), np.float32), args.lanes,
                                                    args.seed, **make)}
    print(f"{len(x)} transitions of {ds.total_episodes} episodes; mean return, first episode of {args.lanes} lanes:")
    for name, value in scores.items():
        print(f"  {name:<13} {value:9.3f}")
    return {**scores, "action MSE": mse}


if __name__ == "__main__":
    main()
