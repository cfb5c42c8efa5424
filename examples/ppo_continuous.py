"""PPO for continuous actions on a Gymnasium 1.x vector env, in one file (CleanRL style).

    python examples/ppo_continuous.py --env-id Motrix/G1WalkFlat-v0 --num-envs 64 --total-timesteps 20000

The env is created with ``gym.make_vec`` and nothing else; any Gymnasium vector env with a Box
action space works. ``--output torch`` keeps observations, rewards and flags as torch tensors end
to end (motrix-gym's ``output="torch"``); the default uses numpy like any Gymnasium env.
Truncated episodes are bootstrapped from the final observation; episodic returns come from
``info["episode"]`` (``RecordEpisodeStatistics``) or, for torch outputs, from the env's own
``info["final_info"]["episode"]``. At the end, the learning curve is plotted to ``--plot``.
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
from tqdm import tqdm

import motrix_gym  # noqa: F401  (registers the Motrix/ ids with Gymnasium)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env-id", default="Motrix/G1WalkFlat-v0")
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--total-timesteps", type=int, default=1_000_000)
    p.add_argument("--num-steps", type=int, default=24, help="steps per env per rollout")
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--num-minibatches", type=int, default=4)
    p.add_argument("--update-epochs", type=int, default=5)
    p.add_argument("--clip-coef", type=float, default=0.2)
    p.add_argument("--ent-coef", type=float, default=0.0)
    p.add_argument("--vf-coef", type=float, default=1.0)
    p.add_argument("--max-grad-norm", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--output", choices=("numpy", "torch"), default="numpy")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=True,
                   help="passed to make_vec (motrix-gym compiles its runtime by default)")
    p.add_argument("--random-steps", type=int, default=0,
                   help="first measure the mean episodic return of uniform random actions for this many steps")
    p.add_argument("--plot", default="ppo_learning_curve.png")
    return p.parse_args(argv)


class RunningNorm(nn.Module):
    """Observation normalization with running mean and variance (updated during rollouts)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("var", torch.ones(dim))
        self.register_buffer("count", torch.tensor(1e-4))

    def update(self, x: torch.Tensor) -> None:
        m, v, n = x.mean(0), x.var(0, unbiased=False), x.shape[0]
        delta, total = m - self.mean, self.count + n
        self.mean += delta * n / total
        self.var = (self.var * self.count + v * n + delta**2 * self.count * n / total) / total
        self.count = total

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ((x - self.mean) / torch.sqrt(self.var + 1e-8)).clamp(-10, 10)


def mlp(inp: int, out: int, std: float) -> nn.Sequential:
    layers = [nn.Linear(inp, 256), nn.ELU(), nn.Linear(256, 128), nn.ELU(), nn.Linear(128, out)]
    for layer in layers[::2]:
        nn.init.orthogonal_(layer.weight, np.sqrt(2) if layer is not layers[-1] else std)
        nn.init.zeros_(layer.bias)
    return nn.Sequential(*layers)


class Agent(nn.Module):
    def __init__(self, obs_dim: int, act_dim: int) -> None:
        super().__init__()
        self.norm = RunningNorm(obs_dim)
        self.critic = mlp(obs_dim, 1, 1.0)
        self.actor_mean = mlp(obs_dim, act_dim, 0.01)
        self.actor_logstd = nn.Parameter(torch.full((act_dim,), -0.5))

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(self.norm(obs)).squeeze(-1)

    def act(self, obs: torch.Tensor, action: torch.Tensor | None = None):
        x = self.norm(obs)
        dist = torch.distributions.Normal(self.actor_mean(x), self.actor_logstd.exp())
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action).sum(-1), dist.entropy().sum(-1), self.critic(x).squeeze(-1)


def make_env(args: argparse.Namespace) -> gym.vector.VectorEnv:
    envs = gym.make_vec(args.env_id, num_envs=args.num_envs, output=args.output, compile=args.compile)
    if args.output == "numpy":
        envs = gym.wrappers.vector.RecordEpisodeStatistics(envs)
    return envs


def episode_returns(info: dict, output: str) -> list[float]:
    """Returns of the episodes that ended this step."""
    if output == "numpy":
        return info["episode"]["r"][info["_episode"]].tolist() if "episode" in info else []
    if "final_info" not in info:
        return []
    final = info["final_info"]
    return final["episode"]["r"][final["_episode"]].tolist()


def final_obs(info: dict, truncated: torch.Tensor, output: str) -> torch.Tensor | None:
    """Final observations of truncated lanes, in lane order, or None."""
    if not bool(truncated.any()):
        return None
    idx = torch.nonzero(truncated).flatten()
    if output == "torch":
        return info["final_obs"][idx]
    return torch.from_numpy(np.stack([info["final_obs"][i] for i in idx.tolist()]))


