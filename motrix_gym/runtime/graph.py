"""Graph: one runtime function, compiled ahead of time with ``torch.compile(...).aot_compile``
and then called without Dynamo.

A call through ``torch.compile``'s wrapper passes Dynamo's frame hook, its cache lookup and its
guards before reaching the compiled code. The runtime calls each graph once or twice per step
with its caches cold from the physics in between, where that path costs more than a small graph
itself (docs/performance.md).

Compiling ahead of time gives Dynamo's bytecode for the function (it loads the graph's inputs
from the function's arguments and closure, calls the compiled graph and writes back) as a plain
function, with the guards beside it: ``Graph`` checks them on the first call and then calls the
bytecode alone. Skipping the guards is only safe because a runtime's graphs have one version
each, over buffers that are never replaced or reshaped; ``check(True)`` checks them on every
call, and a failing check is an error, never a recompile. The same compiled function can be
stored and loaded in another process (``graph_store``), which skips tracing.

Below that bytecode, AOTAutograd's and Inductor's wrappers still run in Python on every call
before the kernel (about ten calls deep). Where a graph's first two calls show that all they do
is launch one kernel with the same tensors (and the call's own arguments), with no outputs to
apply and nothing for Dynamo to replay, later calls launch that kernel directly (``Launch``).
That launch is also stored (``stored_launch``): a later process, at any lane count, starts the
kernel from it without importing the compiler at all.
"""

from __future__ import annotations

import dis
import functools
import threading
import types
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from motrix_gym.runtime import stored_launch
from motrix_gym.runtime.graph_store import GraphStore

# torch's compiler keeps its state in the process (its config patches, FX's patcher, Inductor's
# bundler), as does ``run_recording``'s hook on its graphs' calls: envs made in two threads
# compile, load and first run their graphs one at a time
_COMPILER = threading.RLock()


def inductor_options(vector_kernels: bool = False) -> dict[str, Any]:
    """Inductor's options for the runtime's graphs.

    A C++ wrapper calls the graph's kernels without Python in between (the Python wrapper's work
    per kernel is most of a small graph's cost). Kernels are plain C++ loops unless
    ``vector_kernels``: Inductor's explicit vector code takes about twice as long to compile and
    runs no faster on a few values per lane, but faster on many (a height scan's points, the
    tracked bodies of a motion reference); ``docs/performance.md`` has both. No precompiled
    header: building one costs more than it saves over the one to three graphs a process
    compiles (the env and its helpers share a cold start's graphs)."""
    options = {"cpp_wrapper": True, "cpp_cache_precompile_headers": False}
    return options if vector_kernels else {**options, "cpp.simdlen": 0}


# What ``torch._dynamo.mark_dynamic`` leaves on a tensor. A graph loaded from disk was traced
# from tensors that, as torch stores them, carry no marks, and its guards refuse marked ones: the
# marks live only while a graph is traced.
_MARKS = ("_dynamo_dynamic_indices", "_dynamo_dynamic_range", "_dynamo_hint_overrides", "_specialize_on",
          "_has_dynamo_dim_marking")


def import_graph_loader() -> None:
    """Import the compiler modules that loading a stored graph runs (seconds of module code on
    a first load), while the CPU probe's child processes run (``runtime/cpu_probe.py``)."""
    import torch._dynamo.aot_compile  # noqa: F401
    import torch._inductor.graph  # noqa: F401


@contextmanager
def lane_dimension_marked(tensors: Iterable[torch.Tensor]) -> Iterator[None]:
    """``tensors``' leading dimension symbolic for the graphs traced inside."""
    tensors = list(tensors)
    for t in tensors:
        torch._dynamo.mark_dynamic(t, 0)
    try:
        yield
    finally:
        for t in tensors:
            for name in _MARKS:
                if name in t.__dict__:
                    delattr(t, name)


