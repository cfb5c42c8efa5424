"""Stored launches: a compiled graph's kernel started in a new process without torch's compiler.

Loading a stored graph (``graph_store``) imports Dynamo and Inductor and unpickles the graph:
most of a warm start. Once a graph has been reduced to one kernel launch (``graph.Launch``), a
later process needs far less, and ``record`` writes exactly that:

- the kernel's library in Inductor's cache (its C++ wrapper, built for this machine);
- Dynamo's bytecode for the graph, which gathers the kernel's inputs from the runtime (sizes,
  strides and storage offsets of its views included, so they follow the new lane count);
- the graph's guards, rewritten as plain expressions over the same sources (``L['self'].rt...``):
  values the graph baked in, tensor dtypes, sizes and strides, the relations between symbolic
  sizes, which tensors must not alias, and torch's global state.

``load`` checks those guards on the new runtime, runs the bytecode with stand-ins for Dynamo's
helpers to gather the inputs, and returns the library's entry point with them (``graph.Graph``
launches it). What cannot be recorded -- a guard of another kind, a global the bytecode reads --
and what does not hold on load -- a failing guard, a library that is gone, another machine --
raises ``Refused``, and the graph loads the ordinary way.

Only guards about how torch dispatches operators (the torch-function mode stack, the default
device, saved-tensor hooks) and about tracing (``mark_dynamic``'s marks) are left out: a kernel
launched directly neither dispatches nor traces.
"""

from __future__ import annotations

import ast
import dis
import enum
import functools
import hashlib
import importlib
import importlib.util
import inspect
import json
import os
import platform
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

FORMAT = 2  # bump when what a record holds changes
_UTILS = "__import_torch_dot__dynamo_dot_utils"  # Dynamo's helpers, as its bytecode names them
_ENTRY = "inductor_entry_cpp"  # the entry point of Inductor's C++ wrapper library

# Guards about dispatch and about tracing (the marks ``mark_dynamic`` leaves for Dynamo to read),
# which a kernel launched directly does not go through.
_NOT_LAUNCHED = frozenset({"TORCH_FUNCTION_MODE_STACK", "DEFAULT_DEVICE", "DIMENSION_DYNAMIC_MARKING_GUARD"})
# Guards whose code is already a plain expression over the sources.
_PLAIN = frozenset({"EQUALS_MATCH", "LENGTH_CHECK", "DICT_LENGTH", "NONE_MATCH", "DICT_CONTAINS", "LAMBDA_GUARD"})
_DUNDERS = frozenset({"__dict__", "__defaults__", "__kwdefaults__", "__func__", "__self__"})
_METHODS = frozenset({"size", "stride", "storage_offset"})


class Refused(Exception):
    """What a record cannot express, or a check that fails on load."""


@functools.cache
def machine() -> str:
    """The facts a kernel library built here depends on: the processor and its instruction sets,
    the interpreter and torch."""
    flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line for line in f if line.startswith("flags")), "")
    except OSError:
        flags = platform.processor()
    return hashlib.sha256(repr((platform.machine(), flags, sys.version, torch.__version__,
                                torch.__file__)).encode()).hexdigest()[:32]


def _qualname(x: Any) -> str:
    return f"{getattr(x, '__module__', '')}.{getattr(x, '__qualname__', getattr(x, '__name__', ''))}"


# ------------------------------------------------------------------------------- guard checks
def _type_is(x: Any, name: str) -> bool:
    return _qualname(type(x)) == name


def _named(x: Any, name: str) -> bool:
    return isinstance(x, (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType)) \
        and _qualname(x) == name


def _tensor(t: Any, dtype: str, device: str, size: list, stride: list) -> bool:
    return (type(t) is torch.Tensor and str(t.dtype) == dtype and str(t.device) == device
            and t.layout == torch.strided and not t.requires_grad and t.dim() == len(size)
            and all(s is None or s == n for s, n in zip(size, t.shape))
            and all(s is None or s == n for s, n in zip(stride, t.stride())))


def _shown_as(x: Any, kind: str, text: str) -> bool:
    return _qualname(type(x)) == kind and repr(x) == text


def _no_aliasing(*ts: torch.Tensor) -> bool:
    """Dynamo's sense: no tensor comes in twice under different sources."""
    return len({id(t) for t in ts}) == len(ts)


