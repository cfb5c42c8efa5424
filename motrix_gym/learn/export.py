"""A trained policy as one file for a robot's controller: ONNX (``export_onnx``) or TorchScript
(``export_jit``, for libtorch and ``torch.jit.load``), the network with its observation
normaliser, and as metadata what the controller needs around it: which joints the outputs drive
and how they become position targets, the servos' gains, the control period, and the observation
terms the input is made of, in order.

Each metadata value is a string; lists are comma-separated, in the order of the network's outputs
(joints) or of its input (observation terms). A joint's target is
``default_joint_pos + action_scale * clip(output, -action_clip, action_clip)``, not clipped to
the joint's range (the joint's limit stops it), and a servo drives it with
``joint_stiffness * (target - q) - joint_damping * qdot``, at most ``joint_effort_limit``. An
observation term is ``clip(f(state) * scale, lo, hi)``, ``f`` being the function named in
``observation_functions`` (its docstring says what it measures and in which frame) called with
its entry of ``observation_params`` (JSON: a list of one object per term, with every parameter,
defaults included, and model references by name: a height scan's grid, for one); a term whose
``observation_history`` is ``h`` > 1 is its last ``h`` values, oldest first (after a reset, ``h``
copies of the first), and its ``observation_dims`` entry is that whole width. Where the policy
observes a gait clock (``gait_phase``), ``gait_period`` is the clock's period (s): its phase is 0
at an episode's first observation and advances by ``control_dt / gait_period`` (modulo 1) before
each later one. ``recurrent`` is ``none``, ``lstm`` or ``gru``: a recurrent policy (for one
robot) also takes its state, ``h_in`` (and an LSTM's ``c_in``), each of shape
``(layers, 1, hidden)``, and returns the next, ``h_out`` (``c_out``): zeros when an episode
starts, then what the last step returned. The TorchScript file holds the same metadata as the JSON
object ``metadata.json`` among its extra files; its module maps a batch of observations to
actions, and a recurrent one keeps one robot's state itself (``reset()`` zeroes it, as an
episode starts), as rsl_rl's own TorchScript export does."""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from motrix_gym.manager.terms import Bodies, FreeBody, Joints, Sensor, term_params
from motrix_gym.mdp.observations import gait_phase

if TYPE_CHECKING:
    from motrix_gym.vector_env import MotrixVectorEnv

FORMAT = "4"  # the version of the metadata keys below


def _plain(value: Any) -> Any:
    """A term parameter as JSON: model references by their names, tuples as lists."""
    if isinstance(value, (Joints, Bodies)):
        return list(value.names)
    if isinstance(value, (Sensor, FreeBody)):
        return value.name
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def _floats(values: Any) -> str:
    return ",".join(repr(float(v)) for v in values)


def deployment_metadata(env: MotrixVectorEnv, env_id: str, checkpoint: Path) -> dict[str, str]:
    """The metadata of a policy for ``env`` trained as ``checkpoint``."""
    rt, task = env.runtime, env.task
    act = rt.program.action
    joints = act.joints.names
    robot = task.scene.robot
    servos = [robot.actuator_of(j) for j in joints]  # every action joint has one (the resolver checks)
    terms = rt.program.observations["policy"]
    clocks = {t.cfg.params["name"] for t in terms if t.func is gait_phase}
    if len(clocks) > 1:
        raise ValueError(f"{env_id}: the policy observes gait clocks {sorted(clocks)}; the metadata have room for one")
    meta = {
        "motrix_gym.format": FORMAT,
        "task": env_id,
        "checkpoint": checkpoint.name,
        "robot": robot.name,
        "control_dt": repr(float(task.step_dt)),
        "joint_names": ",".join(joints),
        "default_joint_pos": _floats(rt.program.default_qpos[act.joints.qpos].tolist()),
        "action_scale": _floats(act.scale.tolist()),
        "action_clip": repr(float(act.clip)),
        "joint_stiffness": _floats(s.stiffness for s in servos),
        "joint_damping": _floats(s.damping for s in servos),
        "joint_effort_limit": _floats(s.effort_limit for s in servos),
        "observation_names": ",".join(t.name for t in terms),
        "observation_dims": ",".join(str(d) for d in rt.obs_dims["policy"]),
        "observation_history": ",".join(str(t.cfg.history) for t in terms),
        "observation_scales": _floats(t.cfg.scale for t in terms),
        "observation_clips": ",".join("none" if t.cfg.clip is None else f"{t.cfg.clip[0]!r}:{t.cfg.clip[1]!r}"
                                      for t in terms),
        "observation_functions": ",".join(f"{t.func.__module__}.{t.func.__qualname__}" for t in terms),
        "observation_params": json.dumps([{k: _plain(v) for k, v in term_params(t.cfg).items()} for t in terms],
                                         default=repr),
    }
    if clocks:
        (clock,) = clocks
        meta["gait_period"] = repr(float(rt.ctx.commands[clock].period))
    return meta


def export_onnx(alg: Any, target: Path, metadata: dict[str, str]) -> Path:
    """The algorithm's policy (observation normaliser included) as one self-contained ONNX file
    with ``metadata`` as its metadata properties: rsl_rl's own export leaves the weights in a
    ``.data`` file beside it, which a copy of the ``.onnx`` alone would lose."""
    import onnx

    model = alg.get_policy().as_onnx(verbose=False).to("cpu").eval()
    # torch's exporter reports on its own workings here, not on the policy: operators of
    # torchvision it skips, an RNN's weights it reads as attributes, a deprecation inside torch
    registration = logging.getLogger("torch.onnx._internal.exporter._registration")
    level = registration.level
    registration.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", r"The tensor attributes self\.rnn\._flat_weights", UserWarning)
            warnings.filterwarnings("ignore", r"`isinstance\(treespec, LeafSpec\)` is deprecated", FutureWarning)
            torch.onnx.export(model, model.get_dummy_inputs(), target, opset_version=18, verbose=False,
                              input_names=model.input_names, output_names=model.output_names, external_data=False)
    finally:
        registration.setLevel(level)
    proto = onnx.load(target)
    recurrent = model.rnn_type if model.is_recurrent else "none"
    for key, value in {**metadata, "recurrent": recurrent}.items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, value
    part = target.with_name(target.name + ".part")  # a run killed while writing keeps no half file
    onnx.save(proto, part)
    part.replace(target)
    return target


def export_jit(alg: Any, target: Path, metadata: dict[str, str]) -> Path:
    """The algorithm's policy (observation normaliser included) as one TorchScript file, with
    ``metadata`` (and ``recurrent``) as the JSON extra file ``metadata.json``."""
    policy = alg.get_policy()
    recurrent = type(policy.rnn.rnn).__name__.lower() if policy.is_recurrent else "none"  # lstm or gru
    part = target.with_name(target.name + ".part")  # a run killed while writing keeps no half file
    with warnings.catch_warnings():  # torch deprecates TorchScript for torch.export; its loaders still read it
        warnings.filterwarnings("ignore", r"`torch\.jit\.(script|save)` is deprecated", DeprecationWarning)
        module = torch.jit.script(policy.as_jit().to("cpu").eval())
        extra = {"metadata.json": json.dumps({**metadata, "recurrent": recurrent})}
        torch.jit.save(module, str(part), _extra_files=extra)
    part.replace(target)
    return target
