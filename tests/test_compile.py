"""torch.compile: each graph agrees with eager from the same state; no graph breaks, no recompiles.

Inductor's CPU code differs from eager in the last bits (even for a quaternion rotation), so
floats are compared within 1e-5 relative; RNG states, counters and flags must be identical.
"""

import math
import threading

import numpy as np
import pytest
import torch

from conftest import random_actions, restore, snapshot, with_a_graph_break

RTOL, ATOL = 1e-5, 1e-6


@pytest.fixture(scope="module", params=["G1WalkFlat", "G1WalkStairs"], ids=["plain kernels", "vector kernels"])
def compiled(request):
    from motrix_gym.vector_env import MotrixVectorEnv

    env = MotrixVectorEnv(request.param, 16, compile=True, progress=False)
    assert env.task.vector_graph(("policy",)) == (request.param == "G1WalkStairs")
    env.reset(seed=0)
    for a in random_actions(30, 16, 29, seed=1):
        env.step(a)
    yield env
    env.close()


def compare(after_c: dict, after_e: dict) -> None:
    for key in after_c:
        c, e = after_c[key], after_e[key]
        if c.is_floating_point():
            torch.testing.assert_close(c, e, rtol=RTOL, atol=ATOL, msg=lambda m, k=key: f"{k}: {m}")
        else:
            assert torch.equal(c, e), key


def run_both(env, fast, eager, *args) -> None:
    start = snapshot(env)
    fast(*args)
    after_c = snapshot(env)
    restore(env, start)
    eager(*args)
    compare(after_c, snapshot(env))


def test_evaluate_parity(compiled):
    rt = compiled.runtime
    run_both(compiled, rt.evaluate, rt._evaluate)
    assert rt.evaluate is not rt._evaluate


def test_reset_parity(compiled):
    rt = compiled.runtime
    mask = torch.zeros(rt.ctx.num_lanes, dtype=torch.bool)
    mask[[1, 5, 6, 12]] = True
    run_both(compiled, rt._reset_graph, rt._reset, mask)


def test_observe_parity(compiled):
    rt = compiled.runtime
    out_c = torch.zeros(rt.ctx.num_lanes, sum(rt.obs_dims["policy"]))
    out_e = out_c.clone()
    mask = torch.ones(rt.ctx.num_lanes, dtype=torch.bool)
    start = snapshot(compiled)
    rt.observe_graphs["policy"](out_c, mask)
    rng_c = rt.ctx.rng.state.clone()
    restore(compiled, start)
    rt.observe_graphs["policy"].eager(out_e, mask)
    assert torch.equal(rng_c, rt.ctx.rng.state)  # identical noise draws
    torch.testing.assert_close(out_c, out_e, rtol=RTOL, atol=ATOL)


def step_without_recompiles(env, acts: np.ndarray) -> int:
    """Step ``env`` with every graph's guards checked on every call (a graph that would need
    another version raises); returns how many episodes ended, so callers can check the reset path
    ran."""
    ended = 0
    env.runtime.check_guards = True
    for a in acts:
        _, _, term, trunc, _ = env.step(a)
        ended += int((term | trunc).sum())
    env.reset(options={"reset_mask": np.ones(env.num_envs, bool)})
    env.runtime.check_guards = False
    return ended


def test_no_graph_breaks_or_recompiles(compiled):
    """fullgraph=True turns any graph break into an error; checked guards turn any recompile into one."""
    assert step_without_recompiles(compiled, random_actions(50, 16, 29, std=2.0, seed=7)) > 0