def _storage_groups(inputs: tuple) -> list[int | None]:
    """For each input, the first input that shares its memory (itself if none; None for a
    number): which views AOTAutograd saw over one buffer when it built the kernel's inputs."""
    first: dict[int, int] = {}
    return [None if not isinstance(x, torch.Tensor) else first.setdefault(x.untyped_storage().data_ptr(), i)
            for i, x in enumerate(inputs)]


def _dict_contains(key: Any, d: dict) -> bool:
    return key in d


def _global_state(state: str) -> bool:
    return json.loads(torch._C._dynamo.guards.GlobalStateGuard().__getstate__()) == json.loads(state)


_HELPERS: dict[str, Callable] = {"___type_is": _type_is, "___named": _named, "___tensor": _tensor,
                                 "___shown_as": _shown_as, "___no_aliasing": _no_aliasing,
                                 "___dict_contains": _dict_contains, "___global_state": _global_state,
                                 "len": len, "hasattr": hasattr}


def _checked(tree: ast.Expression) -> ast.Expression:
    """``tree`` if it only reads the sources (``L``), literals and the helpers above."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            ok = node.id == "L" or node.id in _HELPERS
        elif isinstance(node, ast.Attribute):
            ok = not node.attr.startswith("__") or node.attr in _DUNDERS
        elif isinstance(node, ast.Call):
            f = node.func
            ok = not node.keywords and (isinstance(f, ast.Name) and f.id in _HELPERS
                                        or isinstance(f, ast.Attribute) and f.attr in _METHODS)
        else:
            ok = isinstance(node, (ast.Expression, ast.Subscript, ast.Constant, ast.Compare, ast.BoolOp,
                                   ast.UnaryOp, ast.BinOp, ast.List, ast.Tuple, ast.Load, ast.operator,
                                   ast.cmpop, ast.boolop, ast.unaryop))
        if not ok:
            raise Refused(f"guard {ast.unparse(tree)!r}: {ast.unparse(node)!r} is not a plain read")
    return tree


def _parse(code: str) -> ast.Expression:
    try:
        return ast.parse(code.strip(), mode="eval")  # Dynamo's trailing comments parse away
    except SyntaxError:
        raise Refused(f"guard {code!r} is not an expression") from None


def _leading_call(code: str) -> ast.Call:
    """The call ``code`` starts with (Dynamo appends notes after some: ``..., type=<class ...>``)."""
    depth, quote = 0, None
    for i, c in enumerate(code):
        if quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                call = _parse(code[:i + 1]).body
                if isinstance(call, ast.Call):
                    return call
                break
    raise Refused(f"guard {code!r} is not a call")


def _eval(expr: str, f_locals: dict[str, Any]) -> Any:
    code = compile(_checked(_parse(expr)), "<guard>", "eval")
    return eval(code, {"__builtins__": {}, "L": f_locals, **_HELPERS})


def _leaves(manager: Any) -> list[tuple[str, str]]:
    out = [(type(g).__name__, part) for g in manager.get_leaf_guards() for part in g.verbose_code_parts()]
    for child in manager.get_child_managers():
        out += _leaves(child)
    return out


def _rewrite(kind: str, code: str, f_locals: dict[str, Any]) -> str | None:
    """Guard ``code`` of ``kind`` as an expression ``_eval`` can check in another process (None:
    nothing to check there)."""
    if kind in _NOT_LAUNCHED or code.startswith("torch._functorch.aot_autograd.utils.top_saved_tensors_hooks"):
        return None
    if kind == "GLOBAL_STATE":
        return f"___global_state({code.split(' against ', 1)[1].split('  #')[0].strip()!r})"
    tree = _parse(code) if kind in _PLAIN else None
    if kind == "EQUALS_MATCH" and isinstance(tree.body, ast.Compare) and len(tree.body.comparators) == 1:
        value = _eval(ast.unparse(tree.body.left), f_locals)
        if isinstance(value, (torch.device, torch.dtype, enum.Enum)):  # shown exactly by their repr
            return f"___shown_as({ast.unparse(tree.body.left)}, {_qualname(type(value))!r}, {repr(value)!r})"
    if tree is not None:
        return ast.unparse(_checked(tree))
    call = _leading_call(code)
    source = ast.unparse(call.args[0]) if call.args else ""
    if kind == "NO_TENSOR_ALIASING":
        return f"___no_aliasing({', '.join(ast.unparse(a) for a in call.args)})"
    value = _eval(source, f_locals)
    if kind == "TYPE_MATCH":
        return f"___type_is({source}, {_qualname(type(value))!r})"
    if kind == "ID_MATCH" and value is None:
        return f"{source} is None"
    if kind == "ID_MATCH" and _named(value, _qualname(value)):
        return f"___named({source}, {_qualname(value)!r})"
    if kind == "TENSOR_MATCH" and isinstance(value, torch.Tensor):
        kw = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg in ("size", "stride")}
        return f"___tensor({source}, {str(value.dtype)!r}, {str(value.device)!r}, {kw['size']!r}, {kw['stride']!r})"
    raise Refused(f"{kind} guard {code!r}")


def guard_expressions(guard_manager: Any, f_locals: dict[str, Any]) -> list[str]:
    """Every guard of a compiled graph as a checkable expression (``Refused`` when one is not)."""
    root = guard_manager.root
    parts = _leaves(root) + [("LAMBDA_GUARD", p) for g in root.get_epilogue_lambda_guards()
                             for p in g.verbose_code_parts()]
    exprs = [e for kind, code in parts if (e := _rewrite(kind, code, f_locals)) is not None]
    failed = [e for e in exprs if not _eval(e, f_locals)]
    if failed:  # a rewrite that does not hold where the original does
        raise Refused(f"guard {failed[0]!r} fails where the graph was compiled")
    return exprs


# --------------------------------------------------------------------------- inputs and entry
class _DynamoReads:
    """Stand-ins for the helpers Dynamo's bytecode calls to read sizes before a graph (the only
    ones ``graph.effect_free`` lets a launched graph use)."""

    @staticmethod
    def record_pregraph_bytecode_enter() -> None:
        return None

    @staticmethod
    def record_pregraph_bytecode_exit(_: Any) -> None:
        return None

    call_size = staticmethod(torch.Tensor.size)
    call_stride = staticmethod(torch.Tensor.stride)
    call_storage_offset = staticmethod(torch.Tensor.storage_offset)


def _globals_read(code: types.CodeType) -> set[str]:
    return {i.argval for i in dis.get_instructions(code) if i.opname == "LOAD_GLOBAL"}


def _graph_inputs(code: types.CodeType, compiled_fn: str, modules: dict[str, str], full: tuple) -> tuple:
    """What Dynamo's bytecode ``code`` passes to its compiled graph when called with ``full``."""
    seen: list[tuple] = []

    def capture(*args: Any) -> list:
        seen.append(args)
        return []

    glob: dict[str, Any] = {"__builtins__": __builtins__, _UTILS: _DynamoReads, compiled_fn: capture}
    glob.update({name: importlib.import_module(module) for name, module in modules.items()})
    types.FunctionType(code, glob)(*full)
    if len(seen) != 1:
        raise Refused(f"the bytecode called its graph {len(seen)} times")
    return seen[0]