def run_recording(fn: Callable, args: tuple) -> tuple[Any, list[tuple[Any, list, Any]]]:
    """``fn(*args)``, and each compiled Inductor graph it ran: ``(graph, inputs, outputs)``."""
    from torch._inductor.output_code import CompiledFxGraph  # the compiler stack: imported when compiling

    calls: list[tuple[Any, list, Any]] = []
    me = threading.get_ident()
    with _COMPILER:
        run = CompiledFxGraph.__call__

        def record(graph: Any, inputs: list) -> Any:
            if threading.get_ident() != me:  # another thread's env, stepping meanwhile
                return run(graph, inputs)
            given = list(inputs)  # the kernel empties the list
            out = run(graph, inputs)
            calls.append((graph, given, out))
            return out

        CompiledFxGraph.__call__ = record  # type: ignore[method-assign]
        try:
            return fn(*args), calls
        finally:
            CompiledFxGraph.__call__ = run  # type: ignore[method-assign]


# Names through which Dynamo's code replays side effects in Python (container and object
# mutations, hooks); attribute and item stores are caught by their opcodes.
_MUTATORS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "update", "add", "discard",
                       "setdefault", "__setitem__", "__delitem__", "__setattr__", "__delattr__", "setattr",
                       "delattr", "register_hook", "_register_hook", "set_"})


# What Dynamo's own helpers may do in a graph's code without side effects: mark its start and
# end, and read symbolic sizes, strides and storage offsets of the inputs.
_READS = frozenset({"record_pregraph_bytecode_enter", "record_pregraph_bytecode_exit", "call_size", "call_stride",
                    "call_storage_offset"})


def effect_free(fn: Callable) -> bool:
    """Whether Dynamo's code ``fn`` does nothing but call the compiled graph: it stores only into
    its own locals, uses no helper of Dynamo's but those in ``_READS`` and calls nothing that
    mutates. Side effects Dynamo replays in Python (an attribute set, a list appended to) need a
    store, a helper such as ``object_setattr_ignore_descriptor`` or a mutating call."""
    ins = list(dis.get_instructions(fn))
    stores = [i for i in ins if i.opname.startswith(("STORE_", "DELETE_")) and not i.opname.endswith("_FAST")]
    names = {i.argval for i in ins if i.opname in ("LOAD_ATTR", "LOAD_GLOBAL", "LOAD_METHOD", "LOAD_NAME")}
    helpers = {i.argval for prev, i in zip(ins, ins[1:]) if prev.opname == "LOAD_GLOBAL"
               and str(prev.argval).startswith("__import_torch") and i.opname in ("LOAD_ATTR", "LOAD_METHOD")}
    return not stores and not names & _MUTATORS and helpers <= _READS


def _same(a: Any, b: Any) -> bool:
    return a is b or (isinstance(a, int) and not isinstance(a, bool) and type(a) is type(b) and a == b)


class Launch:
    """A graph call reduced to its Inductor kernel: ``inputs`` with ``args[j]`` at position ``i``
    for each ``(i, j)`` in ``slots``, the rest the same tensors every call."""

    __slots__ = ("kernel", "inputs", "slots")

    def __init__(self, kernel: Callable[[list], Any], inputs: list, args: tuple) -> None:
        self.kernel, self.inputs = kernel, inputs
        self.slots = tuple((i, j) for i, x in enumerate(inputs) for j, a in enumerate(args) if a is x)

    @staticmethod
    def of(calls: list[tuple[Any, list, Any]], args: tuple) -> Launch | None:
        """The launch when the call ran one compiled graph with no outputs (every effect is a
        write inside the kernel), else None."""
        if len(calls) != 1 or calls[0][2]:
            return None
        ((graph, inputs, _),) = calls
        return Launch(graph.current_callable, inputs, args)

    def same(self, other: Launch | None) -> bool:
        """Whether ``other`` launches the same kernel with the same tensors (by identity) and the
        same sizes (by value: a symbolic lane dimension's size is an input)."""
        fixed = {i for i, _ in self.slots}
        return (other is not None and other.kernel is self.kernel and other.slots == self.slots
                and len(other.inputs) == len(self.inputs)
                and all(_same(a, b) for i, (a, b) in enumerate(zip(self.inputs, other.inputs)) if i not in fixed))

    def __call__(self, *args: Any) -> None:
        inputs = self.inputs.copy()
        for i, j in self.slots:
            inputs[i] = args[j]
        self.kernel(inputs)


