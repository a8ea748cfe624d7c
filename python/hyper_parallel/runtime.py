"""The task runtime from Python: a chip worker, callables, and orchestration functions that
submit tasks over numpy arrays (or CPU torch tensors) and let the runtime order them.

    import numpy as np
    from hyper_parallel import runtime as rt

    def add(block, x, y, z):                        # called once per block, on a chip core
        n = len(z)
        lo, hi = n * block.block_idx // block.block_dim, n * (block.block_idx + 1) // block.block_dim
        z[lo:hi] = x[lo:hi] + y[lo:hi]

    worker = rt.ChipWorker(num_cube=1, num_vector=2)
    add_slot = worker.register_callable(add)
    x, y, z = np.ones(1024, np.float32), np.arange(1024, dtype=np.float32), np.empty(1024, np.float32)

    def orchestration(o):                           # runs on the runtime's orchestration thread
        t = rt.submit(add_slot, rt.TaskArgs(rt.Arg.input(x), rt.Arg.input(y),
                                            rt.Arg.output_existing(z).dump()), block_dim=2)
        with rt.scope():                            # outputs made in here are released at its end
            w = rt.submit(add_slot, rt.TaskArgs().input(z).input(z).output(np.float32, [1024]))
            ...                                     # w.outputs[0]: a view of the heap ring

    worker.run(orchestration, rt.CallConfig(dump_args=1, dep_gen=True, output_prefix="diag"))

Semantics are the native runtime's (docs/runtime.md, native/runtime/orchestrator.h):
dependencies are inferred from the memory tensor arguments touch (RAW, WAW and WAR) plus
TaskArgs.set_dependencies; independent tasks run at once on the chip's cores; rings apply
back-pressure; a failing task fails the run, naming the task and callable. Errors raise
HpError with the native error code's name (INVALID_ARGUMENT, KERNEL_FAILED, ABORTED, ...).

Python task functions are called as fn(block, *tensors, *scalars): `block` is a Block
(block_idx, block_dim, core_type, sub_block_idx, sub_block_dim, core_idx, set_flag, wait_flag,
sync_all), tensors are numpy views of the task's memory in argument order (INPUT ones read-only,
bf16 as uint16), scalars are ints or floats in the order they were added. Blocks run on the
chip's cores; each takes the GIL for its call (numpy releases it inside large operations), and
the block's waits release it. Keep neither the block nor the views past the call.

Memory: the arrays passed in TaskArgs must stay alive and unmoved until run() returns (run
keeps a reference to every submitted TaskArgs). OUTPUT tensors live in the runtime's heap ring:
the arrays submit() returns are valid until the scope that submitted the task ends (escape()
hands them to the enclosing scope), and never after run() returns.
"""
from __future__ import annotations

import argparse
import enum
import hashlib
import marshal
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable as PyCallable, Iterator, Sequence

import numpy as np

from . import native
from . import dtypes
from .errors import HpError, hp_error


def _invalid(message: str) -> HpError:
    return hp_error("INVALID_ARGUMENT", message)


def _lib():
    return native.load_extension("core", "_hp_runtime")


class Tag(enum.IntEnum):
    """How a task uses a tensor (numbers are hp::runtime::ArgTag's)."""
    INPUT = 0            # read only
    OUTPUT = 1           # a new tensor the runtime allocates from its heap ring
    INOUT = 2            # read and written in place
    OUTPUT_EXISTING = 3  # written entirely, in caller-provided memory
    NO_DEP = 4           # passed to the task, never a dependency (the caller orders it)


# scalar dtypes the dumps name; other integer types travel as opaque 64-bit patterns
_SCALAR_NAMES = ("int8", "uint8", "int32", "int64", "fp32", "fp64")
_SCALAR_DTYPES = {d: n for d, n in dtypes.NUMPY_NAMES.items() if n in _SCALAR_NAMES and d != np.bool_}


def _is_torch(value) -> bool:
    return type(value).__module__.split(".")[0] == "torch" and hasattr(value, "data_ptr")


def _dtype_name(dtype) -> str:
    """The native name of a numpy dtype, a torch dtype or a native name ("bf16")."""
    name = dtypes.native_name(dtype)
    if name is not None:
        return name
    raise hp_error("DTYPE_MISMATCH",
                   f"dtype {dtype!r}: expected bool, int8, uint8, int32, int64, float16, float32, "
                   "float64 (numpy or torch), torch.bfloat16 or the name 'bf16'")