def random_return(args: argparse.Namespace, envs: gym.vector.VectorEnv) -> float:
    envs.reset(seed=args.seed + 1)
    rng = np.random.default_rng(args.seed)
    low, high = envs.single_action_space.low, envs.single_action_space.high
    rets: list[float] = []
    for _ in tqdm(range(args.random_steps), desc="random actions", leave=False):
        a = rng.uniform(low, high, (args.num_envs, low.shape[0])).astype(np.float32)
        *_, info = envs.step(torch.from_numpy(a) if args.output == "torch" else a)
        rets += episode_returns(info, args.output)
    return float(np.mean(rets)) if rets else float("nan")


def main(argv: list[str] | None = None) -> dict[str, float]:
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    envs = make_env(args)
    obs_dim, act_dim = envs.single_observation_space.shape[0], envs.single_action_space.shape[0]
    baseline = random_return(args, envs) if args.random_steps else float("nan")
    agent = Agent(obs_dim, act_dim)
    opt = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    T, N = args.num_steps, args.num_envs
    batch = T * N
    iterations = max(1, args.total_timesteps // batch)
    obs_buf = torch.zeros(T, N, obs_dim)
    act_buf = torch.zeros(T, N, act_dim)
    logp_buf, rew_buf, done_buf, val_buf = (torch.zeros(T, N) for _ in range(4))
    as_tensor = (lambda x: x) if args.output == "torch" else torch.from_numpy

    obs, _ = envs.reset(seed=args.seed)
    obs = as_tensor(obs)
    curve: list[tuple[int, float]] = []
    recent: list[float] = []
    step, start = 0, time.time()
    bar = tqdm(range(iterations), desc=f"PPO {args.env_id}", unit="it")
    for _ in bar:
        for t in range(T):
            with torch.no_grad():
                agent.norm.update(obs)
                action, logp, _, value = agent.act(obs)
            obs_buf[t], act_buf[t], logp_buf[t], val_buf[t] = obs, action, logp, value
            nxt, reward, term, trunc, info = envs.step(action if args.output == "torch" else action.numpy())
            reward, term, trunc = as_tensor(reward).float(), as_tensor(term), as_tensor(trunc)
            last = final_obs(info, trunc, args.output)
            if last is not None:  # bootstrap time-outs from the value of the state they ended in
                with torch.no_grad():
                    reward[trunc] += args.gamma * agent.value(last)
            rew_buf[t], done_buf[t] = reward, (term | trunc).float()
            obs = as_tensor(nxt)
            step += N
            for r in episode_returns(info, args.output):
                curve.append((step, r))
                recent = (recent + [r])[-100:]
        with torch.no_grad():
            next_value = agent.value(obs)
        adv = torch.zeros(T, N)
        gae = torch.zeros(N)
        for t in reversed(range(T)):
            nv = next_value if t == T - 1 else val_buf[t + 1]
            nonterminal = 1.0 - done_buf[t]
            delta = rew_buf[t] + args.gamma * nv * nonterminal - val_buf[t]
            gae = delta + args.gamma * args.gae_lambda * nonterminal * gae
            adv[t] = gae
        ret = adv + val_buf
        b_obs, b_act = obs_buf.reshape(batch, obs_dim), act_buf.reshape(batch, act_dim)
        b_logp, b_adv, b_ret = logp_buf.reshape(-1), adv.reshape(-1), ret.reshape(-1)
        mb = batch // args.num_minibatches
        for _ in range(args.update_epochs):
            perm = torch.randperm(batch)
            for i in range(0, batch, mb):
                j = perm[i:i + mb]
                _, logp, ent, value = agent.act(b_obs[j], b_act[j])
                ratio = (logp - b_logp[j]).exp()
                a = (b_adv[j] - b_adv[j].mean()) / (b_adv[j].std() + 1e-8)
                pg = torch.max(-a * ratio, -a * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)).mean()
                loss = pg + args.vf_coef * (value - b_ret[j]).square().mean() - args.ent_coef * ent.mean()
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                opt.step()
        if recent:
            bar.set_postfix(ret=f"{np.mean(recent):.2f}", sps=f"{step / (time.time() - start):,.0f}")
    envs.close()

    final = float(np.mean(recent)) if recent else float("nan")
    first = float(np.mean([r for _, r in curve[:100]])) if curve else float("nan")
    print(f"steps {step:,}  time {time.time() - start:.0f} s  mean return: first 100 episodes {first:.3f}, "
          f"last 100 episodes {final:.3f}" + (f", random actions {baseline:.3f}" if args.random_steps else ""))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    if curve:
        xs, ys = np.array(curve).T
        ax.plot(xs, ys, ".", alpha=0.2, label="episodes")
        k = max(1, len(ys) // 20)
        ax.plot(xs[k - 1:], np.convolve(ys, np.ones(k) / k, mode="valid"), label=f"mean of {k}")
    if args.random_steps:
        ax.axhline(baseline, color="gray", linestyle="--", label="random actions")
    ax.set(xlabel="env steps", ylabel="episodic return", title=args.env_id)
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.plot)
    print(f"learning curve: {args.plot}")
    return {"first_return": first, "final_return": final, "random_return": baseline, "steps": step}


if __name__ == "__main__":
    main()
