"""A cold start shares the graphs it must compile with helper processes (``compile_helpers``):
the env loads what they stored and computes the same bits as an env that compiled every graph."""

import dataclasses
import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import random_actions
from motrix_gym.envs import task_config
from motrix_gym.manager.terms import RewardTerm
from motrix_gym.runtime.compile_helpers import Build, Helpers, RankShare, share


@given(st.integers(0, 8), st.integers(1, 6))
def test_every_graph_is_compiled_once_and_the_first_here(n, processes):
    names = [f"g{i}" for i in range(n)]
    shares = share(names, processes)
    shared = [x for s in shares for x in s]
    assert len(shares) <= max(0, processes - 1) and all(shares)
    assert len(set(shared)) == len(shared) and set(shared) <= set(names[1:])
    assert len(shares) == min(processes - 1, max(0, n - 1))  # as many helpers as there is work for


ENTRY = st.tuples(st.sampled_from(["key1", "key2"]),
                  st.sampled_from([[], ["step"], ["step", "reset", "observe"], ["reset", "observe"]]),
                  st.sampled_from([("host1", "/c", 1, 2), ("host2", "/c", 1, 2), None]))


@given(st.lists(ENTRY, min_size=1, max_size=9))
def test_ranks_share_within_groups_that_see_one_store(every):
    """Ranks with the same store key, graphs and store folder share those graphs: each is
    compiled by exactly one of them, the lowest compiles the first, and every member plans the
    same; ranks outside any group compile alone; no sharing anywhere is None on every rank."""
    plans = [RankShare.plan(every, r) for r in range(len(every))]
    assert len({p is None for p in plans}) == 1
    if plans[0] is None:
        assert not any(e[1] and e[2] is not None and every.count(e) > 1 for e in every)
        return
    for r, (members, shares) in enumerate(plans):
        assert r in members and len(shares) == len(members)
        if members == [r]:
            assert shares == [[]]
            continue
        assert members == [m for m, e in enumerate(every) if e == every[r]] and len(members) > 1
        assert all(plans[m] == (members, shares) for m in members)
        compiled = [n for part in shares for n in part]
        assert sorted(compiled) == sorted(every[r][1]) and shares[0] == every[r][1][:1]


RUN = """
import json, sys
import numpy as np
from motrix_gym.vector_env import MotrixVectorEnv
env = MotrixVectorEnv("G1WalkFlat", 8, compile=True, progress=False, compile_processes=int(sys.argv[3]))
out, ended = [env.reset(seed=4)[0]], 0
for a in np.load(sys.argv[1]):
    obs, rew, term, trunc, _ = env.step(a)
    out += [obs, rew, term.astype(np.float32)]
    ended += int((term | trunc).sum())
np.save(sys.argv[2], np.concatenate([x.reshape(8, -1) for x in out], axis=1))
print(json.dumps({"loaded": {g.name: g.loaded for g in env.runtime.graphs(env.obs_groups)}, "ended": ended}))
"""


def cold_run(folder, processes: int) -> tuple[dict, np.ndarray]:
    """G1WalkFlat at 8 lanes in a fresh process with an empty cache: which graphs it loaded, how
    many episodes ended and how many graph libraries Inductor built in that cache, and
    everything it returned from a reset and 40 steps of the same random actions."""
    actions = folder / "actions.npy"
    np.save(actions, random_actions(40, 8, 29, std=3.0, seed=5))
    cache = folder / f"cache{processes}"
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache)}
    done = subprocess.run([sys.executable, "-c", RUN, str(actions), str(folder / "out.npy"), str(processes)],
                          env=env, capture_output=True, text=True, check=True)
    info = json.loads(done.stdout.splitlines()[-1])
    info["libraries"] = len(list(cache.rglob("*.main.so")))  # a C++ wrapper's library: one per graph
    return info, np.load(folder / "out.npy")


def test_a_cold_start_loads_what_its_helper_compiled(tmp_path):
    """In an empty cache, the env compiles its step graph while a helper compiles the others; the
    env loads those, building nothing again, and steps bit for bit as an env that compiled every
    graph itself."""
    shared, out = cold_run(tmp_path, 2)
    alone, ref = cold_run(tmp_path, 1)
    assert shared["loaded"] == {"step[policy]": False, "reset": True, "observe[policy]": True}  # helper's
    assert not any(alone["loaded"].values())
    # the env loads its helper's libraries: none is built again (under other flags, it would be)
    assert shared["libraries"] == alone["libraries"] == 3
    np.testing.assert_array_equal(out, ref)
    assert shared["ended"] == alone["ended"] > 0  # resets after episodes ended ran too


def test_a_failing_helper_leaves_its_graphs_to_the_env(tmp_path, monkeypatch):
    """The helper imports the task's terms from the env's import path (here a module only that
    path finds), builds the runtime, and fails on a graph the runtime does not have."""
    (tmp_path / "my_terms.py").write_text("def still(env):\n    return env.episode_step * 0.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from my_terms import still

    cfg = task_config("G1WalkFlat")
    mine = dataclasses.replace(cfg, rewards=(*cfg.rewards, RewardTerm("still", still, 1.0)))
    helpers = Helpers(Build(mine, 4, ("policy",), True, 0, 1).pickled(), [["no-such-graph"]])
    with pytest.warns(RuntimeWarning, match=r"compiling graphs \['no-such-graph'\] failed.*no graphs"):
        assert helpers.wait() == ["no-such-graph"]


def test_a_helper_not_told_to_go_ends_without_compiling(tmp_path, monkeypatch):
    """Helpers start before the env's CPU probe and compile only after ``go``: one whose env
    failed or ended before that (its input closed) ends cleanly and stores nothing."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    helpers = Helpers.start(Build(task_config("G1WalkFlat"), 4, ("policy",), True, 0, 1), 2,
                            ["step[policy]", "reset"])
    assert helpers.names == ["reset"]
    for proc, _, _ in helpers._procs:
        proc.stdin.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert helpers.wait() == []
    assert not list(tmp_path.rglob("*.main.so")) and not list(tmp_path.rglob("*.graph"))


def _stand_still(env):  # a reward term defined where a helper cannot import it from
    return env.episode_step * 0.0


def test_a_task_defined_in_main_gets_no_helper(monkeypatch):
    monkeypatch.setattr(_stand_still, "__module__", "__main__")
    monkeypatch.setattr(sys.modules["__main__"], "_stand_still", _stand_still, raising=False)
    cfg = task_config("G1WalkFlat")
    assert Build(cfg, 4, ("policy",), True, 0, 1).pickled() is not None
    mine = dataclasses.replace(cfg, rewards=(*cfg.rewards, RewardTerm("still", _stand_still, 1.0)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Build(mine, 4, ("policy",), True, 0, 1).pickled() is None
