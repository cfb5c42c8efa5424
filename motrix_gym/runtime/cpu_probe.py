"""Inductor's probe of the CPU's vector instruction sets, remembered across processes.

Before a process loads or compiles its first graph, Inductor checks each vector instruction set
the CPU reports (AVX2, AVX-512, ...) by building a small library with its flags and loading it
in a child process: seconds, every process. ``CpuProbe`` records, beside the stored graphs, that
every candidate passed on this machine with this torch and this C++ compiler. A later process
with the same facts tells Inductor so through ``cpp.vec_isa_ok`` instead of probing again, and
gets the same instruction set Inductor's own probe would pick. When any candidate failed, or
nothing is recorded, the probe runs as Inductor does it, in a thread that overlaps the import
of the compiler and the start of the compile helpers. ``check_compiler`` comes first: without a
working C++ compiler and Python's headers nothing can be compiled, and the user hears so in one
line.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import sys
import threading
import warnings
from pathlib import Path

import torch

from motrix_gym.runtime.graph_store import write_atomically

RECORD = "cpu_probe.json"


class CompilerUnavailable(RuntimeError):
    """``compile=True`` where no C++ compiler works, or Python's headers are missing."""


def check_compiler() -> None:
    """Return when Inductor finds a working C++ compiler and Python's headers (every compiled
    graph is C++ that includes ``Python.h``), else raise :class:`CompilerUnavailable` saying what
    to do instead."""
    from torch._inductor import config
    from torch._inductor.cpp_builder import _get_python_related_args, get_cpp_compiler
    from torch._inductor.exc import InvalidCxxCompiler

    eager = "or run eagerly: compile=False (--no-compile)"
    try:
        get_cpp_compiler()
    except InvalidCxxCompiler:
        cxx = config.cpp.cxx if isinstance(config.cpp.cxx, (list, tuple)) else (config.cpp.cxx,)
        tried = ", ".join(c for c in cxx if c is not None)
        raise CompilerUnavailable(
            f"compile=True builds the runtime's kernels with a C++ compiler (torch.compile's Inductor), and "
            f"none works on this machine (tried {tried}; the CXX environment variable names another). Install "
            f"one (Debian/Ubuntu: apt-get install g++), {eager}") from None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Inductor's own warning about a missing Python.h: the error below says it
        include = list(dict.fromkeys(_get_python_related_args()[0]))
    if not any(os.path.isfile(os.path.join(d, "Python.h")) for d in include):
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        raise CompilerUnavailable(
            f"compile=True builds the runtime's kernels as C++ that includes Python's headers, and this "
            f"interpreter's are missing (no Python.h in {', '.join(include)}). Install them (Debian/Ubuntu: "
            f"apt-get install python{version}-dev), {eager}")


def _candidates() -> list[str]:
    """The instruction sets the CPU reports, as Inductor lists them, without checking any."""
    from torch._inductor import config
    from torch._inductor.cpu_vec_isa import valid_vec_isa_list

    with config.patch({"cpp.vec_isa_ok": True}):
        return [str(isa) for isa in valid_vec_isa_list.__wrapped__()]


def _facts(candidates: list[str]) -> str:
    """What decides the probe's result: torch, the interpreter, the machine, the compiler that
    builds the test libraries, Inductor's settings for picking one, and the candidates."""
    from torch._inductor import config
    from torch._inductor.cpp_builder import get_cpp_compiler

    name = get_cpp_compiler()
    compiler = shutil.which(name) or name
    st = os.stat(compiler)
    stamp = (st.st_size, st.st_mtime_ns)
    facts = [torch.__version__, torch.__file__, sys.executable, platform.machine(), compiler, stamp,
             os.environ.get("ATEN_CPU_CAPABILITY"), config.cpp.simdlen, candidates]
    return hashlib.sha256(repr(facts).encode()).hexdigest()


class CpuProbe:
    """Started when an env that compiles is made; ``wait()`` before its first graph runs.

        probe = CpuProbe(folder)  # recorded: done; else the probe starts in a thread
        ...                       # import the compiler meanwhile
        probe.wait()
    """

    def __init__(self, folder: Path) -> None:
        from torch._inductor import config
        from torch._inductor.cpu_vec_isa import valid_vec_isa_list

        self.record = folder / RECORD
        try:
            self._candidates: list[str] | None = _candidates()
            self._key: str | None = _facts(self._candidates)
        except Exception:  # the probe's facts are unknown: it runs, and records nothing
            self._candidates = self._key = None
        self.recorded = self._key is not None and self._key in self._read()
        self._thread: threading.Thread | None = None
        if self.recorded:
            with config.patch({"cpp.vec_isa_ok": True}):
                valid_vec_isa_list()  # Inductor keeps this answer for the process
        else:
            self._thread = threading.Thread(target=self._probe, name="inductor-cpu-probe", daemon=True)
            self._thread.start()

    @staticmethod
    def recorded_in(folder: Path) -> bool:
        """Whether ``folder`` holds a probe record (for some machine: ``CpuProbe`` checks whose)."""
        return (folder / RECORD).is_file()

    def _read(self) -> dict[str, bool]:
        try:
            data = json.loads(self.record.read_text())
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def _probe(self) -> None:
        from torch._inductor.cpu_vec_isa import valid_vec_isa_list

        try:
            passed = [str(isa) for isa in valid_vec_isa_list()]
        except Exception:  # the graph's own call repeats it and reports the error
            return
        if passed != self._candidates or self._key is None:
            return
        try:
            write_atomically(self.record, json.dumps({**self._read(), self._key: True}).encode())
        except OSError:  # the next process probes again
            pass

    def wait(self, progress: bool = False) -> None:
        """Until the probe is done; ``progress``: say so on a progress bar while it runs."""
        if self._thread is None or not self._thread.is_alive():
            return
        from tqdm import tqdm

        with tqdm(total=1, desc="torch.compile", disable=not progress, leave=False,
                  postfix="checking which vector instructions this CPU and compiler build (once per machine)"):
            self._thread.join()