def _tensor_spec(tensor, tag: Tag, what: str) -> tuple:
    """(tag, address, dtype name, shape, strides in elements) of a numpy array or CPU torch
    tensor."""
    if _is_torch(tensor):
        if tensor.device.type != "cpu":
            raise _invalid(f"{what}: a tensor on {tensor.device}: the runtime runs on CPUs "
                           "(pass tensor.cpu())")
        if tag not in (Tag.INPUT, Tag.NO_DEP) and tensor.requires_grad:
            raise _invalid(f"{what}: a tensor that requires grad is written in place: "
                           "pass tensor.detach()")
        return (int(tag), tensor.data_ptr(), _dtype_name(tensor.dtype), list(tensor.shape),
                list(tensor.stride()))
    if not isinstance(tensor, np.ndarray):
        raise _invalid(f"{what}: {type(tensor).__name__} is not a numpy array or CPU torch "
                       "tensor")
    name = _dtype_name(tensor.dtype)
    if tag not in (Tag.INPUT, Tag.NO_DEP) and not tensor.flags.writeable:
        raise _invalid(f"{what}: a read-only array tagged {tag.name}: pass a writable array "
                       "or tag it INPUT")
    if any(s < 0 or s % tensor.itemsize for s in tensor.strides):
        raise _invalid(f"{what}: strides {tensor.strides} are negative or not whole elements: "
                       "pass np.ascontiguousarray(a)")
    return (int(tag), tensor.ctypes.data, name, list(tensor.shape),
            [s // tensor.itemsize for s in tensor.strides])


class Arg:
    """One tensor argument of a task: a tag and its tensor (for OUTPUT: a dtype and shape).

    Arg.input(x), Arg.inout(x), Arg.output_existing(x), Arg.no_dep(x), Arg.output(dtype, shape);
    .dump() marks it for argument dumps (CallConfig.dump_args=1).
    """

    def __init__(self, tag: Tag, tensor=None, *, dtype=None, shape: Sequence[int] | None = None):
        self.tag = Tag(tag)
        self.tensor = tensor
        self.marked = False
        if self.tag == Tag.OUTPUT:
            if tensor is not None or dtype is None or shape is None:
                raise _invalid("Arg.output(dtype, shape) takes a dtype and a shape, no tensor")
            self.dtype, self.shape = _dtype_name(dtype), [int(d) for d in shape]
        elif tensor is None:
            raise _invalid(f"Arg {self.tag.name} needs a tensor")

    @classmethod
    def input(cls, tensor) -> "Arg":
        return cls(Tag.INPUT, tensor)

    @classmethod
    def inout(cls, tensor) -> "Arg":
        return cls(Tag.INOUT, tensor)

    @classmethod
    def output_existing(cls, tensor) -> "Arg":
        return cls(Tag.OUTPUT_EXISTING, tensor)

    @classmethod
    def no_dep(cls, tensor) -> "Arg":
        return cls(Tag.NO_DEP, tensor)

    @classmethod
    def output(cls, dtype, shape: Sequence[int]) -> "Arg":
        return cls(Tag.OUTPUT, dtype=dtype, shape=shape)

    def dump(self) -> "Arg":
        """Marks this tensor for capture at dump level 1 (before and after the task)."""
        self.marked = True
        return self

    def spec(self, what: str) -> tuple:
        if self.tag == Tag.OUTPUT:
            return (int(Tag.OUTPUT), 0, self.dtype, self.shape, [])
        return _tensor_spec(self.tensor, self.tag, what)

    def __repr__(self) -> str:
        what = (f"{self.dtype}{self.shape}" if self.tag == Tag.OUTPUT
                else f"{type(self.tensor).__name__}{list(self.tensor.shape)}")
        return f"Arg.{self.tag.name.lower()}({what}){'.dump()' if self.marked else ''}"


@dataclass(frozen=True)
class Scalar:
    """A scalar argument with an explicit dtype: int8, uint8, int32, int64, fp32, fp64 (named in
    argument dumps) or bits64 (an opaque 64-bit pattern)."""
    value: int | float
    dtype: str = "int64"


def _scalar_spec(value) -> tuple:
    if isinstance(value, Scalar):
        if value.dtype == "bits64":
            return ("bits64", int(value.value) & (2**64 - 1))
        dtype = value.dtype if value.dtype in dtypes.NATIVE_NAMES else _SCALAR_DTYPES.get(np.dtype(value.dtype))
        if dtype is None or dtype not in _SCALAR_NAMES:
            raise _invalid(f"Scalar dtype {value.dtype!r}: expected int8, uint8, int32, int64, "
                           "fp32, fp64 or bits64")
        return (dtype, value.value)
    if isinstance(value, (bool, np.bool_)):
        return ("int64", int(value))
    if isinstance(value, np.generic):
        dtype = _SCALAR_DTYPES.get(value.dtype)
        if dtype is not None:
            return (dtype, value.item())
        if value.dtype.kind in "ui":
            return ("bits64", int(value) & (2**64 - 1))
    elif isinstance(value, int):
        return ("int64", value)
    elif isinstance(value, float):
        return ("fp64", value)
    raise _invalid(f"scalar {value!r}: expected an int, a float, a numpy scalar or a Scalar")


class TaskArgs:
    """The arguments of one task: tensors tagged with how the task uses them, scalars, explicit
    predecessors and dump markers.

        TaskArgs(Arg.input(x), Arg.output_existing(y).dump(), 2.0)
        TaskArgs().input(x).output_existing(y).scalar(2.0).dump()

    Tensors and scalars are indexed separately, in the order they were added (the task function
    receives the tensors first, then the scalars). Arg is the single argument; TaskArgs.dump()
    marks all of the task's tensors, dump(i, x, ...) those with index i or that are tensor x.
    """

    def __init__(self, *args):
        self.args: list[Arg] = []
        self.scalars: list = []
        self.dependencies: list[int] = []
        self.dump_all = False
        for a in args:
            if isinstance(a, Arg):
                self.args.append(a)
            else:
                self.scalar(a)

    def _add(self, arg: Arg, dump: bool) -> "TaskArgs":
        self.args.append(arg.dump() if dump else arg)
        return self

    def input(self, tensor, *, dump: bool = False) -> "TaskArgs":
        return self._add(Arg.input(tensor), dump)

    def inout(self, tensor, *, dump: bool = False) -> "TaskArgs":
        return self._add(Arg.inout(tensor), dump)

    def output_existing(self, tensor, *, dump: bool = False) -> "TaskArgs":
        return self._add(Arg.output_existing(tensor), dump)

    def no_dep(self, tensor, *, dump: bool = False) -> "TaskArgs":
        return self._add(Arg.no_dep(tensor), dump)

    def output(self, dtype, shape: Sequence[int], *, dump: bool = False) -> "TaskArgs":
        return self._add(Arg.output(dtype, shape), dump)

    def scalar(self, value, dtype: str | None = None) -> "TaskArgs":
        """Adds a scalar: ints go as int64, floats as fp64, numpy scalars as their dtype; or
        give dtype (int8, uint8, int32, int64, fp32, fp64, bits64)."""
        self.scalars.append(Scalar(value, dtype) if dtype is not None else value)
        return self

    def set_dependencies(self, tasks: Sequence) -> "TaskArgs":
        """Explicit predecessors (task ids, or what submit() returned), besides inferred ones."""
        self.dependencies = [t.task if isinstance(t, Submitted) else int(t) for t in tasks]
        return self

    def dump(self, *which) -> "TaskArgs":
        """No arguments: marks every tensor; else the tensors with these indices, or these
        tensors themselves (by identity)."""
        if not which:
            self.dump_all = True
            return self
        for w in which:
            if isinstance(w, (int, np.integer)):
                if not 0 <= int(w) < len(self.args):
                    raise _invalid(f"dump({int(w)}): the task has {len(self.args)} tensor "
                                   "arguments")
                self.args[int(w)].marked = True
            else:
                hits = [a for a in self.args if a.tensor is w]
                if not hits:
                    raise _invalid("dump(tensor): that tensor is not an argument of this task")
                for a in hits:
                    a.marked = True
        return self

    def native(self):
        """The native TaskArgs (built at submit)."""
        specs = [a.spec(f"tensor argument {i}") for i, a in enumerate(self.args)]
        scalars = [_scalar_spec(s) for s in self.scalars]
        marked = [i for i, a in enumerate(self.args) if a.marked]
        return _lib().TaskArgs(specs, scalars, self.dependencies, self.dump_all, marked)

    def __repr__(self) -> str:
        parts = [repr(a) for a in self.args] + [repr(s) for s in self.scalars]
        return f"TaskArgs({', '.join(parts)}){'.dump()' if self.dump_all else ''}"


_MODES = ("cube", "vector", "mix")


@dataclass
class CallConfig:
    """How a callable runs, and what a run records.

    Resource shape (per task): block_dim blocks of `mode` ('vector', 'cube', or 'mix': groups
    of one cube and `ratio` vector blocks on one cluster, block_dim <= num_cube), num_flags
    cross-core flags, timeout_s for the blocks' flag waits (None: the chip's).

    Per run (ChipWorker.run): the diagnostics, written under output_prefix when the run ends
    (docs/runtime.md has the formats): dump_args 0|1|2 (tensor_dump.json + .bin; 1 = only
    marked arguments, 2 = all), scope_stats (scope_stats.jsonl), dep_gen (deps.json), swimlane
    (swimlane.json, Chrome trace); and the rings: task_ring_slots, heap_ring_bytes, and
    run_timeout_s (a wait with no task completing; None: HP_WAIT_TIMEOUT_S).
    """
    block_dim: int = 1
    mode: str = "vector"
    num_flags: int = 64
    timeout_s: float | None = None
    dump_args: int = 0
    scope_stats: bool = False
    dep_gen: bool = False
    swimlane: bool = False
    output_prefix: str | None = None
    task_ring_slots: int = 1024
    heap_ring_bytes: int = 16 << 20
    run_timeout_s: float | None = None

    _TASK_FIELDS = ("block_dim", "mode", "num_flags", "timeout_s")

    def native_call(self):
        if self.mode not in _MODES:
            raise _invalid(f"CallConfig.mode={self.mode!r}: expected one of {_MODES}")
        return _lib().CallConfig(self.mode, int(self.block_dim), int(self.num_flags),
                                 self.timeout_s)

    def native_run(self):
        return _lib().RunConfig(int(self.task_ring_slots), int(self.heap_ring_bytes),
                                self.run_timeout_s, str(self.output_prefix or ""),
                                int(self.dump_args), bool(self.scope_stats), bool(self.dep_gen),
                                bool(self.swimlane))

    def run_fields_set(self) -> list[str]:
        """Names of the per-run fields that differ from their defaults."""
        default = CallConfig()
        return [f.name for f in fields(self)
                if f.name not in self._TASK_FIELDS and getattr(self, f.name) != getattr(default, f.name)]

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        """The diagnostics flags (--dump-args, --enable-scope-stats,
        --enable-dep-gen, --enable-swimlane, --output-prefix) on an argparse parser."""
        group = parser.add_argument_group("diagnostics")
        group.add_argument("--dump-args", type=int, choices=(0, 1, 2), default=0,
                           help="argument dumps: 1 = marked arguments, 2 = all (tensor_dump.json)")
        group.add_argument("--enable-scope-stats", action="store_true",
                           help="per-scope ring high-water marks (scope_stats.jsonl)")
        group.add_argument("--enable-dep-gen", action="store_true",
                           help="the dependency graph (deps.json)")
        group.add_argument("--enable-swimlane", action="store_true",
                           help="a Chrome trace of the run (swimlane.json, opens in Perfetto)")
        group.add_argument("--output-prefix", metavar="DIR", default=None,
                           help="the directory the diagnostics' files go to")

    @classmethod
    def from_arguments(cls, ns: argparse.Namespace, **overrides) -> "CallConfig":
        """A CallConfig with the diagnostics parsed by add_arguments(), plus `overrides`."""
        return cls(dump_args=ns.dump_args, scope_stats=ns.enable_scope_stats,
                   dep_gen=ns.enable_dep_gen, swimlane=ns.enable_swimlane,
                   output_prefix=ns.output_prefix, **overrides)


@dataclass
class Submitted:
    """What submit() returns: the task id, and the OUTPUT arguments' tensors (numpy views of
    the heap ring, in argument order; valid until the submitting scope ends)."""
    task: int
    outputs: list = field(default_factory=list)


class Callable:
    """What a task runs: a Python function, or an entry point of a kernel library.

    Content-addressed (native/runtime/callable.h): `hashid` is "sha256:<hex>" of the kind,
    namespace and identity bytes; registering the same identity twice on a worker returns the
    same slot with one more reference.
    """

    def __init__(self, native_callable):
        self.native = native_callable

    @classmethod
    def from_function(cls, fn: PyCallable, name: str | None = None,
                      identity: bytes | None = None) -> "Callable":
        """fn(block, *tensors, *scalars), called per block. The default identity is the
        function's module, qualified name, code and object id: the same function object
        deduplicates, two closures never do. Pass `identity` for a content address of your own
        (it must then determine what the function computes)."""
        if not callable(fn):
            raise _invalid(f"{fn!r} is not callable")
        name = name or getattr(fn, "__qualname__", None) or repr(fn)
        if identity is None:
            code = getattr(fn, "__code__", None)
            identity = b"\0".join([
                str(getattr(fn, "__module__", "")).encode(), name.encode(),
                marshal.dumps(code) if code is not None else b"", str(id(fn)).encode()])
        return cls(_lib().Callable.from_function(fn, name, bytes(identity)))

    @classmethod
    def from_library(cls, path: str | Path, symbol: str, identity: bytes | None = None) -> "Callable":
        """The extern "C" entry point `symbol` of the shared library `path`, with the signature
        hp::Status(const hp::runtime::TaskArgs&, hp::platform::BlockContext&)
        (native/runtime/callable.h). NOT_FOUND names a missing library or symbol."""
        return cls(_lib().Callable.from_library(str(path), symbol,
                                                None if identity is None else bytes(identity)))

    @property
    def name(self) -> str:
        return self.native.name

    @property
    def kind(self) -> str:
        return self.native.kind  # "function" | "library_symbol"

    @property
    def hashid(self) -> str:
        return self.native.hashid

    def __repr__(self) -> str:
        return f"Callable({self.kind} {self.name!r}, {self.hashid[:19]}…)"


_current = threading.local()


def current() -> "Orchestrator":
    """The orchestrator of the orchestration function running on this thread."""
    o = getattr(_current, "orchestrator", None)
    if o is None:
        raise hp_error("FAILED_PRECONDITION",
                       "no orchestration is running on this thread: call submit()/scope() inside "
                       "the function passed to ChipWorker.run()")
    return o


class Orchestrator:
    """The orchestrator an orchestration function receives (also reachable as current())."""

    def __init__(self, native_orchestrator, keep_alive: list):
        self._native = native_orchestrator
        self._keep_alive = keep_alive

    def submit(self, callable_slot: int, args: TaskArgs, config: CallConfig | None = None, *,
               block_dim: int | None = None, mode: str | None = None) -> Submitted:
        """Submits a task running the callable in `callable_slot` (ChipWorker.register_callable)
        over `args`. The resource shape is config's (block_dim, mode, num_flags, timeout_s),
        or block_dim/mode given here; a config's per-run fields (diagnostics, rings) belong to
        ChipWorker.run and are refused here. Waits only for ring space (without the GIL)."""
        config = config or CallConfig()
        stray = config.run_fields_set()
        if stray:
            raise _invalid(f"submit(config=...) with per-run fields {stray}: diagnostics and "
                           "rings are chosen per run, pass them to ChipWorker.run()")
        if block_dim is not None or mode is not None:
            config = CallConfig(block_dim=config.block_dim if block_dim is None else block_dim,
                                mode=config.mode if mode is None else mode,
                                num_flags=config.num_flags, timeout_s=config.timeout_s)
        if not isinstance(args, TaskArgs):
            raise _invalid(f"submit(args={type(args).__name__}): expected a TaskArgs")
        self._keep_alive.append(args)  # its arrays stay alive until the run ends
        task, outputs = self._native.submit(int(callable_slot), args.native(), config.native_call())
        return Submitted(task, outputs)

    @contextmanager
    def scope(self) -> Iterator[None]:
        """A nested scope: OUTPUT tensors made inside are released when it ends, unless
        escape()d. Its site (this with-statement's file:line) names it in scope stats."""
        self._begin_scope(sys._getframe(2))  # this body <- __enter__ <- the with-statement
        try:
            yield
        finally:
            self._native.end_scope()

    def _begin_scope(self, caller) -> None:
        self._native.begin_scope(caller.f_code.co_filename, caller.f_lineno)

    def escape(self, output) -> None:
        """Keeps an OUTPUT tensor (an array from submit().outputs of the current scope) alive
        until the enclosing scope ends."""
        self._native.escape(_tensor_spec(output, Tag.INOUT, "escape()"))

    @property
    def scope_depth(self) -> int:
        return self._native.scope_depth


def submit(callable_slot: int, args: TaskArgs, config: CallConfig | None = None, **kwargs) -> Submitted:
    """Orchestrator.submit on the orchestration running on this thread."""
    return current().submit(callable_slot, args, config, **kwargs)


@contextmanager
def scope() -> Iterator[None]:
    """Orchestrator.scope on the orchestration running on this thread (site: the caller's)."""
    o = current()
    o._begin_scope(sys._getframe(2))  # this body <- __enter__ <- the with-statement
    try:
        yield
    finally:
        o._native.end_scope()


def escape(output) -> None:
    """Orchestrator.escape on the orchestration running on this thread."""
    current().escape(output)


class ChipWorker:
    """The runtime on one chip of `num_cube` cube and `num_vector` vector cores (1:1 or 1:2),
    each a thread (pinned to `cpus` when given, else HP_CHIP_CPUS or the process's CPUs).

    register_callable(fn or Callable) -> int slot; unregister_callable(slot);
    run(orchestration_fn, config) or run(slot, args, config).
    """

    def __init__(self, num_cube: int = 1, num_vector: int = 2, cpus: Sequence[int] = (),
                 timeout_s: float | None = None):
        self._native = _lib().ChipWorker(int(num_cube), int(num_vector), list(cpus), timeout_s)

    num_cube = property(lambda self: self._native.num_cube)
    num_vector = property(lambda self: self._native.num_vector)
    ratio = property(lambda self: self._native.ratio)
    cpus = property(lambda self: self._native.cpus)

    def register_callable(self, fn, name: str | None = None) -> int:
        """Registers a Callable (or a Python function, as Callable.from_function(fn, name))
        and returns its slot."""
        c = fn if isinstance(fn, Callable) else Callable.from_function(fn, name)
        return self._native.register_callable(c.native)

    def unregister_callable(self, slot: int) -> None:
        """Drops one reference; the slot is freed when none is left."""
        self._native.unregister_callable(int(slot))

    def callable_references(self, slot: int) -> int:
        return self._native.callable_references(int(slot))

    def callable_name(self, slot: int) -> str:
        return self._native.callable_name(int(slot))

    def run(self, target, args: TaskArgs | None = None, config: CallConfig | None = None) -> None:
        """Runs an orchestration and waits for every task it submitted.

        run(fn, config): fn(orchestrator) is the orchestration function; it runs on the
        runtime's orchestration thread, where submit()/scope() (module functions or the
        orchestrator's methods) reach it.
        run(slot, args, config): one task of the callable in `slot` over config.block_dim blocks.
        The run's diagnostics and rings come from `config`. Raises HpError with the first task
        failure (naming the task and callable), or what the orchestration function raised.
        """
        if isinstance(args, CallConfig) and config is None:  # run(fn, config)
            args, config = None, args
        config = config or CallConfig()
        if isinstance(target, (int, np.integer)):
            if args is None:
                raise _invalid("run(slot, args, config): args missing")
            slot = int(target)
            task_config = CallConfig(block_dim=config.block_dim, mode=config.mode,
                                     num_flags=config.num_flags, timeout_s=config.timeout_s)
            return self.run(lambda o: o.submit(slot, args, task_config), None, config)
        if not callable(target):
            raise _invalid(f"run({target!r}): expected an orchestration function or a slot")
        if args is not None:
            raise _invalid("run(fn, args): an orchestration function takes no args; close "
                           "over what it needs")
        keep_alive: list = []

        def orchestration(native_orchestrator):
            o = Orchestrator(native_orchestrator, keep_alive)
            _current.orchestrator = o
            try:
                target(o)
            finally:
                _current.orchestrator = None

        try:
            self._native.run(orchestration, config.native_run())
        finally:
            keep_alive.clear()

    def close(self) -> None:
        """Stops the chip's cores (also done when the worker is garbage-collected)."""
        self._native.close()

    def __enter__(self) -> "ChipWorker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def replay(worker: ChipWorker, deps_path: str | Path, callables: dict[str, int],
           buffers: Sequence[tuple] = (), config: CallConfig | None = None) -> None:
    """Runs the tasks a deps.json recorded (CallConfig(dep_gen=True)) again on `worker`, in
    their order and scopes, with the recorded edges as their only dependencies (no inference):
    a schedule reproduced, on the same or another number of cores
    (native/runtime/replay.h).

    callables: callable name -> slot on `worker`. buffers: (recorded, now) pairs, `recorded`
    the recorded run's array (or its address) and `now` an array of the same layout that stands
    for it in the replay (e.g. a fresh copy of an input); tensors elsewhere keep their recorded
    addresses, and a recorded OUTPUT's readers read the replayed OUTPUT."""
    config = config or CallConfig()
    ranges = []
    for recorded, now in buffers:
        if not isinstance(now, np.ndarray) or not now.flags.c_contiguous:
            raise _invalid("replay buffers: each `now` must be a C-contiguous numpy array")
        address = recorded.ctypes.data if isinstance(recorded, np.ndarray) else int(recorded)
        ranges.append((address, now.nbytes, now.ctypes.data))
    _lib().replay(worker._native, str(deps_path), {str(k): int(v) for k, v in callables.items()},
                  ranges, config.native_run())


def _node_lib():
    _lib()  # the node level's classes extend _hp_runtime's
    return native.load_extension("symmetric_memory", "_hp_node")


@dataclass(frozen=True)
class CallableHandle:
    """What Worker.register() returns: the callable's content address (`hashid`,
    "sha256:<hex>", the same in every process of the node) and its name. Registering the same
    callable again returns an equal handle (one more reference)."""
    hashid: str
    name: str
    digest: bytes = field(repr=False)


class SymmetricTensor:
    """An L3 tensor (Worker.alloc): one copy per chip at the same offset of every chip's heap.
    on(chip) is a numpy view of chip `chip`'s copy, valid until the worker closes; pass
    on(chip) to a task of that chip (or of any chip, or a sub task: every process of the node
    maps every chip's heap)."""

    def __init__(self, native_tensor):
        self._native = native_tensor

    def on(self, chip: int) -> np.ndarray:
        return self._native.on(int(chip))

    shape = property(lambda self: tuple(self._native.shape))
    dtype = property(lambda self: self._native.dtype)
    nbytes = property(lambda self: self._native.nbytes)

    def __repr__(self) -> str:
        return f"SymmetricTensor({self.dtype}{list(self.shape)})"


def _handle_digest(handle) -> bytes:
    if not isinstance(handle, CallableHandle):
        raise _invalid(f"{handle!r} is not a CallableHandle: pass what Worker.register() "
                       "returned")
    return handle.digest


def _task_config(config: CallConfig | None, block_dim: int | None, mode: str | None,
                  what: str) -> CallConfig:
    config = config or CallConfig()
    stray = config.run_fields_set()
    if stray:
        raise _invalid(f"{what}(config=...) with per-run fields {stray}: diagnostics and rings "
                       "are chosen per run, pass them to Worker.run()")
    return CallConfig(block_dim=config.block_dim if block_dim is None else block_dim,
                      mode=config.mode if mode is None else mode, num_flags=config.num_flags,
                      timeout_s=config.timeout_s)


class NodeOrchestrator(Orchestrator):
    """The orchestrator a node-level (L3) orchestration function receives: next-level tasks on
    the chips, sub tasks on this process's sub-workers, scopes, and the collectives."""

    def submit(self, *args, **kwargs):
        raise hp_error("FAILED_PRECONDITION",
                       "submit() at the node level: use submit_next_level(handle, args, ..., "
                       "worker=chip) for a chip, or submit_sub(handle, args) for a host task")

    def submit_next_level(self, handle: CallableHandle, args: TaskArgs,
                          config: CallConfig | None = None, *, worker: int | None = None,
                          block_dim: int | None = None, mode: str | None = None) -> Submitted:
        """A task of `handle`'s callable on chip `worker` (None: the chip with the fewest tasks
        in flight when it becomes ready), over block_dim blocks of `mode` there. Its tensors
        must be views of SymmetricTensors (SymmetricTensor.on); OUTPUT arguments are refused
        (alloc a tensor and pass it as output_existing)."""
        config = _task_config(config, block_dim, mode, "submit_next_level")
        if not isinstance(args, TaskArgs):
            raise _invalid(f"submit_next_level(args={type(args).__name__}): expected a TaskArgs")
        self._keep_alive.append(args)
        task, outputs = self._native.submit_next_level(
            _handle_digest(handle), args.native(), config.native_call(),
            -1 if worker is None else int(worker))
        return Submitted(task, outputs)

    def submit_sub(self, handle: CallableHandle, args: TaskArgs,
                   config: CallConfig | None = None, *, block_dim: int | None = None) -> Submitted:
        """A host task of `handle`'s callable on the sub-workers (threads of this process: any
        memory, OUTPUT arguments included)."""
        config = _task_config(config, block_dim, None, "submit_sub")
        if not isinstance(args, TaskArgs):
            raise _invalid(f"submit_sub(args={type(args).__name__}): expected a TaskArgs")
        self._keep_alive.append(args)
        task, outputs = self._native.submit_sub(_handle_digest(handle), args.native(),
                                                config.native_call())
        return Submitted(task, outputs)

    def allreduce(self, tensor: SymmetricTensor, op: str = "sum") -> None:
        """In place over every chip's copy (op 'sum' or 'max'; int32, int64, float32,
        float64)."""
        self._native.allreduce(tensor._native, op)

    def broadcast(self, tensor: SymmetricTensor, root: int = 0) -> None:
        """Chip `root`'s copy to every chip."""
        self._native.broadcast(tensor._native, int(root))

    def allgather(self, dest: SymmetricTensor, source: SymmetricTensor) -> None:
        """dest (chips x source) on every chip: block i is chip i's source."""
        self._native.allgather(dest._native, source._native)

    def reduce_scatter(self, dest: SymmetricTensor, source: SymmetricTensor,
                       op: str = "sum") -> None:
        """source holds chips blocks of dest's size; chip i's dest is the reduction of every
        chip's block i."""
        self._native.reduce_scatter(dest._native, source._native, op)

    def all_to_all(self, dest: SymmetricTensor, source: SymmetricTensor) -> None:
        """source and dest hold chips blocks; block j of chip i lands in block i of chip j."""
        self._native.all_to_all(dest._native, source._native)

    @property
    def chips(self) -> int:
        return self._native.chips


class Worker:
    """The runtime one level up: a node of `chips` chips, each a process with its own chip
    (num_cube cube and num_vector vector cores, in its share of the CPUs), plus `sub_workers`
    host threads in this process. Docs: docs/runtime.md, "Node level".

        with runtime.Worker(level=3, chips=2) as w:
            h = w.register(kernel)                 # before init(): chips are forked there
            w.init()
            x = w.alloc([1024], np.float32)         # one copy per chip: x.on(chip)
            def orch(o):
                for chip in range(w.chips):
                    o.submit_next_level(h, runtime.TaskArgs().inout(x.on(chip)), worker=chip)
                o.allreduce(x)
            w.run(orch)

    Python functions must be registered before init() (each chip is a forked copy of this
    process); kernel-library callables may be registered any time.
    """

    def __init__(self, level: int = 3, chips: int = 2, *, num_cube: int = 1,
                 num_vector: int = 1, sub_workers: int = 1, heap_bytes: int = 64 << 20,
                 tensor_bytes: int = 32 << 20, scratch_bytes: int = 2 << 20,
                 timeout_s: float | None = None, start_timeout_s: float = 300.0):
        if level != 3:
            raise _invalid(f"Worker(level={level}): level 3 is a node of chips; one chip (level "
                           "2) is ChipWorker")
        self._native = _node_lib().NodeWorker(int(chips), int(num_cube), int(num_vector),
                                              int(sub_workers), int(heap_bytes),
                                              int(tensor_bytes), int(scratch_bytes), timeout_s,
                                              float(start_timeout_s))

    chips = property(lambda self: self._native.chips)
    started = property(lambda self: self._native.started)

    def chip_pid(self, chip: int) -> int:
        return self._native.chip_pid(int(chip))

    def register(self, fn, name: str | None = None) -> CallableHandle:
        """Registers a Callable (or a Python function, as Callable.from_function(fn, name)) and
        returns its handle; the same callable again adds a reference."""
        c = fn if isinstance(fn, Callable) else Callable.from_function(fn, name)
        return CallableHandle(c.hashid, c.name, self._native.register_callable(c.native))

    def unregister(self, handle: CallableHandle) -> None:
        """Drops one reference; at zero every chip that knew the callable forgets it."""
        self._native.unregister_callable(_handle_digest(handle))

    def callable_references(self, handle: CallableHandle) -> int:
        return self._native.callable_references(_handle_digest(handle))

    def init(self) -> None:
        """Forks the chips and waits until every one is ready (or raises, naming the chip)."""
        self._native.start()

    start = init

    def alloc(self, shape: Sequence[int], dtype=np.float32) -> SymmetricTensor:
        """A zeroed L3 tensor, one copy per chip (after init())."""
        return SymmetricTensor(self._native.alloc(_dtype_name(dtype), [int(d) for d in shape]))

    def free(self, tensor: SymmetricTensor) -> None:
        self._native.free(tensor._native)

    def run(self, orchestration: PyCallable, config: CallConfig | None = None) -> None:
        """Runs a node-level orchestration function fn(o) (o: NodeOrchestrator, also reachable
        as runtime.current()) and waits for every task it submitted. config's diagnostics cover
        both levels: this level's files under output_prefix, each chip's under
        output_prefix/chip<i>. Raises HpError with the first failure (naming the task, its
        callable and chip)."""
        config = config or CallConfig()
        if not callable(orchestration):
            raise _invalid(f"run({orchestration!r}): expected an orchestration function")
        keep_alive: list = []

        def body(native_orchestrator):
            o = NodeOrchestrator(native_orchestrator, keep_alive)
            _current.orchestrator = o
            try:
                orchestration(o)
            finally:
                _current.orchestrator = None

        try:
            self._native.run(body, config.native_run())
        finally:
            keep_alive.clear()

    def replay(self, deps_path: str | Path, callables: dict[str, CallableHandle],
               buffers: Sequence[tuple] = (), config: CallConfig | None = None) -> None:
        """Runs a node-level deps.json again (runtime.replay's node form): each next-level task
        on the chip and with the shape it recorded, each sub task, with the recorded edges and
        no inference. callables: name -> handle (the collectives' kernels need none). buffers:
        (recorded, now) pairs of arrays (or a recorded address and an array): `now` must be an
        alloc()ed tensor's view for what chips touch."""
        config = config or CallConfig()
        ranges = [((r.ctypes.data if isinstance(r, np.ndarray) else int(r)), n.nbytes, n.ctypes.data)
                  for r, n in buffers]
        self._native.replay(str(deps_path), {k: _handle_digest(v) for k, v in callables.items()},
                            ranges, config.native_run())

    def close(self) -> None:
        """Shuts the chips down and reaps them (also done when the worker is garbage-collected);
        raises when a chip had died or had to be killed."""
        self._native.close()

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def example_kernels_library() -> Path:
    """The payload's example kernel library (libhyper_parallel_example_kernels.so: the kernels
    of examples/runtime, entry points hp_example_*)."""
    return native.component_dir("core") / "lib" / "libhyper_parallel_example_kernels.so"


__all__ = ["Arg", "Block", "CallConfig", "Callable", "CallableHandle", "ChipWorker",
           "NodeOrchestrator", "Orchestrator", "Scalar", "Submitted", "SymmetricTensor", "Tag",
           "TaskArgs", "Worker", "current", "escape", "example_kernels_library", "replay",
           "scope", "submit"]


def __getattr__(name: str) -> Any:
    if name == "Block":  # the native class (documentation and isinstance checks)
        return _lib().Block
    raise AttributeError(f"module 'hyper_parallel.runtime' has no attribute '{name}'")
