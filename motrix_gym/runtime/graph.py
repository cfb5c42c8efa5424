"""Graph: one runtime function, compiled with ``torch.compile`` and then called without Dynamo.

A call through ``torch.compile``'s wrapper passes Dynamo's frame hook, its cache lookup and its
guards before reaching the compiled code. The runtime calls each graph once or twice per step
with its caches cold from the physics in between, where that path costs more than a small graph
itself (docs/performance.md).

Once a graph is compiled, Dynamo's cache holds one entry for its code: bytecode that loads the
graph's inputs from the function's arguments, closure and globals, calls the compiled graph and
writes back. ``Graph`` turns that bytecode into a plain function and calls it. Skipping Dynamo
skips its guards too, which is only safe because a runtime's graphs have one version each, over
buffers that are never replaced or reshaped; ``check(True)`` goes back to Dynamo and its guards.

Below that bytecode, AOTAutograd's and Inductor's wrappers still run in Python on every call
before the kernel (about ten calls deep). Where a graph's first two calls show that all they do
is launch one kernel with the same tensors (and the call's own arguments), with no outputs to
apply and nothing for Dynamo to replay, later calls launch that kernel directly (``Launch``).
"""

from __future__ import annotations

import dis
import itertools
import types
from collections.abc import Callable
from typing import Any

import torch
from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list
from torch._inductor.output_code import CompiledFxGraph
from torch.fx.experimental.symbolic_shapes import ConstraintViolationError

# A C++ wrapper calls the graph's kernels without Python in between (the Python wrapper's work
# per kernel is most of a small graph's cost).
INDUCTOR_OPTIONS = {"cpp_wrapper": True}

_instances = itertools.count()


def _code(fn: Callable) -> types.CodeType:
    return (fn.__func__ if isinstance(fn, types.MethodType) else fn).__code__


def _with_code(fn: Callable, code: types.CodeType) -> Callable:
    """``fn`` (a function or bound method) running ``code``, with the same globals, closure,
    defaults and ``self``."""
    bound = isinstance(fn, types.MethodType)
    f = fn.__func__ if bound else fn
    g = types.FunctionType(code, f.__globals__, code.co_name, f.__defaults__, f.__closure__)
    g.__kwdefaults__ = f.__kwdefaults__
    return types.MethodType(g, fn.__self__) if bound else g


def own_code(fn: Callable) -> Callable:
    """``fn`` (a function or bound method) with a code object of its own.

    Dynamo caches compiled graphs on the code object and guards them on the objects they close
    over. Every runtime would otherwise add a recompilation of the same ``_evaluate`` code: past
    ``recompile_limit`` (8) runtimes in one process compiling fails, and each call checks the
    guards of every runtime ever made. A private code object per runtime avoids both, and its
    graphs are freed with it.
    """
    code = _code(fn)
    return _with_code(fn, code.replace(co_name=f"{code.co_name}_{next(_instances)}"))


def without_dynamo(fn: Callable) -> Callable | None:
    """The function Dynamo runs in place of ``fn`` (from ``own_code``), as a plain function, or
    None unless Dynamo holds exactly one compiled version of ``fn``'s code."""
    entries = _debug_get_cache_entry_list(_code(fn))
    return _with_code(fn, entries[0].code) if len(entries) == 1 else None


