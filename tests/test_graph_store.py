"""Compiled graphs stored on disk: loaded only for the same program, unedited sources and
passing guards; anything else compiles afresh."""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import subprocess
import sys
import textwrap
import types

import pytest
import torch

from motrix_gym.runtime.graph import Graph
from motrix_gym.runtime.graph_store import GraphStore, fingerprint

MODULE = """
import torch


class Bump:
    def __init__(self, n):
        self.x = torch.zeros(n)

    def run(self, k):
        self.x.add_(k)
"""


@pytest.fixture
def bump_module(tmp_path, monkeypatch):
    """A module of its own, in a file the test may edit."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "bump_mod.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(src))
    mod = importlib.import_module("bump_mod")
    yield mod, src / "bump_mod.py"
    sys.modules.pop("bump_mod", None)


def run_once(store: GraphStore, obj, k: float = 1.0) -> Graph:
    g = Graph(obj.run, compile=True, name="run", store=store)
    g(torch.tensor(k))
    return g


def test_a_stored_graph_is_loaded_and_runs_on_the_new_objects_state(bump_module, tmp_path):
    mod, _ = bump_module
    store = GraphStore(tmp_path / "graphs", "key")
    first = mod.Bump(3)
    assert Graph(first.run, compile=True, name="run", store=store).first_start() == "compile"
    assert not run_once(store, first).loaded
    second = mod.Bump(3)
    assert Graph(second.run, compile=True, name="run", store=store).first_start() == "graph"  # no launch yet
    g = run_once(store, second, 2.0)
    assert g.loaded
    g(torch.tensor(3.0))
    g(torch.tensor(4.0))  # the launched kernel
    assert torch.equal(second.x, torch.full((3,), 9.0)) and torch.equal(first.x, torch.ones(3))
    assert not run_once(GraphStore(tmp_path / "graphs", "other"), mod.Bump(3)).loaded  # another program


def test_failing_guards_an_edited_source_or_a_broken_file_compile_afresh(bump_module, tmp_path):
    mod, path = bump_module
    store = GraphStore(tmp_path / "graphs", "key")
    run_once(store, mod.Bump(3))
    other = mod.Bump(4)  # another shape: the stored graph's guards refuse it
    g = run_once(store, other)
    assert not g.loaded and torch.equal(other.x, torch.ones(4))
    assert run_once(store, mod.Bump(4)).loaded and run_once(store, mod.Bump(3)).loaded  # two versions
    path.write_text(MODULE + "\n# edited\n")
    assert not run_once(store, mod.Bump(4)).loaded
    for stored in (tmp_path / "graphs").glob("*.graph"):
        stored.write_bytes(stored.read_bytes()[:200])
    bumped = mod.Bump(4)
    assert not run_once(store, bumped).loaded and torch.equal(bumped.x, torch.ones(4))


def test_a_graph_keeps_a_few_versions_and_replaces_the_oldest(bump_module, tmp_path):
    from motrix_gym.runtime.graph_store import VERSIONS

    mod, _ = bump_module
    store = GraphStore(tmp_path / "graphs", "key")
    for n in range(2, 3 + VERSIONS):
        assert not run_once(store, mod.Bump(n)).loaded
    assert len(list((tmp_path / "graphs").glob("*.graph"))) == VERSIONS
    assert not run_once(store, mod.Bump(2)).loaded  # the oldest went
    assert run_once(store, mod.Bump(2 + VERSIONS)).loaded


def test_only_bound_methods_without_free_variables_can_be_stored(tmp_path):
    x = torch.zeros(2)

    def f(k):
        x.add_(k)

    with pytest.raises(ValueError, match="only a bound method"):
        Graph(f, compile=True, store=GraphStore(tmp_path, "k"))


def test_the_program_fingerprint_is_the_same_in_every_process_and_follows_the_config():
    from motrix_gym.envs import task_config
    from motrix_gym.manager.resolver import resolve
    from motrix_gym.sim.scene import build_model, height_map, model_info

    def program(cfg):
        return resolve(cfg, model_info(build_model(cfg.scene, cfg.sim_dt), height_map(cfg.scene.terrain)))

    cfg = task_config("G1WalkRough")
    here = fingerprint(program(cfg))
    code = textwrap.dedent("""
        from motrix_gym.envs import task_config
        from motrix_gym.manager.resolver import resolve
        from motrix_gym.runtime.graph_store import fingerprint
        from motrix_gym.sim.scene import build_model, height_map, model_info
        cfg = task_config("G1WalkRough")
        print(fingerprint(resolve(cfg, model_info(build_model(cfg.scene, cfg.sim_dt), height_map(cfg.scene.terrain)))))
    """)
    there = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.strip()
    assert here is not None and here == there
    reward = dataclasses.replace(cfg.rewards[0], weight=cfg.rewards[0].weight + 1.0)
    assert fingerprint(program(dataclasses.replace(cfg, rewards=(reward, *cfg.rewards[1:])))) != here
    assert fingerprint(program(task_config("G1WalkFlat"))) != here


def test_objects_known_only_by_their_address_have_no_fingerprint():
    class Opaque:
        __slots__ = ()

    assert fingerprint(Opaque()) is None
    assert fingerprint((1, 2.0, "a")) == fingerprint((1, 2.0, "a")) != fingerprint((1, 2.0, "b"))
    assert fingerprint(lambda x: x + 1) == fingerprint(lambda x: x + 1) != fingerprint(lambda x: x + 2)


def test_a_store_that_cannot_be_written_warns_and_the_graph_runs(bump_module, tmp_path):
    mod, _ = bump_module
    blocked = tmp_path / "a_file"
    blocked.write_text("")
    obj = mod.Bump(3)
    with pytest.warns(UserWarning, match="not stored"):
        run_once(GraphStore(blocked, "key"), obj)
    assert torch.equal(obj.x, torch.ones(3))


def test_the_store_keeps_to_its_size_removing_the_graphs_used_longest_ago(bump_module, tmp_path):
    """Graphs of fingerprints no runtime has any more (an edited task, another torch) go first;
    a graph loaded is marked as used; the graph just stored stays whatever the cap."""
    mod, _ = bump_module
    run_once(GraphStore(tmp_path / "sized", "key"), mod.Bump(3))
    (new,) = (tmp_path / "sized").glob("*.graph")
    size = new.stat().st_size
    folder = tmp_path / "graphs"
    folder.mkdir()
    old = [folder / f"{k}-run.0.graph" for k in ("old1", "old2", "old3")]
    for age, p in zip((300, 200, 100), old):
        p.write_bytes(b"x" * 100_000)
        os.utime(p, (p.stat().st_atime - age,) * 2)
    run_once(GraphStore(folder, "key", max_bytes=size + 250_000), mod.Bump(3))
    assert [p.exists() for p in old] == [False, True, True]  # 100 kB over the cap: the oldest went
    (stored,) = folder.glob("key-*.graph")
    os.utime(stored, (stored.stat().st_atime - 1000,) * 2)
    assert run_once(GraphStore(folder, "key"), mod.Bump(3)).loaded
    assert stored.stat().st_mtime > old[2].stat().st_mtime  # loading marked it as used
    run_once(GraphStore(folder, "other", max_bytes=1), mod.Bump(3))
    assert [p.name for p in folder.glob("*.graph")] == ["other-run.0.graph"]


PROBE = """
import json, sys
from pathlib import Path
from motrix_gym.runtime.cpu_probe import CpuProbe
from torch._inductor.cpu_vec_isa import pick_vec_isa, valid_vec_isa_list
probe = CpuProbe(Path(sys.argv[1]))
probe.wait(progress=True)
try:
    isas, pick = [str(i) for i in valid_vec_isa_list()], str(pick_vec_isa())