def _align(graph_inputs: tuple, kernel_inputs: list) -> list[int]:
    """For each kernel input, the graph input it is. Tensors are matched by identity; the numbers
    (symbolic sizes, strides, offsets) keep their order between the two lists (AOTAutograd may
    put a view's base in place of its views, but does not reorder the numbers)."""
    numbers = [i for i, x in enumerate(graph_inputs) if not isinstance(x, torch.Tensor)]
    if [graph_inputs[i] for i in numbers] != [x for x in kernel_inputs if not isinstance(x, torch.Tensor)]:
        raise Refused("the kernel's numbers are not the graph's")
    out, k = [], iter(numbers)
    for x in kernel_inputs:
        if isinstance(x, torch.Tensor):
            i = next((i for i, y in enumerate(graph_inputs) if y is x), None)
            if i is None:
                raise Refused("a kernel input is none of the graph's inputs")
            out.append(i)
        else:
            out.append(next(k))
    return out


def _entry_library(kernel: Callable) -> str:
    """The library file of Inductor's C++ wrapper behind ``kernel`` (its Python launcher)."""
    names = set(getattr(kernel, "__code__", types.SimpleNamespace(co_names=())).co_names)
    if not {"unsafe_alloc_void_ptrs_from_tensors", "alloc_tensors_by_stealing_from_void_ptrs"} <= names:
        raise Refused("the kernel is not launched through Inductor's C++ wrapper")
    for cell in kernel.__closure__ or ():
        f = cell.cell_contents
        module = getattr(f, "__self__", None)
        if getattr(f, "__name__", None) == _ENTRY and isinstance(module, types.ModuleType):
            return str(Path(module.__file__).resolve())
    raise Refused("no entry point in the kernel's closure")


