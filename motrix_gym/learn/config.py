"""PPO hyperparameters of a task family, as data (each family keeps its defaults beside its tasks)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from motrix_gym.arguments import is_int


@dataclass(frozen=True)
class PpoConfig:
    """rsl_rl PPO settings; ``to_rsl_rl`` gives the dict its ``OnPolicyRunner`` takes."""

    num_envs: int = 512
    num_steps_per_env: int = 24
    actor_hidden: tuple[int, ...] = (256, 128, 128)
    critic_hidden: tuple[int, ...] = (256, 128, 128)
    activation: str = "elu"
    init_std: float = 1.0
    obs_normalization: bool = True
    learning_rate: float = 1e-3
    schedule: str = "adaptive"  # the learning rate follows the KL divergence towards desired_kl
    desired_kl: float = 0.01
    num_learning_epochs: int = 5
    num_mini_batches: int = 4
    clip_param: float = 0.2
    entropy_coef: float = 0.01
    value_loss_coef: float = 1.0
    gamma: float = 0.99
    lam: float = 0.95
    max_grad_norm: float = 1.0
    save_interval: int = 50  # iterations between checkpoints

    def __post_init__(self) -> None:
        for name in ("num_envs", "num_steps_per_env", "num_learning_epochs", "num_mini_batches", "save_interval"):
            value = getattr(self, name)
            if not is_int(value) or value < 1:
                raise ValueError(f"PpoConfig.{name} must be an int >= 1, got {value!r}")

    def with_(self, **changes: Any) -> PpoConfig:
        return replace(self, **changes)

    def to_rsl_rl(self) -> dict[str, Any]:
        def model(hidden: tuple[int, ...], stochastic: bool) -> dict[str, Any]:
            cfg: dict[str, Any] = {"class_name": "MLPModel", "hidden_dims": list(hidden),
                                   "activation": self.activation, "obs_normalization": self.obs_normalization}
            if stochastic:
                cfg["distribution_cfg"] = {"class_name": "GaussianDistribution", "init_std": self.init_std}
            return cfg

        return {
            "num_steps_per_env": self.num_steps_per_env,
            "save_interval": self.save_interval,
            "obs_groups": {"actor": ["policy"], "critic": ["critic"]},
            "algorithm": {"class_name": "PPO", "learning_rate": self.learning_rate, "schedule": self.schedule,
                          "desired_kl": self.desired_kl, "num_learning_epochs": self.num_learning_epochs,
                          "num_mini_batches": self.num_mini_batches, "clip_param": self.clip_param,
                          "entropy_coef": self.entropy_coef, "value_loss_coef": self.value_loss_coef,
                          "gamma": self.gamma, "lam": self.lam, "max_grad_norm": self.max_grad_norm},
            "actor": model(self.actor_hidden, True),
            "critic": model(self.critic_hidden, False),
            "multi_gpu": None,
        }

    def as_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> PpoConfig:
        unknown = sorted(set(values) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(f"PpoConfig: unknown field(s) {unknown}")
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})
