"""Helper processes that compile some of an env's graphs while the env compiles the others.

A cold start is the compiler working through the env's graphs one after another, in one thread
(g++ aside). With more than one core, the graphs that must be compiled are shared out: the env
keeps the first (the step graph, the largest), and each helper process builds the same runtime
(same task, lane count and options), compiles the graphs it was given and stores them
(``graph_store``). The env then waits for its helpers and loads their graphs, as a later start
would. A graph compiled by a helper is the same compiled code, from the same trace, and loads only
where its guards and its files' hashes hold, so the env computes the same bits either way. A
helper that fails costs the env the time to compile its graphs itself, with a warning.

A helper starts with the env's ``sys.path``, so it imports motrix_gym and the task's term
functions from where the env did.

The ranks of a distributed run build the same graphs, so the ranks that see one graph store
(one machine) share them out the same way (``RankShare``) instead of starting helpers.
"""

from __future__ import annotations

import os
import pickle
import pickletools
import socket
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass
from typing import IO

from motrix_gym.manager.config import TaskConfig
from motrix_gym.runtime.distributed import Ranks
from motrix_gym.runtime.graph_store import GraphStore


@dataclass(frozen=True)
class Build:
    """What a helper needs to build the same runtime as the env: the task and the options of
    ``MotrixVectorEnv`` that change the graphs."""

    task: TaskConfig
    num_envs: int
    obs_groups: tuple[str, ...]
    current_kinematics: bool
    lane_offset: int
    torch_threads: int  # Inductor's C++ kernels are generated for the threads torch has

    def pickled(self) -> bytes | None:
        """This build pickled for a helper process, or None where a helper could not load it: a
        part defined in ``__main__`` (a script or a notebook) is pickled by a reference that the
        helper cannot import."""
        try:
            data = pickle.dumps(self)
        except Exception:
            return None
        strings = [arg for op, arg, _ in pickletools.genops(data) if isinstance(arg, str)]
        if "__main__" in strings or any(s.startswith("__main__ ") for s in strings):
            return None
        return data


def share(names: list[str], processes: int) -> list[list[str]]:
    """The graphs ``names`` that must be compiled, over ``processes`` processes: the env keeps
    the first; the others go round the helpers, at most one helper per graph."""
    helpers = max(0, min(processes - 1, len(names) - 1))
    return [names[1 + i::helpers] for i in range(helpers)]


class Helpers:
    """Helper processes compiling the graphs ``shares[i]`` each, for the runtime pickled in
    ``data`` (``Build.pickled``). A helper starts its interpreter and builds the runtime at once,
    and compiles after ``go``: the env starts helpers before its CPU probe, which they then find
    recorded instead of running it again.

        helpers = Helpers.start(build, 2, ["step[policy]", "reset", "observe[policy]"])
        probe.wait()          # the helpers import and build meanwhile
        helpers.go()
        ...                   # compile the env's own graph (the first) meanwhile
        helpers.wait()        # then load theirs (``helpers.names``) from the store
    """

    @classmethod
    def start(cls, build: Build, processes: int, names: list[str]) -> Helpers | None:
        """Helpers for the graphs ``names`` that must be compiled for ``build``, shared over
        ``processes`` processes (``share``); None where there is nothing to share, a helper
        could not load the build or no process could be started (with a warning)."""
        shares = share(names, processes)
        data = build.pickled() if shares else None
        if data is None:
            return None
        try:
            return cls(data, shares)
        except OSError as e:
            warnings.warn(f"no compile helper process started ({e!r}); compiling every graph here",
                          RuntimeWarning, stacklevel=2)
            return None

    def __init__(self, data: bytes, shares: list[list[str]]) -> None:
        self.shares = shares
        self.names = [n for s in shares for n in s]
        self._procs: list[tuple[subprocess.Popen, list[str], IO[bytes]]] = []
        try:
            for names in shares:
                err = tempfile.TemporaryFile()
                proc = subprocess.Popen([sys.executable, "-c", _START], stdin=subprocess.PIPE,
                                        stdout=subprocess.DEVNULL, stderr=err)
                self._procs.append((proc, names, err))
                proc.stdin.write(pickle.dumps((sys.path, (data, names))))
                proc.stdin.flush()
        except BaseException:
            self.close()
            raise

    def go(self) -> None:
        """Let the helpers compile (once this process's CPU probe is recorded)."""
        for proc, _, _ in self._procs:
            _end_input(proc, _GO)

    def wait(self) -> list[str]:
        """Wait for every helper; the names of the graphs whose helper failed (with a warning
        that quotes its error)."""
        self.go()
        failed = []
        for proc, names, err in self._procs:
            code = proc.wait()
            if code != 0:
                err.seek(0)
                lines = err.read().decode(errors="replace").strip().splitlines()
                warnings.warn(f"the helper process compiling graphs {names} failed (exit {code}: "
                              f"{lines[-1] if lines else 'no message'}); they are compiled here",
                              RuntimeWarning, stacklevel=2)
                failed += names
            err.close()
        self._procs = []
        return failed

    def close(self) -> None:
        """Stop the helpers still running (the env was interrupted or failed)."""
        for proc, _, err in self._procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            _end_input(proc)
            err.close()
        self._procs = []

    @property
    def label(self) -> str:
        return f"{len(self.shares)} helper process(es)"


