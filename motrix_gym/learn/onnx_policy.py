"""A policy file of ``play --export onnx`` run as a robot's controller runs it: onnxruntime on the
CPU, one robot per call, a recurrent policy's state fed back from step to step and zeroed when an
episode starts. ``play`` and ``evaluate`` take such a file wherever they take a checkpoint, so
that the file that goes to a robot is itself checked in simulation (sim-to-sim).

The file's metadata (``export.py``) must describe the task it runs on as the task describes
itself: the same joints in order, default pose, action scale and clip, control period and
observation terms; a file that differs in any of them is refused, naming what differs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict

from motrix_gym.learn.checkpoint import CheckpointError
from motrix_gym.sim.backend import MissingExtra

# what a controller needs to agree on with the task: the servos' gains are the robot's, and a
# simulation may change them on purpose
INTERFACE = ("joint_names", "default_joint_pos", "action_scale", "action_clip", "control_dt", "observation_names",
             "observation_dims", "observation_history", "observation_scales", "observation_clips",
             "observation_functions")
# compared where a file has them: files exported before they existed lack them, and gait_period is
# there only where the policy observes a gait clock
OPTIONAL = ("gait_period", "observation_params")


def is_onnx(path: str | Path) -> bool:
    return Path(path).suffix == ".onnx"


class OnnxPolicy:
    """The policy of an exported file ``path``: observations (an rsl_rl adapter's) -> actions."""

    def __init__(self, path: str | Path) -> None:
        try:
            import onnxruntime
        except ImportError:
            raise MissingExtra("playing an exported .onnx policy needs onnxruntime: "
                               "pip install -e \".[onnx]\"") from None
        self.path = Path(path)
        try:
            self.session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime's own errors (a file that is not a model) have no common base
            raise CheckpointError(f"{str(path)!r} is not an ONNX model onnxruntime can run: {e}") from None
        self.metadata = dict(self.session.get_modelmeta().custom_metadata_map)
        missing = [k for k in ("task", *INTERFACE) if k not in self.metadata]
        if missing:
            raise CheckpointError(f"{str(path)!r} is not a policy exported by motrix_gym: its metadata lack {missing}")
        inputs = {i.name: i.shape for i in self.session.get_inputs()}
        if "obs" not in inputs:
            raise CheckpointError(f"{str(path)!r} has no 'obs' input (inputs {sorted(inputs)})")
        del inputs["obs"]  # its width is the observation terms' (checked against a task's by ``check``)
        # a recurrent policy's state: each input (layers, 1, hidden) comes back as the output of that
        # name with "_out" for "_in" (h_in -> h_out)
        self.state_shapes = {name: tuple(int(d) for d in shape) for name, shape in inputs.items()}
        self.is_recurrent = bool(self.state_shapes)
        self.outputs = [o.name for o in self.session.get_outputs()]
        self.state: dict[str, np.ndarray] | None = None  # per lane, for the lanes of the last call
        self.lanes = 0

    @property
    def trained_on(self) -> str:
        return self.metadata["task"]

    def check(self, env: Any, env_id: str) -> None:
        """A CheckpointError unless ``env`` (an rsl_rl adapter of ``env_id``) drives its joints and
        builds its observations as the file's metadata say."""
        from motrix_gym.learn.export import deployment_metadata

        here = deployment_metadata(env.env, env_id, self.path)
        for key in (*INTERFACE, *(k for k in OPTIONAL if k in self.metadata)):
            if self.metadata[key] != here.get(key):
                raise CheckpointError(f"{str(self.path)!r} (exported from {self.trained_on}) has {key} "
                                      f"{self.metadata[key]!r}, {env_id} has {here.get(key)!r}")

    def __call__(self, obs: TensorDict) -> torch.Tensor:
        x = obs["policy"].detach().cpu().numpy().astype(np.float32)
        lanes = x.shape[0]
        if self.state is None or self.lanes != lanes:
            self.state, self.lanes = {n: np.zeros((lanes, *s), np.float32) for n, s in self.state_shapes.items()}, lanes
        actions = []
        for i in range(lanes):  # the file serves one robot: one call per lane
            out = dict(zip(self.outputs, self.session.run(None, {"obs": x[i:i + 1],
                                                                  **{n: s[i] for n, s in self.state.items()}})))
            actions.append(out["actions"][0])
            for name in self.state:
                self.state[name][i] = out[name.removesuffix("_in") + "_out"]
        return torch.from_numpy(np.stack(actions)).to(obs["policy"].device)

    def reset(self, dones: torch.Tensor | None = None) -> None:
        """Zero the state of the lanes ``dones`` marks, or forget it (the next call starts from zeros)."""
        if dones is None or self.state is None:
            self.state = None
            return
        ended = dones.detach().cpu().numpy().astype(bool)
        for s in self.state.values():
            s[ended] = 0.0
