"""Graph: one runtime function, compiled with ``torch.compile`` and then called without Dynamo.

A call through ``torch.compile``'s wrapper passes Dynamo's frame hook, its cache lookup and its
guards before reaching the compiled code. The runtime calls each graph once or twice per step
with its caches cold from the physics in between, where that path costs far more than the graph
itself: a trivial compiled graph took 0.15-0.37 ms through Dynamo and 0.03-0.11 ms called
directly, measured on 2 cores right after 5 ms of other work.

Once a graph is compiled, Dynamo's cache holds one entry for its code: bytecode that loads the
graph's inputs from the function's arguments, closure and globals, calls the compiled graph and
writes back. ``Graph`` turns that bytecode into a plain function and calls it. Skipping Dynamo
skips its guards too, which is only safe because a runtime's graphs have one version each, over
buffers that are never replaced or reshaped; ``check(True)`` goes back to Dynamo and its guards.
"""

from __future__ import annotations

import itertools
import types
from collections.abc import Callable
from typing import Any

import torch
from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list

# A C++ wrapper calls the graph's kernels without Python in between: the evaluate graph of 64 G1
# lanes takes 0.17 ms instead of 0.42 ms, most of which was the Python wrapper's per-kernel work.
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


class Graph:
    """``fn`` run eagerly (``compile=False``) or compiled with ``fullgraph=True``; once compiled,
    called without Dynamo unless ``check(True)`` or its first call had other arguments than
    tensors. The tensors must keep their shapes, dtypes and strides from call to call.

        g = Graph(runtime._evaluate, compile=True)
        g()  # compiles, through Dynamo
        g()  # the compiled code, without Dynamo
    """

    __slots__ = ("eager", "compiled", "direct", "checking", "_own", "_ready", "_bypass", "_call")

    def __init__(self, fn: Callable, compile: bool) -> None:
        self.eager = fn
        self._call: Callable = fn
        self.compiled: Callable | None = None
        self.direct: Callable | None = None
        self.checking = self._ready = self._bypass = False
        if compile:
            self._own = own_code(fn)
            self.compiled = torch.compile(self._own, fullgraph=True, dynamic=False, options=INDUCTOR_OPTIONS)
            self._call = self._first

    def __call__(self, *args: Any) -> Any:
        return self._call(*args)

    def _first(self, *args: Any) -> Any:
        out = self.compiled(*args)
        # Dynamo bakes other arguments (numbers, flags) into the graph and guards on them.
        self._ready, self._bypass = True, all(isinstance(a, torch.Tensor) for a in args)
        self.check(self.checking)
        return out

    def check(self, on: bool) -> None:
        """Call through Dynamo, which checks the graph's guards (``on``), or without it."""
        self.checking = on
        if self._ready:
            self.direct = without_dynamo(self._own) if self._bypass and not on else None
            self._call = self.compiled if self.direct is None else self.direct