def _end_input(proc: subprocess.Popen, last: bytes = b"") -> None:
    """Write ``last`` to a helper's input, if still open, and close it; a helper that is gone
    (a broken pipe) is left for ``wait`` or ``close`` to report."""
    if proc.stdin.closed:
        return
    try:
        proc.stdin.write(last)
        proc.stdin.close()
    except OSError:
        pass


class RankShare:
    """The graphs that must be compiled, shared over the ranks of a distributed run that see one
    graph store (one machine) as over helpers (``share``): the lowest of those ranks compiles
    the first graph, the others go round the rest, and each loads the others' graphs from the
    store. Ranks on other machines form groups of their own.

    ``start``, then ``wait`` or ``close``, are collectives: every rank calls them, whatever it has
    to compile, so a rank that failed tells the others, which then compile its graphs themselves
    (and meet the same error) instead of waiting for them.
    """

    @classmethod
    def start(cls, ranks: Ranks, store: GraphStore, names: list[str]) -> RankShare | None:
        """This rank's part after one collective, or None on every rank where no two ranks share
        anything (each compiles every graph it needs)."""
        try:
            store.folder.mkdir(parents=True, exist_ok=True)
            st = os.stat(store.folder)
            place: tuple | None = (socket.gethostname(), str(store.folder.resolve()), st.st_dev, st.st_ino)
        except OSError:
            place = None
        planned = cls.plan(ranks.gather((store.key, names, place)), ranks.rank)
        return None if planned is None else cls(ranks, *planned)

    @staticmethod
    def plan(every: list[tuple[str, list[str], tuple | None]], rank: int) -> tuple[list[int], list[list[str]]] | None:
        """From every rank's ``(store key, graphs to compile, store folder's place)``: the ranks
        that share with ``rank`` (itself included; those with the same three, a place known and
        graphs to compile) and each one's share, in that order; None when no rank shares."""
        def sharing(entry: tuple) -> bool:
            return bool(entry[1]) and entry[2] is not None and every.count(entry) > 1

        if not any(sharing(e) for e in every):
            return None
        if not sharing(every[rank]):
            return [rank], [[]]
        members = [r for r, e in enumerate(every) if e == every[rank]]
        names = every[rank][1]
        shares = [names[:1], *share(names, len(members))]
        return members, shares + [[] for _ in range(len(members) - len(shares))]

    def __init__(self, ranks: Ranks, members: list[int], shares: list[list[str]]) -> None:
        self.ranks, self.members, self.shares = ranks, members, shares
        self.names = [n for r, s in zip(members, shares) if r != ranks.rank for n in s]
        self._done = False

    @property
    def label(self) -> str:
        return "rank(s) " + ", ".join(str(r) for r, s in zip(self.members, self.shares) if s and r != self.ranks.rank)

    def _gather(self, ok: bool) -> list[str]:
        self._done = True
        every = self.ranks.gather(ok)
        failed = [r for r in self.members if not every[r] and r != self.ranks.rank]
        names = [n for r, s in zip(self.members, self.shares) if r in failed for n in s]
        if names:
            warnings.warn(f"rank(s) {failed} failed to compile graphs {names}; they are compiled here",
                          RuntimeWarning, stacklevel=3)
        return names

    def wait(self) -> list[str]:
        """After this rank compiled its share: wait for the others; the graphs whose rank
        failed (with a warning)."""
        return [] if self._done else self._gather(True)

    def close(self) -> None:
        """Leave without waiting (this rank failed): the others compile its share."""
        if not self._done:
            self._gather(False)


# A helper's first lines: the env's import path, then ``main``. ``_GO`` follows on its input when
# it may compile; without it (the env gone or failed) the helper ends.
_GO = b"1"
_START = ("import pickle, sys; path, job = pickle.load(sys.stdin.buffer); sys.path[:] = path; "
          "from motrix_gym.runtime.compile_helpers import main; main(*job)")


def main(data: bytes, names: list[str]) -> None:
    """A helper: build the runtime pickled in ``data``, compile and store the graphs ``names``."""
    from motrix_gym.runtime.cpu_probe import CpuProbe
    from motrix_gym.runtime.graph import import_graph_loader
    from motrix_gym.runtime.graph_store import GraphStore
    from motrix_gym.runtime.runtime import torch_threads
    from motrix_gym.vector_env import build_runtime

    build: Build = pickle.loads(data)
    rt = build_runtime(build.task, build.num_envs, compile=True, nthread=1,
                       current_kinematics=build.current_kinematics, lane_offset=build.lane_offset)
    import_graph_loader()
    if sys.stdin.buffer.read(len(_GO)) != _GO:
        rt.sim.close()
        return
    probe = CpuProbe(GraphStore.default_folder())  # recorded by the env before ``go``
    probe.wait()
    missing = [n for n in names if n not in {g.name for g in rt.graphs(build.obs_groups)}]
    if missing:
        raise SystemExit(f"no graphs {missing} in this runtime")
    with torch_threads(build.torch_threads):
        rt.warmup(build.obs_groups, progress=False, only=names)
    rt.sim.close()