except Exception:  # no compiler: Inductor's own error, when a graph compiles
    isas, pick = [], ""
print(json.dumps([probe.recorded, isas, pick]))
"""


def _probe(folder, **env) -> tuple[bool, list[str], str]:
    return _probe_run(folder, **env)[0]


def _probe_run(folder, **env) -> tuple[tuple[bool, list[str], str], str]:
    """What PROBE prints, and its progress bar (stderr)."""
    run = subprocess.run([sys.executable, "-c", PROBE, str(folder)], env={**os.environ, **env}, check=True,
                         capture_output=True, text=True)
    return tuple(json.loads(run.stdout.splitlines()[-1])), run.stderr


def test_cpu_probe_is_recorded_and_gives_inductors_answer(tmp_path):
    """A fresh process probes and records; the next one skips the probe and ends with the same
    instruction sets and pick as Inductor's own probe; changed facts probe again."""
    first, bar = _probe_run(tmp_path)
    assert first[0] is False and "checking which vector instructions" in bar  # the wait is named
    if not (tmp_path / "cpu_probe.json").is_file():  # some candidate failed here: never skipped
        assert _probe(tmp_path)[0] is False
        return
    assert [p.name for p in tmp_path.iterdir()] == ["cpu_probe.json"]  # written whole, nothing left over
    second, bar = _probe_run(tmp_path)
    assert second == (True, first[1], first[2]) and "vector instructions" not in bar
    assert _probe(tmp_path, ATEN_CPU_CAPABILITY="default")[0] is False