def test_a_graph_break_fails_make_and_frees_the_simulation(monkeypatch):
    """A term that breaks its graph fails ``make`` with Dynamo's error, and the half-made env's
    batches (lanes, MuJoCo's threads) are freed then, not left to the garbage collector."""
    from motrix_gym import vector_env

    built, real = [], vector_env.build_runtime

    def recording(*args, **kwargs):
        built.append(real(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(vector_env, "build_runtime", recording)
    with pytest.raises(Exception, match="graph_break"):
        vector_env.MotrixVectorEnv(with_a_graph_break("Go1WalkFlat"), 4, compile=True, progress=False)
    assert len(built) == 1 and built[0].sim.batch is None and built[0].sim.sensing is None


def run_compiled(task: str, steps: int, **kwargs) -> None:
    """Make with compile=True (fullgraph: a graph break raises), then step with resets under
    the fail-on-recompile stance."""
    from motrix_gym.vector_env import MotrixVectorEnv

    env = MotrixVectorEnv(task, 16, compile=True, obs_groups=("policy", "critic"), progress=False, **kwargs)
    env.reset(seed=0)
    acts = random_actions(steps, 16, env.single_action_space.shape[0], std=2.0, seed=3)
    ended = step_without_recompiles(env, acts)
    env.close()
    assert ended > 0


def test_tracking_compiles_without_breaks_or_recompiles():
    run_compiled("G1WbtMix", 60)


@pytest.mark.slow
@pytest.mark.parametrize("task", ["G1WbtDance", "G1WbtKick", "T1WbtDance", "T1WbtKick"])
def test_every_task_compiles(task):
    run_compiled(task, 60)


@pytest.mark.slow
def test_play_mode_compiles():
    from motrix_gym.vector_env import MotrixVectorEnv

    env = MotrixVectorEnv("G1WbtMix", 4, compile=True, mode="play", progress=False)
    env.reset(seed=0)
    cmd = env.runtime.ctx.commands["motion"]
    env.runtime.check_guards = True
    cmd.frame[:4] = cmd.clip_last[0] - 2  # cross a clip boundary: the sequential teleport path
    for _ in range(5):
        env.step(np.zeros((4, 29), np.float32))
    assert (cmd.clip[:4] == 1).all()
    env.close()


def test_many_compiled_envs_in_one_process():
    """Graphs compiled ahead of time bypass Dynamo's per-code cache: making more envs than its
    recompile limit in one process works (the limit is lowered here to keep the test short)."""
    from motrix_gym.vector_env import MotrixVectorEnv

    default = torch._dynamo.config.recompile_limit
    with torch._dynamo.config.patch(recompile_limit=2):
        for i in range(4):
            env = MotrixVectorEnv("G1WalkFlat", 4, compile=True, progress=False)
            env.reset(seed=i)
            env.step(np.zeros((4, 29), np.float32))
            env.close()
    assert torch._dynamo.config.recompile_limit == default  # the option is back


def test_graph_calls_skip_dynamo_once_compiled():
    from motrix_gym.runtime.graph import Graph

    x = torch.zeros(3)

    def bump(k) -> None:
        x.add_(k)

    g = Graph(bump, compile=True)
    assert g.direct is None
    g(torch.tensor(1.0))  # compiles, checks the guards
    assert g.direct is not None and g.launch is None and not g.loaded
    g(torch.tensor(2.0))  # without Dynamo; launches what the first call did
    assert g.launch is not None and g._call is g.launch and g.launch.slots == ((1, 0),)
    g(torch.tensor(3.0))  # the kernel alone, with this call's argument
    g.check(True)
    assert g._call is g.compiled
    g(torch.tensor(4.0))
    with pytest.raises(RuntimeError, match="GuardManager check failed"):
        g(torch.tensor([1.0, 1.0, 1.0]))  # another shape: an error, never a recompile
    g.check(False)
    assert g._call is g.launch
    assert torch.equal(x, torch.full((3,), 10.0))
    eager = Graph(bump, compile=False)
    eager(1.0)
    assert eager.compiled is None and torch.equal(x, torch.full((3,), 11.0))
    with pytest.raises(TypeError, match="tensors only, got float"):
        Graph(bump, compile=True)(1.0)  # a number would be a constant of the graph
    assert torch.equal(x, torch.full((3,), 11.0))


def test_graphs_compile_in_two_threads_at_once():
    """torch's compiler keeps process-wide state: envs made in two threads at once compile their
    graphs one after the other, each as it would alone."""
    from motrix_gym.runtime.graph import Graph

    start, results = threading.Barrier(2), {}

    def make(k: int) -> None:
        x = torch.zeros(64)

        def bump(a) -> None:  # a different graph per thread (a function and a constant of its own)
            x.add_(a.sin() * (k + 1))

        g = Graph(bump, compile=True)
        start.wait()
        try:
            for _ in range(3):
                g(torch.full((64,), 0.5))
            results[k] = (x.clone(), g.launch is not None)
        except Exception as e:  # noqa: BLE001 (reported below, with its thread)
            results[k] = e

    threads = [threading.Thread(target=make, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(2):
        assert not isinstance(results[k], Exception), f"thread {k}: {results[k]!r}"
        x, launched = results[k]
        torch.testing.assert_close(x, torch.full((64,), 3 * (k + 1) * math.sin(0.5)))
        assert launched


def test_recording_a_graph_s_first_calls_ignores_graphs_other_threads_run():
    """While one thread records what its graph's first call launched, another thread's env steps
    through the same hook: its kernels are not recorded as the first thread's."""
    from motrix_gym.runtime.graph import Graph, run_recording

    x, y = torch.zeros(8), torch.zeros(8)

    def bump_x(a) -> None:
        x.add_(a)

    def bump_y(a) -> None:
        y.add_(a)

    other = Graph(bump_y, compile=True)
    other(torch.ones(8))  # set up; its compiled function runs through the hook below
    mine = Graph(bump_x, compile=True)
    mine(torch.ones(8))

    def first_call(a) -> None:
        thread = threading.Thread(target=other.compiled, args=(torch.ones(8),))
        thread.start()
        thread.join()  # the other graph ran inside this recording
        mine.compiled(a)

    _, calls = run_recording(first_call, (torch.ones(8),))
    assert len(calls) == 1 and calls[0][0] is not None
    assert torch.equal(x, torch.full((8,), 2.0)) and torch.equal(y, torch.full((8,), 2.0))


class Box:  # at module level: compiled graphs' guards name the types of what they read
    last = None


def test_graphs_with_python_side_effects_keep_dynamos_code():
    """A side effect Dynamo replays in Python (here an attribute set) is not in the kernel: such a
    graph keeps calling Dynamo's code, which replays it."""
    from motrix_gym.runtime.graph import Graph

    x = torch.zeros(3)
    box = Box()

    def bump(k) -> None:
        x.add_(k)
        box.last = k

    g = Graph(bump, compile=True)
    for _ in range(4):
        k = torch.tensor(1.0)
        g(k)
        assert box.last is k
    assert g.direct is not None and g.launch is None and g._call == g.direct
    assert torch.equal(x, torch.full((3,), 4.0))


def same_without_dynamo(env, steps: int = 50) -> None:
    """The step path's graphs launch their kernels alone by default; through Dynamo and its guard
    checks, every number is the same."""
    rt = env.runtime
    used = [rt.step_graph(env.obs_groups), rt._reset_graph, *(rt.observe_graphs[g] for g in env.obs_groups)]
    assert all(g.launch is not None and g._call is g.launch for g in used)
    acts = random_actions(steps, env.num_envs, env.single_action_space.shape[0], std=2.0, seed=11)
    runs = []
    start = snapshot(env)  # reset(seed) leaves some state as it was (adaptive motion sampling)
    for check in (False, True):
        rt.check_guards = check
        restore(env, start)
        obs, _ = env.reset(seed=5)
        out = [obs]
        for a in acts:
            obs, rew, term, trunc, _ = env.step(a)
            out += [obs, rew, term, trunc]
        runs.append(out)
    rt.check_guards = False
    assert any(x.any() for x in runs[0][3::4])  # episodes ended: the reset graphs ran
    for a, b in zip(*runs):
        if isinstance(a, dict):
            for k in a:
                np.testing.assert_array_equal(a[k], b[k])
        else:
            np.testing.assert_array_equal(a, b)


def test_skipped_guard_checks_change_nothing(compiled):
    same_without_dynamo(compiled)


def test_skipped_guard_checks_change_nothing_in_tracking():
    """The motion command's reference is read through views of one buffer the graphs write (inputs
    that alias, which AOTAutograd wraps): the launched kernels handle them the same."""
    from motrix_gym.vector_env import MotrixVectorEnv

    env = MotrixVectorEnv("G1WbtMix", 16, compile=True, obs_groups=("policy", "critic"), progress=False)
    env.reset(seed=0)
    for a in random_actions(3, 16, 29, std=2.0):
        env.step(a)  # the graphs' first two calls
    same_without_dynamo(env)
    env.close()


@pytest.mark.parametrize(("task", "groups", "lanes", "launches"), [
    ("G1WalkFlat", ("policy",), 128, True), ("G1WalkFlat", ("policy",), 128, False),
    # the adaptive sampler shares statistics across lanes: the same lane count, both ways
    ("G1WbtMix", ("policy", "critic"), 64, True)], ids=["stored launches", "stored graphs", "tracking"])
def test_one_compiled_version_serves_every_lane_count(task, groups, lanes, launches):
    """The graphs compile with a symbolic lane dimension: an env of another lane count loads what
    the first one stored -- the kernels' launches, or without them the graphs -- (nothing is
    traced or compiled again), and its lanes compute bit for bit what the same lanes of the first
    env (which loaded the stored graphs) computed."""
    from torch._dynamo.utils import counters

    from motrix_gym.vector_env import MotrixVectorEnv

    actions = random_actions(40, 128, 29, std=2.0, seed=3)

    def forget_launches(env: MotrixVectorEnv) -> None:
        for g in env.runtime.graphs(env.obs_groups):
            env.runtime.store.launch_path(g.name).unlink(missing_ok=True)

    def run(n: int) -> list:
        env = MotrixVectorEnv(task, n, compile=True, obs_groups=groups, progress=False)
        out = [env.reset(seed=2)[0]]
        for a in actions:
            obs, rew, term, trunc, _ = env.step(a[:n])
            out += [obs, rew, term]
        out = [{k: v[:4] for k, v in x.items()} if isinstance(x, dict) else x[:4] for x in out]
        out.append([(g.loaded, g.from_launch) for g in env.runtime.graphs(env.obs_groups)])
        if not launches:
            forget_launches(env)
        env.close()
        return out

    env = MotrixVectorEnv(task, 64, compile=True, obs_groups=groups, progress=False)  # compiled and stored
    forget_launches(env)  # the next env loads the graphs and stores the launches
    env.close()
    small = run(64)
    misses = counters["inductor"]["fxgraph_cache_miss"]
    big = run(lanes)
    assert counters["inductor"]["fxgraph_cache_miss"] == misses  # nothing new was compiled
    assert all(loaded and not from_launch for loaded, from_launch in small[-1])
    assert len(big[-1]) >= 3 and all(loaded and from_launch == launches for loaded, from_launch in big[-1])
    for a, b in zip(small[:-1], big[:-1], strict=True):
        for k in a if isinstance(a, dict) else [None]:
            np.testing.assert_array_equal(a if k is None else a[k], b if k is None else b[k])
    assert any(t.any() for t in small[3::3])  # episodes ended in between


def test_a_term_that_fixes_the_lane_count_gets_a_clear_error():
    """A term that makes the lane count a Python number would tie the compiled graph to one lane
    count: compiling refuses it and says what to write instead (eager runs it as before)."""
    import dataclasses

    from motrix_gym.envs import task_config
    from motrix_gym.manager.terms import ObservationTerm
    from motrix_gym.vector_env import MotrixVectorEnv

    def fixed(env):
        return torch.zeros(env.num_lanes, 2)

    cfg = task_config("G1WalkFlat")
    cfg = dataclasses.replace(cfg, observations={
        **cfg.observations, "policy": (*cfg.observations["policy"], ObservationTerm("fixed", fixed))})
    with pytest.raises(RuntimeError, match="turned the lane count into a Python number"):
        MotrixVectorEnv(cfg, 64, compile=True, progress=False)
    MotrixVectorEnv(cfg, 64, compile=False).close()