def _load_entry(path: str) -> Callable:
    name = f"{Path(path).name.split('.')[0]}.{_ENTRY}"  # the module name Inductor gives the same file
    module = sys.modules.get(name)
    if module is None:
        # the library finds torch's tensor accessor here when it initialises, as under Inductor
        os.environ["_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR"] = str(
            torch._C._dynamo.guards._torchinductor_pyobject_tensor_data_ptr)
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise Refused(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return getattr(module, _ENTRY)


class Entry:
    """The kernel's entry point called with a list of tensors, as Inductor's launcher calls it
    (numbers come as 0-d int64 tensors)."""

    __slots__ = ("entry",)

    def __init__(self, entry: Callable) -> None:
        self.entry = entry

    def __call__(self, inputs: list[torch.Tensor]) -> None:
        if self.entry(torch._C._aoti.unsafe_alloc_void_ptrs_from_tensors(inputs)):
            raise RuntimeError("a launched graph returned outputs")


# --------------------------------------------------------------------------------- the record
def f_locals(fn: Callable, full: tuple) -> dict[str, Any]:
    """The graph function's arguments by name, as its guards see them (``L``)."""
    return dict(inspect.signature(fn).bind(*full).arguments)


def record(aot: Any, fn: Callable, kernel: Callable, kernel_inputs: list, full: tuple) -> dict[str, Any]:
    """What ``load`` needs to launch ``kernel`` (which the graph ``aot``, compiled from ``fn``,
    reduced to) on another runtime: raises ``Refused`` when any part cannot be recorded."""
    code = aot.fn.__code__
    if code.co_freevars:
        raise Refused("the graph's bytecode has free variables")
    compiled = [n for n in _globals_read(code) if n.startswith("__compiled_fn")]
    modules = {n: aot.fn.__globals__[n].__name__ for n in _globals_read(code)
               if n.startswith("__import_") and n != _UTILS and isinstance(aot.fn.__globals__.get(n), types.ModuleType)}
    unknown = _globals_read(code) - {*compiled, *modules, _UTILS}
    if len(compiled) != 1 or unknown:
        raise Refused(f"the bytecode reads globals {sorted(unknown)}")
    graph_inputs = _graph_inputs(code, compiled[0], modules, full)
    if any(isinstance(x, torch.Tensor) and x.device.type != "cpu" for x in graph_inputs):
        raise Refused("a graph on a device")
    if any(not isinstance(x, torch.Tensor) and type(x) is not int for x in graph_inputs):
        raise Refused("a graph input that is neither a tensor nor an integer size")
    return {"format": FORMAT, "machine": machine(), "library": _entry_library(kernel),
            "compiled_fn": compiled[0], "modules": modules, "inputs": _align(graph_inputs, kernel_inputs),
            "storage": _storage_groups(graph_inputs),
            "guards": guard_expressions(aot._artifacts.guard_manager, f_locals(fn, full)),
            "bytecode": code}


def check_recorded_here(rec: dict[str, Any]) -> None:
    """Raise ``Refused`` unless the record was made by this version on this machine and torch
    install and its kernel library is still there: what a record's use needs before its guards."""
    if rec.get("format") != FORMAT or rec.get("machine") != machine():
        raise Refused("recorded by another version, machine or torch install")
    if not Path(rec["library"]).is_file():
        raise Refused(f"kernel library {rec['library']} is gone")


def load(rec: dict[str, Any], fn: Callable, full: tuple) -> tuple[Entry, list]:
    """The entry point and the kernel inputs for ``full`` (``fn``'s arguments) from a record;
    raises ``Refused`` when anything differs from where it was recorded."""
    check_recorded_here(rec)
    where = f_locals(fn, full)
    failed = next((g for g in rec["guards"] if not _eval(g, where)), None)
    if failed is not None:
        raise Refused(f"guard {failed!r} fails")
    graph_inputs = _graph_inputs(rec["bytecode"], rec["compiled_fn"], rec["modules"], full)
    if _storage_groups(graph_inputs) != rec["storage"]:
        raise Refused("the graph's inputs share memory otherwise")
    inputs = [graph_inputs[i] for i in rec["inputs"]]
    inputs = [x if isinstance(x, torch.Tensor) else torch.tensor(x, dtype=torch.int64) for x in inputs]
    return Entry(_load_entry(rec["library"])), inputs