def test_cpu_probe_ignores_an_unreadable_record(tmp_path):
    (tmp_path / "cpu_probe.json").write_text("not json")
    assert _probe(tmp_path)[0] is False


def test_cpu_probe_that_fails_records_nothing(tmp_path):
    """A compiler that builds nothing fails candidates (in an empty Inductor cache, so no
    earlier build stands in): nothing is recorded, and the next process probes again. Without a
    compiler at all, nothing is recorded either."""
    cxx = tmp_path / "cxx"
    cxx.write_text("#!/bin/sh\n[ \"$1\" = --version ] && exec g++ --version\nexit 1\n")
    cxx.chmod(0o755)
    inductor = str(tmp_path / "inductor")
    recorded, isas, _ = _probe(tmp_path, CXX=str(cxx), TORCHINDUCTOR_CACHE_DIR=inductor)
    assert not recorded and isas != _probe(tmp_path / "ref")[1]
    assert not (tmp_path / "cpu_probe.json").exists()
    assert _probe(tmp_path, CXX="no-such-compiler", TORCHINDUCTOR_CACHE_DIR=inductor)[:2] == (False, [])
    assert not (tmp_path / "cpu_probe.json").exists()


def run_twice(store: GraphStore, obj, k: float = 1.0) -> Graph:
    """A graph's first two calls: the second reduces it to its kernel launch, which is stored."""
    g = Graph(obj.run, compile=True, name="run", store=store)
    g(torch.tensor(k))
    g(torch.tensor(k))
    return g


def test_a_stored_launch_runs_the_kernel_on_the_new_objects_state(bump_module, tmp_path):
    mod, _ = bump_module
    store = GraphStore(tmp_path / "graphs", "key")
    first = run_twice(store, mod.Bump(3))
    assert first.launch is not None and not first.from_launch and first.first_start() == "launch"
    obj = mod.Bump(3)
    g = run_once(store, obj, 2.0)
    assert g.loaded and g.from_launch and g.compiled is None and g._call is g.launch
    g(torch.tensor(0.5))
    assert torch.equal(obj.x, torch.full((3,), 2.5))
    g.check(True)  # guards checked on every call: the compiled graph is loaded for it
    g(torch.tensor(0.5))
    assert g.compiled is not None and g._call is g.compiled and torch.equal(obj.x, torch.full((3,), 3.0))
    g.check(False)
    assert g._call is g.launch


def test_a_stored_launch_whose_guards_fail_or_whose_sources_changed_is_not_used(bump_module, tmp_path):
    mod, path = bump_module
    store = GraphStore(tmp_path / "graphs", "key")
    run_twice(store, mod.Bump(3))
    other = mod.Bump(4)  # the kernel was built for 3 elements: its guards refuse 4
    g = run_once(store, other)
    assert not g.from_launch and not g.loaded and torch.equal(other.x, torch.ones(4))
    run_twice(store, mod.Bump(3))
    rec = store.load_launch("run")
    assert rec is not None and any("___tensor(L['self'].x" in e for e in rec["guards"])
    path.write_text(MODULE + "\n# edited\n")
    assert store.load_launch("run") is None and not run_once(store, mod.Bump(3)).from_launch


