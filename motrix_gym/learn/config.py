"""PPO hyperparameters of a task family, as data (each family keeps its defaults beside its tasks)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from motrix_gym.arguments import is_int

ACTIVATIONS = ("elu", "selu", "relu", "crelu", "lrelu", "tanh", "sigmoid", "softplus", "gelu", "swish", "mish",
               "identity")  # rsl_rl's names
SCHEDULES = ("adaptive", "fixed")
RNN_TYPES = ("none", "lstm", "gru")  # "none": MLPs; else rsl_rl's RNNModel, the recurrent layer before the MLP
# the settings that shape the models or their first parameters: a run that starts from a
# checkpoint's models (resumed, or started from another task's) keeps the checkpoint's
MODEL_FIELDS = ("actor_hidden", "critic_hidden", "activation", "init_std", "obs_normalization", "rnn_type",
                "rnn_hidden_dim", "rnn_num_layers")
_COUNTS = ("num_envs", "num_steps_per_env", "num_learning_epochs", "num_mini_batches", "save_interval",
           "rnn_hidden_dim", "rnn_num_layers")
_NUMBERS: dict[str, tuple[str, Callable[[float], bool]]] = {
    "init_std": ("> 0", lambda x: x > 0), "learning_rate": ("> 0", lambda x: x > 0),
    "desired_kl": ("> 0", lambda x: x > 0), "clip_param": ("> 0", lambda x: x > 0),
    "entropy_coef": (">= 0", lambda x: x >= 0), "value_loss_coef": (">= 0", lambda x: x >= 0),
    "gamma": ("in (0, 1]", lambda x: 0 < x <= 1), "lam": ("in [0, 1]", lambda x: 0 <= x <= 1),
    "max_grad_norm": ("> 0", lambda x: x > 0), "symmetry_loss_coef": (">= 0", lambda x: x >= 0),
}


class PpoConfigError(ValueError):
    """PPO settings that cannot train together or a setting out of its range; the message names it."""


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
    # a recurrent layer reads the (normalised) observations before each MLP, its state carried
    # from step to step and zeroed when a lane's episode ends (Isaac Lab's recurrent actor-critic)
    rnn_type: str = "none"
    rnn_hidden_dim: int = 256
    rnn_num_layers: int = 1
    learning_rate: float = 1e-3
    schedule: str = "adaptive"  # the learning rate follows the KL divergence towards desired_kl; or "fixed"
    desired_kl: float = 0.01
    num_learning_epochs: int = 5
    num_mini_batches: int = 4
    clip_param: float = 0.2
    entropy_coef: float = 0.01
    value_loss_coef: float = 1.0
    gamma: float = 0.99
    lam: float = 0.95
    max_grad_norm: float = 1.0
    # mirror symmetry (the task's reflection through the robot's sagittal plane: manager/symmetry.py):
    # each mini-batch also trains on its reflection, and/or a loss pulls the policy's action on a
    # reflected observation towards the reflection of its action (rsl_rl's symmetry extension;
    # feed-forward models only)
    symmetry_augmentation: bool = False
    symmetry_loss_coef: float = 0.0
    save_interval: int = 50  # iterations between checkpoints

    def __post_init__(self) -> None:
        for name in _COUNTS:
            value = getattr(self, name)
            if not is_int(value) or value < 1:
                raise PpoConfigError(f"PpoConfig.{name} must be an int >= 1, got {value!r}")
        for name in ("actor_hidden", "critic_hidden"):
            value = getattr(self, name)
            if not (isinstance(value, tuple) and value and all(is_int(x) and x >= 1 for x in value)):
                raise PpoConfigError(f"PpoConfig.{name} must be a non-empty tuple of ints >= 1, got {value!r}")
        for name, (bound, holds) in _NUMBERS.items():
            value = getattr(self, name)
            if not (isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
                    and holds(value)):
                raise PpoConfigError(f"PpoConfig.{name} must be a finite number {bound}, got {value!r}")
        for name, allowed in (("activation", ACTIVATIONS), ("schedule", SCHEDULES), ("rnn_type", RNN_TYPES)):
            if getattr(self, name) not in allowed:
                raise PpoConfigError(f"PpoConfig.{name} must be one of {allowed}, got {getattr(self, name)!r}")
        for name in ("obs_normalization", "symmetry_augmentation"):
            if not isinstance(getattr(self, name), bool):
                raise PpoConfigError(f"PpoConfig.{name} must be a bool, got {getattr(self, name)!r}")
        # rsl_rl cuts a rollout into num_mini_batches of equal size, rounding down, and recurrent
        # models into whole lanes (their state runs along a lane's steps): none may be empty
        recurrent = self.rnn_type != "none"
        per_update, unit = ((self.num_envs, "lanes of a rollout (num_envs), which recurrent models' mini-batches "
                             "divide") if recurrent else
                            (self.num_envs * self.num_steps_per_env, "steps of a rollout (num_envs * "
                             "num_steps_per_env)"))
        if self.num_mini_batches > per_update:
            raise PpoConfigError(f"PpoConfig: num_mini_batches {self.num_mini_batches} is more than the {per_update} "
                                 f"{unit}: every mini-batch would be empty")
        if self.symmetric and recurrent:
            raise PpoConfigError(f"PpoConfig: symmetry (symmetry_augmentation, symmetry_loss_coef) needs "
                                 f"feed-forward models; rnn_type is {self.rnn_type!r}")

    @property
    def symmetric(self) -> bool:
        """Whether training uses the task's mirror symmetry."""
        return self.symmetry_augmentation or self.symmetry_loss_coef > 0

    def with_(self, **changes: Any) -> PpoConfig:
        unknown = sorted(set(changes) - set(self.__dataclass_fields__))
        if unknown:
            raise PpoConfigError(f"ppo: unknown setting(s) {unknown}; PpoConfig has {list(self.__dataclass_fields__)}")
        return replace(self, **changes)

    def to_rsl_rl(self) -> dict[str, Any]:
        def model(hidden: tuple[int, ...], stochastic: bool) -> dict[str, Any]:
            cfg: dict[str, Any] = {"class_name": "MLPModel", "hidden_dims": list(hidden),
                                   "activation": self.activation, "obs_normalization": self.obs_normalization}
            if self.rnn_type != "none":
                cfg.update(class_name="RNNModel", rnn_type=self.rnn_type, rnn_hidden_dim=self.rnn_hidden_dim,
                           rnn_num_layers=self.rnn_num_layers)
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
                          "gamma": self.gamma, "lam": self.lam, "max_grad_norm": self.max_grad_norm,
                          "symmetry_cfg": {
                              "data_augmentation_func": "motrix_gym.integrations.rsl_rl:mirror_augmentation",
                              "use_data_augmentation": self.symmetry_augmentation,
                              "use_mirror_loss": self.symmetry_loss_coef > 0,
                              "mirror_loss_coeff": self.symmetry_loss_coef} if self.symmetric else None},
            "actor": model(self.actor_hidden, True),
            "critic": model(self.critic_hidden, False),
            "multi_gpu": None,
        }

    def as_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    def settings(self) -> list[str]:
        """Every setting as ``"name=value"``, written as ``parse_setting`` reads it back."""
        def text(v: Any) -> str:
            return ",".join(map(str, v)) if isinstance(v, tuple) else str(v).lower() if isinstance(v, bool) else str(v)

        return [f"{f.name}={text(getattr(self, f.name))}" for f in fields(self)]

    @classmethod
    def parse_setting(cls, text: str) -> tuple[str, Any]:
        """``"name=value"`` as a field and its value, read as the field's type and checked as the
        config checks it: ``learning_rate=3e-4``, ``actor_hidden=512,256,128``,
        ``obs_normalization=false``. A ValueError says what is wrong."""
        name, eq, raw = text.partition("=")
        kinds = {f.name: f.type for f in fields(cls)}
        if not eq or name not in kinds:
            raise ValueError(f"expected NAME=VALUE with NAME one of {list(kinds)}, got {text!r}")
        kind = kinds[name]
        try:
            if kind == "bool":
                if raw not in ("true", "false"):
                    raise ValueError
                value: Any = raw == "true"
            elif kind == "tuple[int, ...]":
                value = tuple(int(x) for x in raw.split(","))
            else:
                value = {"int": int, "float": float, "str": str}[kind](raw)
        except ValueError:
            want = {"bool": "true or false", "tuple[int, ...]": "comma-separated ints", "int": "an int",
                    "float": "a number", "str": "a name"}[kind]
            raise ValueError(f"{name} takes {want}, got {raw!r}") from None
        cls().with_(**{name: value})  # the field's own check, with the defaults around it
        return name, value

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> PpoConfig:
        """The config ``as_dict`` wrote (a checkpoint's or a run's ``config.json``)."""
        return cls().with_(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})
