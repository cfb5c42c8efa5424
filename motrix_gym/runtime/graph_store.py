"""GraphStore: compiled graphs on disk, so that a new process (at any lane count) loads them
instead of tracing them again.

Tracing a graph (Dynamo running the terms over fake tensors with a symbolic lane dimension) is
most of a warm start, and Inductor's cache does not skip it. A graph compiled ahead of time
(``torch.compile(...).aot_compile``) carries Dynamo's bytecode, Inductor's code and the guards
that can be saved; loading it skips tracing.

A stored graph is used only when all of these hold:

- its name carries the *fingerprint* of what its runtime was built from (the resolved program:
  task config, term functions by name and code, model facts, terrain), so another task or
  another config never finds it;
- every source file Dynamo traced through to build it hashes as it did then (the graph's
  *manifest*), so an edited term, helper or runtime is traced afresh;
- torch accepts it (same torch version and machine) and its guards pass on this runtime's
  tensors (dtypes, sizes but the lane dimension, strides; numbers the graph baked in).

Whatever fails, the graph is compiled again and stored as another version of it (files are
written atomically: ranks of one run write the same names).

Beside each graph the store keeps its launch record (``stored_launch``), one per torch install,
with which a later process starts the graph's kernel without loading the graph or importing the
compiler.

Every edit of a task or of motrix-gym, and every torch upgrade, makes new fingerprints, and the
graphs of the old ones are never loaded again. The folder is therefore kept to ``max_bytes``:
a load marks the file as used, and a save removes the files used longest ago beyond the cap.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import getpass
import hashlib
import json
import marshal
import os
import re
import sys
import tempfile
import types
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from motrix_gym.runtime import stored_launch

# Versions kept per graph: a graph may specialize on its lane count (a branch on whether there
# are more lanes than motion frames, say), and each specialization is a version of its own.
VERSIONS = 4
MAX_BYTES = 1 << 30  # a folder of stored graphs: about six sets of every task's graphs
FORMAT = 1  # bump when what a stored graph depends on changes in a way the checks above miss


class Unstable(Exception):
    """Part of an object has no identity that survives the process (an object known only by its
    address)."""


def _code(h: Any, code: types.CodeType) -> None:
    h.update(code.co_code)
    h.update(repr((code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars)).encode())
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _code(h, c)
        else:
            h.update(repr(c).encode())


def _feed(h: Any, x: Any, seen: set[int]) -> None:
    """Feed a canonical encoding of ``x`` into the hash ``h``."""
    tag = type(x).__qualname__
    h.update(tag.encode() + b"|")
    if x is None or isinstance(x, (bool, int, float, complex, str, bytes)):
        h.update(repr(x).encode())
        return
    if isinstance(x, enum.Enum):
        h.update(f"{type(x).__module__}.{x.name}".encode())
        return
    if isinstance(x, np.ndarray):
        h.update(f"{x.dtype}{x.shape}".encode())
        h.update(hashlib.sha256(np.ascontiguousarray(x).tobytes()).digest())
        return
    if isinstance(x, torch.Tensor):
        t = x.detach().cpu().contiguous()
        h.update(f"{t.dtype}{tuple(t.shape)}".encode())
        h.update(hashlib.sha256(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"").digest())
        return
    if isinstance(x, (type, types.ModuleType)):
        h.update(f"{getattr(x, '__module__', '')}.{x.__qualname__ if isinstance(x, type) else x.__name__}".encode())
        return
    if id(x) in seen:  # a cycle: its place is encoded by the first visit
        h.update(b"<cycle>")
        return
    seen.add(id(x))
    if isinstance(x, (tuple, list, frozenset, set)):
        items = sorted(x, key=repr) if isinstance(x, (set, frozenset)) else x
        h.update(str(len(items)).encode())
        for v in items:
            _feed(h, v, seen)
    elif isinstance(x, dict):
        h.update(str(len(x)).encode())
        for k, v in x.items():
            _feed(h, k, seen)
            _feed(h, v, seen)
    elif isinstance(x, functools.partial):
        _feed(h, (x.func, x.args, x.keywords), seen)
    elif isinstance(x, (types.FunctionType, types.MethodType)):
        f = x.__func__ if isinstance(x, types.MethodType) else x
        h.update(f"{f.__module__}.{f.__qualname__}".encode())
        _code(h, f.__code__)
        _feed(h, (f.__defaults__, f.__kwdefaults__), seen)
        _feed(h, tuple(c.cell_contents for c in f.__closure__ or ()), seen)
        if isinstance(x, types.MethodType):
            _feed(h, x.__self__, seen)
    elif dataclasses.is_dataclass(x):
        for f in dataclasses.fields(x):
            h.update(f.name.encode())
            _feed(h, getattr(x, f.name), seen)
    elif isinstance(x, types.BuiltinFunctionType):
        h.update(f"{x.__module__}.{x.__qualname__}".encode())
    elif hasattr(x, "__dict__"):
        _feed(h, vars(x), seen)
    elif " at 0x" in repr(x):
        raise Unstable(f"{tag} object {x!r}")
    else:
        h.update(repr(x).encode())


def fingerprint(*objects: Any) -> str | None:
    """A hash of ``objects``' content that is the same in every process, or None when part of
    them is known only by its address."""
    h = hashlib.sha256(f"{FORMAT}|{torch.__version__}|{sys.version}".encode())
    try:
        for x in objects:
            _feed(h, x, set())
    except Unstable:
        return None
    return h.hexdigest()[:32]


def write_atomically(path: Path, data: bytes) -> None:
    """``data`` to ``path`` whole or not at all: written beside it, then moved over it (processes,
    such as the ranks of one run, may write the same file at once)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        part = Path(tmp) / path.name
        part.write_bytes(data)
        os.replace(part, path)