def test_a_stored_launch_of_another_machine_or_without_its_library_is_not_used(bump_module, tmp_path):
    import json

    mod, _ = bump_module
    store = GraphStore(tmp_path / "graphs", "key")
    run_twice(store, mod.Bump(3))
    path = store.launch_path("run")
    head, code = path.read_bytes().split(b"\n", 1)
    for change in ({"machine": "another"}, {"library": str(tmp_path / "gone.so")}, {"format": -1}):
        path.write_bytes(json.dumps({**json.loads(head), **change}).encode() + b"\n" + code)
        obj = mod.Bump(3)
        g = Graph(obj.run, compile=True, name="run", store=store)
        assert g.first_start() == "graph"  # what a start's progress bar says it waits for
        g(torch.tensor(1.0))
        assert g.loaded and not g.from_launch and torch.equal(obj.x, torch.ones(3))
    path.write_bytes(head[:50])
    assert store.load_launch("run") is None


def test_each_torch_install_keeps_its_own_stored_launch(bump_module, tmp_path, monkeypatch):
    """Two venvs sharing one cache: the second records its own launch instead of replacing the
    first's, so both start from a launch afterwards."""
    from motrix_gym.runtime import stored_launch

    mod, _ = bump_module
    store = GraphStore(tmp_path / "graphs", "key")
    run_twice(store, mod.Bump(3))
    with monkeypatch.context() as m:
        m.setattr(stored_launch, "machine", lambda: "another install")
        g = Graph(mod.Bump(3).run, compile=True, name="run", store=store)
        assert g.first_start() == "graph"  # this install has no launch of its own yet
        run_twice(store, mod.Bump(3))
        assert run_once(store, mod.Bump(3)).from_launch
    assert Graph(mod.Bump(3).run, compile=True, name="run", store=store).first_start() == "launch"
    obj = mod.Bump(3)
    g = run_once(store, obj, 2.0)
    assert g.from_launch and torch.equal(obj.x, torch.full((3,), 2.0))


def test_guards_are_rewritten_only_as_plain_reads():
    from motrix_gym.runtime.stored_launch import Refused, _eval

    box = {"self": types.SimpleNamespace(x=torch.zeros(2, 3), n=3)}
    assert _eval("L['self'].n == 3 and L['self'].x.size()[1] == L['self'].n", box)
    assert _eval("___tensor(L['self'].x, 'torch.float32', 'cpu', [None, 3], [3, 1])", box)
    assert not _eval("___tensor(L['self'].x, 'torch.float32', 'cpu', [None, 4], [4, 1])", box)
    for bad in ("__import__('os')", "L['self'].__class__", "open('f')", "[x for x in L]", "L['self'].x.add_(1)"):
        with pytest.raises(Refused):
            _eval(bad, box)


WARM = """
import sys, numpy as np, gymnasium as gym, motrix_gym
env = gym.make_vec("Motrix/G1WalkFlat-v0", num_envs=int(sys.argv[1]), progress=False)
env.reset(seed=0)
env.step(np.zeros(env.action_space.shape, np.float32))
graphs = env.unwrapped.runtime.graphs(env.unwrapped.obs_groups)
print(all(g.from_launch for g in graphs), "torch._dynamo" in sys.modules, "torch._inductor" in sys.modules)
"""


def test_a_warm_start_at_a_new_lane_count_imports_no_compiler():
    """After one run of a task, a new process at another lane count launches every graph's kernel
    from its stored launch, without importing Dynamo or Inductor."""
    for lanes in (64, 192):
        out = subprocess.run([sys.executable, "-c", WARM, str(lanes)], check=True, capture_output=True, text=True)
    assert out.stdout.split() == ["True", "False", "False"]
