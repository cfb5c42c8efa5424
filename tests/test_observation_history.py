"""Observation history (``ObservationTerm.history``): a term's last h observations, oldest first,
filled with the first one after a reset, checked against the same task observed without it."""

import dataclasses

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from conftest import compiled_as_eager, first_lanes_alike, random_actions, tiny
from motrix_gym.envs import task_config
from motrix_gym.manager.resolver import TaskConfigError
from motrix_gym.vector_env import MotrixVectorEnv

HISTORY = {"projected_gravity": 3, "joint_pos": 2}


def with_history(history: dict[str, int], task: str = "Go1WalkFlat", **options):
    cfg = task_config(task, **options)
    policy = tuple(dataclasses.replace(t, history=history.get(t.name, 1)) for t in cfg.observations["policy"])
    return dataclasses.replace(cfg, observations={**cfg.observations, "policy": policy})


@pytest.mark.parametrize("mode", [AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP])
def test_a_history_is_the_term_s_last_observations_and_starts_full(mode):
    """Same seed and actions, with and without history: every term's newest slice is the plain
    env's, each earlier slice the plain env's from that many steps before within the episode,
    the first observation repeated at its start. Episodes end (falls) and pushes rewrite lanes
    in between (Go1WalkFlat pushes every 1-3 s), and a partial reset restarts lanes 0 and 2."""
    n = 8
    plain = MotrixVectorEnv("Go1WalkFlat", n, compile=False, autoreset_mode=mode)
    kept = MotrixVectorEnv(with_history(HISTORY), n, compile=False, autoreset_mode=mode)
    cols = plain.runtime.observation_columns("policy")
    hcols = kept.runtime.observation_columns("policy")
    assert kept.single_observation_space.shape[0] == plain.single_observation_space.shape[0] + 2 * 3 + 12
    assert [hcols[k].stop - hcols[k].start for k in HISTORY] == [9, 24]

    def check(a: np.ndarray, b: np.ndarray, started: np.ndarray, past: dict, stepped: bool = True) -> None:
        """``stepped``: every lane was observed anew (else only the ``started`` ones)."""
        for name, h in [*HISTORY.items(), ("command", 1), ("last_action", 1)]:
            now = a[:, cols[name]]
            was = past.setdefault(name, [now] * h)
            if stepped:
                was = was[1:] + [now]
            past[name] = was = [np.where(started[:, None], now, x) for x in was]
            np.testing.assert_array_equal(b[:, hcols[name]], np.concatenate(was, -1), err_msg=name)

    a, _ = plain.reset(seed=5)
    b, _ = kept.reset(seed=5)
    past: dict = {}
    check(a, b, np.ones(n, bool), past)
    ended_before, starts = np.zeros(n, bool), 0
    for t, act in enumerate(random_actions(300, n, 12, std=1.0, seed=2)):
        if t == 150:
            mask = np.zeros(n, bool)
            mask[[0, 2]] = True
            a, _ = plain.reset(options={"reset_mask": mask})
            b, _ = kept.reset(options={"reset_mask": mask})
            check(a, b, mask, past, stepped=False)  # the other lanes' observations stay as they were
            ended_before[mask] = False
        a, ra, ta, ua, _ = plain.step(act)
        b, rb, tb, ub, _ = kept.step(act)
        np.testing.assert_array_equal(ra, rb)
        ended = ta | ua
        started = ended if mode == AutoresetMode.SAME_STEP else ended_before
        check(a, b, started, past)
        starts += int(started.sum())
        ended_before = ended
    assert starts >= n  # the episodes' starts were checked, not just their middles
    plain.close()
    kept.close()


def test_with_a_history_a_lane_runs_the_same_beside_any_number_of_lanes():
    first_lanes_alike(with_history(HISTORY))


def test_a_compiled_history_agrees_with_eager_without_recompiles():
    """Compiled graphs (the step graph advances each history, the observe graph fills or replaces
    its newest entry) match eager within the compile tolerance, their guards checked on every call."""
    for env in compiled_as_eager(with_history(HISTORY)):
        env.close()


@pytest.mark.parametrize("history", [0, -1, True, 2.0, "2"])
def test_a_history_that_is_not_a_count_is_refused_naming_the_term(history):
    with pytest.raises(TaskConfigError, match=f"observation term 'joint_pos': history must be an int >= 1 .*got "
                                              f"{history!r}"):
        MotrixVectorEnv(with_history({"joint_pos": history}), 2, compile=False)



@pytest.fixture
def go1_history():
    """Go1WalkFlat with ``HISTORY``, registered as a task of its own (tiny PPO models) while the
    test runs."""
    import gymnasium as gym

    from motrix_gym.envs import TASKS
    from motrix_gym.registry import env_id, register_task

    ppo = tiny("Go1WalkFlat")
    register_task("Go1History", lambda **options: with_history(HISTORY, **options), ppo=ppo)
    yield env_id("Go1History"), ppo
    TASKS.pop("Go1History")
    gym.registry.pop(env_id("Go1History"))


def test_a_model_starts_only_from_a_checkpoint_whose_shared_terms_kept_the_same_history(go1_history, tmp_path):
    """A policy trained with a history reads wider columns: another task's run may start from its
    models only if the terms they share keep the same histories (a CheckpointError names them)."""
    from motrix_gym.learn.checkpoint import CheckpointError
    from motrix_gym.learn.train import train
    from motrix_gym.registry import env_id

    task, ppo = go1_history
    kept = train(task, iterations=1, log_dir=tmp_path, compile=False, eval_lanes=0, progress=False)
    again = train(task, iterations=1, log_dir=tmp_path, compile=False, eval_lanes=0, progress=False,
                  start_from=kept.checkpoint)  # the same histories: it starts
    assert again.iterations == 1
    with pytest.raises(CheckpointError, match=r"its actor observed \['joint_pos', 'projected_gravity'\] with "
                                              r"histories \[2, 3\], Motrix/Go1WalkFlat-v0's 'policy' "
                                              r"observations keep \[1, 1\]"):
        train(env_id("Go1WalkFlat"), iterations=1, log_dir=tmp_path / "bad", compile=False, progress=False,
              config=ppo, start_from=kept.checkpoint)
    assert not (tmp_path / "bad").exists()