class Graph:
    """``fn`` run eagerly (``compile=False``) or compiled ahead of time with ``fullgraph=True``,
    then called without Dynamo unless ``check(True)``. Arguments are tensors that keep their
    shapes, dtypes and strides from call to call. Tensor arguments whose leading dimension is
    ``lanes``, and the tensors ``lane_tensors()`` returns (the per-lane state ``fn`` reads), get
    a symbolic leading dimension.

    With ``store``, a bound method ``fn`` is looked up there under ``name`` first and stored
    after compiling; the stored function takes ``fn.__self__`` as its first argument, so a graph
    traced for one runtime runs on another's state. ``options``: Inductor's, ``inductor_options()``
    by default.

        g = Graph(runtime._reset, compile=True, lanes=64)
        g(mask)  # compiles (or loads), checks the guards
        g(mask)  # Dynamo's code for it, without guards
        g(mask)  # the kernel alone (``g.launch``), when the first two calls allow it
    """

    __slots__ = ("eager", "compiled", "direct", "launch", "checking", "lanes", "name", "store", "loaded",
                 "from_launch", "_lane_tensors", "_owner", "_ready", "_call", "_seen", "_aot", "_options")

    def __init__(self, fn: Callable, compile: bool, lanes: int | None = None, *, name: str | None = None,
                 store: GraphStore | None = None, lane_tensors: Callable[[], list[torch.Tensor]] = list,
                 options: dict[str, Any] | None = None) -> None:
        self.eager = fn
        self.lanes = lanes
        self.name = name or getattr(fn, "__name__", "graph")
        self._owner = fn.__self__ if isinstance(fn, types.MethodType) else None
        if store is not None and (self._owner is None or fn.__func__.__code__.co_freevars):
            raise ValueError(f"graph {self.name!r}: only a bound method without free variables can be stored "
                             "(its state must come in as an argument)")
        self.store = store
        self._lane_tensors = lane_tensors
        self._options = inductor_options() if options is None else options
        self._call: Callable = self._first if compile else fn
        self.compiled: Callable | None = None  # through the guards
        self.direct: Callable | None = None  # Dynamo's code alone
        self.launch: Launch | None = None
        self.loaded = False  # whether ``store`` had it
        self.from_launch = False  # loaded as a stored launch, without the compiler
        self._seen: Launch | None = None
        self._aot: Any = None
        self.checking = self._ready = False

    def __call__(self, *args: Any) -> Any:
        return self._call(*args)

    def first_start(self) -> str:
        """How the first call will likely get the compiled graph, as far as the store tells without
        loading it: ``"launch"`` (a stored launch recorded here), ``"graph"`` (a stored graph,
        whose guards are checked then) or ``"compile"``."""
        if self.store is None:
            return "compile"
        rec = self.store.load_launch(self.name)
        if rec is not None:
            try:
                stored_launch.check_recorded_here(rec)
                return "launch"
            except (stored_launch.Refused, KeyError, TypeError):
                pass
        return "graph" if self.store.has(self.name) else "compile"

    @property
    def _function(self) -> Callable:
        """The plain function the graph is made from (a bound method's function takes its object
        as the first argument, ``_args``)."""
        return self.eager.__func__ if self._owner is not None else self.eager

    def _args(self, args: tuple) -> tuple:
        return args if self._owner is None else (self._owner, *args)

    def _compile(self, args: tuple) -> Any:
        from torch.fx.experimental.symbolic_shapes import ConstraintViolationError

        lanes = [a for a in args if self.lanes is not None and a.dim() and a.shape[0] == self.lanes]
        try:
            # ``aot_compile`` is what makes a graph storable and callable without Dynamo; torch
            # 2.13 offers it by default, 2.11 (what some CUDA machines carry) only when asked
            with lane_dimension_marked([*self._lane_tensors(), *lanes]), \
                    torch._dynamo.config.patch(enable_aot_compile=True):
                compiled = torch.compile(self._function, fullgraph=True, dynamic=False, options=self._options)
                return compiled.aot_compile((self._args(args), {}))
        except ConstraintViolationError as e:
            raise RuntimeError(
                f"compiling the runtime's {self.name!r} graph: a term turned the lane count into a Python number "
                "(for example torch.zeros(env.num_lanes, 3) or x.expand(env.num_lanes, 3)); build per-lane "
                "tensors from an input's shape instead (torch.zeros_like(env.episode_step), x.expand(q.shape[0], "
                "3)), so that one compiled graph serves every lane count. Dynamo: "
                + str(e).split("!")[0][:300] + "...") from None

    def _first(self, *args: Any) -> Any:
        bad = [type(a).__name__ for a in args if not isinstance(a, torch.Tensor)]
        if bad:
            raise TypeError(f"graph {self.name!r}: compiled graphs take tensors only, got {', '.join(bad)} (a "
                            "number would be baked into the graph: pass it as a tensor)")
        full = self._args(args)
        if self.store is not None and not self.checking and self._launch_stored(args, full):
            self.launch(*args)
            return None
        self._resolve(args, full)
        out, calls = run_recording(self.compiled, args)
        self._seen = Launch.of(calls, args)
        self._ready = True
        self.check(self.checking)
        return out

    def _resolve(self, args: tuple, full: tuple) -> None:
        """Load the compiled graph from the store (its guards passing on ``full``), else compile
        (and store) it."""
        import_graph_loader()  # also the modules whose files a stored graph's manifest names
        with _COMPILER:
            aot = None
            if self.store is not None:
                # Loading builds the graph's C++ again unless Inductor's file cache has the library,
                # which it finds only under the flags it was built with: load under its options.
                with torch._inductor.config.patch(self._options):
                    aot = self.store.load(self.name, lambda a: a.guard_check(*full))
            self.loaded = aot is not None
            if aot is None:
                aot = self._compile(args)
                if self.store is not None:
                    self.store.save(self.name, aot)
        self._aot = aot
        if self._owner is None:
            self.compiled, self.direct = aot, aot.fn
        else:
            self.compiled, self.direct = functools.partial(aot, self._owner), types.MethodType(aot.fn, self._owner)

    def _first_checked(self, *args: Any) -> Any:
        """The first call with guards of a graph set up from a stored launch: the compiled graph
        is loaded for it."""
        self._resolve(args, self._args(args))
        self._call = self.compiled
        return self.compiled(*args)

    def _second(self, *args: Any) -> Any:
        """The first call without Dynamo: if it launches what the first call did, later calls
        launch the kernel alone."""
        out, calls = run_recording(self.direct, args)
        fn = self.direct.__func__ if isinstance(self.direct, types.MethodType) else self.direct
        launch = Launch.of(calls, args) if effect_free(fn) else None
        self.launch, self._seen = (launch if self._seen is not None and self._seen.same(launch) else None), None
        if self.launch is not None and self.store is not None:
            self._store_launch(args)
        self.check(self.checking)
        return out

    def _store_launch(self, args: tuple) -> None:
        """Record this graph's launch for later processes (``stored_launch``), when it can be."""
        try:
            rec = stored_launch.record(self._aot, self._function, self.launch.kernel, self.launch.inputs,
                                       self._args(args))
        except Exception:  # Refused, or torch internals other than expected: this graph loads as before
            return
        self.store.save_launch(self.name, self._aot, rec)

    def _launch_stored(self, args: tuple, full: tuple) -> bool:
        """Set this graph up from its stored launch, when there is one that holds here."""
        rec = self.store.load_launch(self.name)
        if rec is None:
            return False
        try:
            kernel, inputs = stored_launch.load(rec, self._function, full)
        except (stored_launch.Refused, KeyError, TypeError, ValueError, OSError, ImportError):
            return False  # a record that does not hold here, or that this version cannot read
        self.launch = Launch(kernel, inputs, args)
        self.loaded = self.from_launch = self._ready = True
        self.check(self.checking)
        return True

    def check(self, on: bool) -> None:
        """Check the graph's guards on every call (``on``), or call it without them. A graph set
        up from a stored launch loads the compiled graph for that at its next call."""
        self.checking = on
        if self._ready:
            if on:
                self._call = self.compiled or self._first_checked
            else:
                self._call = self.launch or (self._second if self._seen is not None else self.direct)