def _manifest(compiled: Any) -> dict[str, str | None] | None:
    """The hash of each source file the graph ``compiled`` traced; None if one has no file."""
    manifest = {m: _file_hash(m) for m in sorted({s.module for s in compiled.source_info().inlined_sources})}
    return None if None in manifest.values() else manifest


def _current(manifest: dict[str, str]) -> bool:
    """Whether every traced source file still hashes as it did."""
    return all(_file_hash(m) == h for m, h in manifest.items())


def _file_hash(module: str) -> str | None:
    path = getattr(sys.modules.get(module), "__file__", None)
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else None
    except OSError:
        return None


def inductor_cache_dir() -> Path:
    """Inductor's cache folder, found as Inductor finds it (``TORCHINDUCTOR_CACHE_DIR``, else
    ``torchinductor_<user>`` in the temporary folder) without importing Inductor, whose import
    is seconds of a start that loads stored launches only."""
    folder = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if folder is None:
        try:
            user = getpass.getuser()
        except (KeyError, ModuleNotFoundError, OSError):
            user = f"uid_{os.getuid()}" if hasattr(os, "getuid") else "unknown_user"
        folder = os.path.join(tempfile.gettempdir(), "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user))
    return Path(os.path.abspath(folder))


@dataclasses.dataclass(frozen=True)
class GraphStore:
    """Stored graphs of runtimes with fingerprint ``key``, in ``folder``, which holds at most
    ``max_bytes`` of graphs (of every key) after a save."""

    folder: Path
    key: str
    max_bytes: int = MAX_BYTES

    @classmethod
    def of(cls, *objects: Any) -> GraphStore | None:
        """The store for runtimes built from ``objects``, in ``default_folder()``; None when they
        have no fingerprint."""
        key = fingerprint(*objects)
        return None if key is None else cls(cls.default_folder(), key)

    @staticmethod
    def default_folder() -> Path:
        """Beside Inductor's code cache (``TORCHINDUCTOR_CACHE_DIR`` moves both): the graphs
        need that code, and clearing that cache clears them too."""
        return inductor_cache_dir() / "motrix_gym_graphs"

    def _versions(self, name: str) -> list[Path]:
        safe = "".join(c if c.isalnum() else "_" for c in name)
        return [self.folder / f"{self.key}-{safe}.{i}.graph" for i in range(VERSIONS)]

    def has(self, name: str) -> bool:
        """Whether a version of graph ``name`` is stored (it may still turn out stale)."""
        return any(p.is_file() for p in self._versions(name))

    def load(self, name: str, accept: Callable[[Any], bool]) -> Any | None:
        """The first stored version of graph ``name`` (as ``torch.compiler.load_compiled_function``
        gives it back) that ``accept`` takes (its guards pass), or None. A version whose traced
        files changed, that is unreadable or that torch refuses is skipped."""
        for path in self._versions(name):
            try:
                with open(path, "rb") as f:
                    if not _current(json.loads(f.readline())):
                        continue
                    compiled = torch.compiler.load_compiled_function(f)
            except Exception:  # absent, unreadable, from another torch
                continue
            if accept(compiled):
                try:
                    os.utime(path)  # used now: kept over graphs used longer ago
                except OSError:
                    pass
                return compiled
        return None

    def launch_path(self, name: str) -> Path:
        """Where this machine and torch install keep the launch record of graph ``name``: one
        file per install, since a record holds only for the install that made it and venvs may
        share one cache."""
        base = self._versions(name)[0].with_suffix("").with_suffix("")
        return base.with_name(f"{base.name}.{stored_launch.machine()[:16]}.launch")

    def save_launch(self, name: str, compiled: Any, launch: dict[str, Any]) -> None:
        """Store the launch record of graph ``name`` (compiled as ``compiled``): a line of JSON
        (the traced files' hashes and the record), then the record's bytecode, marshalled."""
        manifest = _manifest(compiled)
        if manifest is None:
            return
        # torch's own files, which a process that loads launches does not import, are covered
        # by the torch version and install path the record carries
        manifest = {m: h for m, h in manifest.items() if m.split(".")[0] != "torch"}
        head = {"manifest": manifest, **{k: v for k, v in launch.items() if k != "bytecode"}}
        try:
            data = json.dumps(head).encode() + b"\n" + marshal.dumps(launch["bytecode"])
            write_atomically(self.launch_path(name), data)
        except (OSError, ValueError) as e:
            warnings.warn(f"launch of graph {name!r} not stored in {self.folder}: {e!r}", stacklevel=2)

    def load_launch(self, name: str) -> dict[str, Any] | None:
        """The launch record of graph ``name``, or None when there is none or a file it traced
        changed."""
        path = self.launch_path(name)
        try:
            with open(path, "rb") as f:
                head = json.loads(f.readline())
                if not _current(head.pop("manifest")):
                    return None
                rec = {**head, "bytecode": marshal.loads(f.read())}
            os.utime(path)  # used now: kept over files used longer ago
            return rec
        except (OSError, ValueError, EOFError, TypeError, KeyError):
            return None

    def _slot(self, name: str) -> Path:
        """Where a new version of ``name`` goes: a free slot, else the one used longest ago."""
        versions = self._versions(name)
        free = [p for p in versions if not p.is_file()]
        return free[0] if free else min(versions, key=lambda p: p.stat().st_mtime)

    def save(self, name: str, compiled: Any) -> None:
        """Store ``compiled`` (from ``aot_compile``): one line naming the hash of each file it
        traced, then torch's serialized graph."""
        manifest = _manifest(compiled)
        if manifest is None:  # traced code without a file: never valid later
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=self.folder) as tmp:
                part = Path(tmp) / "graph"
                compiled.save_compiled_function(str(part))
                slot = self._slot(name)
                write_atomically(slot, json.dumps(manifest).encode() + b"\n" + part.read_bytes())
        except Exception as e:  # the graph runs all the same; the next start compiles it again
            warnings.warn(f"compiled graph {name!r} not stored in {self.folder}: {e!r}", stacklevel=2)
            return
        self._prune(keep=slot)

    def _prune(self, keep: Path) -> None:
        """Remove the graphs used longest ago until the folder holds at most ``max_bytes`` (never
        ``keep``, the graph just stored). Another process may remove the same files meanwhile: one
        already gone counts as removed."""
        graphs = []
        for p in [*self.folder.glob("*.graph"), *self.folder.glob("*.launch")]:
            try:
                st = p.stat()
            except OSError:
                continue
            graphs.append((st.st_mtime, st.st_size, p))
        total = sum(size for _, size, _ in graphs)
        for _, size, p in sorted(graphs, key=lambda g: g[0]):
            if total <= self.max_bytes:
                break
            if p == keep:
                continue
            try:
                p.unlink()
            except FileNotFoundError:  # another process removed it
                pass
            except OSError:
                continue
            total -= size