def run_recording(fn: Callable, args: tuple) -> tuple[Any, list[tuple[Any, list, Any]]]:
    """``fn(*args)``, and each compiled Inductor graph it ran: ``(graph, inputs, outputs)``."""
    calls: list[tuple[Any, list, Any]] = []
    run = CompiledFxGraph.__call__

    def record(graph: CompiledFxGraph, inputs: list) -> Any:
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

    def __init__(self, calls: list[tuple[Any, list, Any]], args: tuple) -> None:
        ((graph, inputs, _),) = calls
        self.kernel, self.inputs = graph.current_callable, inputs
        self.slots = tuple((i, j) for i, x in enumerate(inputs) for j, a in enumerate(args) if a is x)

    @staticmethod
    def of(calls: list[tuple[Any, list, Any]], args: tuple) -> Launch | None:
        """The launch when the call ran one compiled graph with no outputs (every effect is a
        write inside the kernel), else None."""
        return Launch(calls, args) if len(calls) == 1 and not calls[0][2] else None

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
    """``fn`` run eagerly (``compile=False``) or compiled with ``fullgraph=True``; once compiled,
    called without Dynamo unless ``check(True)`` or its first call had other arguments than
    tensors. The tensors must keep their shapes, dtypes and strides from call to call. With
    ``lanes``, tensor arguments whose leading dimension is ``lanes`` get a symbolic leading
    dimension (``torch._dynamo.mark_dynamic``), as the runtime gives its per-lane buffers.

        g = Graph(runtime._evaluate, compile=True)
        g()  # compiles, through Dynamo
        g()  # Dynamo's code for it, without Dynamo
        g()  # the kernel alone (``g.launch``), when the first two calls allow it
    """

    __slots__ = ("eager", "compiled", "direct", "launch", "checking", "lanes", "_own", "_ready", "_bypass", "_call",
                 "_seen")

    def __init__(self, fn: Callable, compile: bool, lanes: int | None = None) -> None:
        self.eager = fn
        self.lanes = lanes
        self._call: Callable = fn
        self.compiled: Callable | None = None
        self.direct: Callable | None = None
        self.launch: Launch | None = None
        self._seen: Launch | None = None
        self.checking = self._ready = self._bypass = False
        if compile:
            self._own = own_code(fn)
            self.compiled = torch.compile(self._own, fullgraph=True, dynamic=False, options=INDUCTOR_OPTIONS)
            self._call = self._first

    def __call__(self, *args: Any) -> Any:
        return self._call(*args)

    def _first(self, *args: Any) -> Any:
        for a in args:  # arguments with a leading dimension of ``lanes`` are per-lane buffers
            if self.lanes is not None and isinstance(a, torch.Tensor) and a.dim() and a.shape[0] == self.lanes:
                torch._dynamo.mark_dynamic(a, 0)
        try:
            out, calls = run_recording(self.compiled, args)
        except ConstraintViolationError as e:
            name = _code(self.eager).co_name
            raise RuntimeError(
                f"compiling the runtime's {name!r} graph: a term turned the lane count into a Python number (for "
                "example torch.zeros(env.num_lanes, 3) or x.expand(env.num_lanes, 3)); build per-lane tensors "
                "from an input's shape instead (torch.zeros_like(env.episode_step), x.expand(q.shape[0], 3)), so "
                "that one compiled graph serves every lane count. Dynamo: "
                + str(e).split("!")[0][:300] + "...") from None
        # Dynamo bakes other arguments (numbers, flags) into the graph and guards on them.
        self._ready, self._bypass = True, all(isinstance(a, torch.Tensor) for a in args)
        self._seen = Launch.of(calls, args) if self._bypass else None
        self.check(self.checking)
        return out

    def _second(self, *args: Any) -> Any:
        """The first call without Dynamo: if it launches what the first call did, later calls
        launch the kernel alone."""
        out, calls = run_recording(self.direct, args)
        launch = Launch.of(calls, args) if effect_free(self.direct) else None
        self.launch, self._seen = (launch if self._seen is not None and self._seen.same(launch) else None), None
        self.check(self.checking)
        return out

    def check(self, on: bool) -> None:
        """Call through Dynamo, which checks the graph's guards (``on``), or without it."""
        self.checking = on
        if self._ready:
            self.direct = without_dynamo(self._own) if self._bypass and not on else None
            if self.direct is None:
                self._call = self.compiled
            else:
                self._call = self.launch or (self._second if self._seen is not None else self.direct)
