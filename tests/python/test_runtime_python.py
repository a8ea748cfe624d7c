"""hyper_parallel.runtime: orchestrations written in Python over the payload's _hp_runtime
(dependency order, failures, scopes, diagnostics), and the runtime examples (the payload's
hp-example-* binaries and examples/runtime/*.py) with and without their diagnostics flags.

Ordering is checked without timing: the task that must run first waits on an event that the
orchestration sets only after it submitted the later task, so a missing edge would let the
later task run first and see stale data.
"""
from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import PAYLOAD_DIR, REPO, SYSTEM_PYTHON, base_env, describe, run

from hyper_parallel import HpError
from hyper_parallel import runtime as rt

GATE_TIMEOUT_S = 30
RUN_TIMEOUT_S = 60.0
EXAMPLE_TIMEOUT_S = 120
DIAGNOSTIC_FLAGS = ["--dump-args", "1", "--enable-scope-stats", "--enable-dep-gen",
                    "--enable-swimlane"]
DIAGNOSTIC_FILES = ["tensor_dump.json", "tensor_dump.bin", "scope_stats.jsonl", "deps.json",
                    "swimlane.json"]


@pytest.fixture(scope="module")
def worker():
    with rt.ChipWorker(num_cube=1, num_vector=2) as w:
        yield w


def config(**kwargs) -> rt.CallConfig:
    return rt.CallConfig(run_timeout_s=RUN_TIMEOUT_S, **kwargs)


def gated_copy(gate: threading.Event):
    """dst[:] = src[:] once `gate` is set."""
    def copy(block, src, dst):
        assert gate.wait(GATE_TIMEOUT_S), "the gate never opened"
        dst[:] = src
    return copy


def copy(block, src, dst):
    dst[:] = src


def fill(block, dst, value):
    dst[:] = value


def load_deps(prefix: Path) -> dict:
    deps = json.loads((prefix / "deps.json").read_text())
    assert deps["schema_version"] == 1
    return deps


def edge_kinds(deps: dict) -> set[tuple[str, str, str]]:
    return {(e["pred"], e["succ"], e["kind"]) for e in deps["edges"]}


# --- dependency order from Python submits ---------------------------------------------------

def test_raw_orders_a_reader_after_its_writer(worker, tmp_path):
    gate = threading.Event()
    writer = worker.register_callable(rt.Callable.from_function(gated_copy(gate), "gated_copy"))
    reader = worker.register_callable(copy)
    src, x, seen = np.full(8, 7, np.int32), np.zeros(8, np.int32), np.full(8, -1, np.int32)

    def orchestration(o):
        rt.submit(writer, rt.TaskArgs().input(src).output_existing(x))
        rt.submit(reader, rt.TaskArgs().input(x).output_existing(seen))
        gate.set()

    worker.run(orchestration, config(dep_gen=True, output_prefix=str(tmp_path)))
    assert (seen == 7).all(), seen
    assert ("0", "1", "RAW") in edge_kinds(load_deps(tmp_path))


def test_war_orders_a_writer_after_the_readers_before_it(worker, tmp_path):
    gate = threading.Event()
    reader = worker.register_callable(rt.Callable.from_function(gated_copy(gate), "gated_read"))
    writer = worker.register_callable(fill)
    x, seen = np.full(8, 1, np.int32), np.zeros(8, np.int32)

    def orchestration(o):
        rt.submit(reader, rt.TaskArgs().input(x).output_existing(seen))
        rt.submit(writer, rt.TaskArgs().output_existing(x).scalar(2, "int32"))
        gate.set()

    worker.run(orchestration, config(dep_gen=True, output_prefix=str(tmp_path)))
    assert (seen == 1).all(), "the writer overwrote x before the reader read it"
    assert (x == 2).all()
    assert ("0", "1", "WAR") in edge_kinds(load_deps(tmp_path))


def test_waw_keeps_the_last_write(worker, tmp_path):
    gate = threading.Event()
    first = worker.register_callable(rt.Callable.from_function(gated_copy(gate), "gated_write"))
    second = worker.register_callable(fill)
    x = np.zeros(16, np.int64)

    def orchestration(o):
        rt.submit(first, rt.TaskArgs().input(np.full(16, 1, np.int64)).output_existing(x))
        rt.submit(second, rt.TaskArgs().output_existing(x[4:12]).scalar(2))  # a partial overlap
        gate.set()

    worker.run(orchestration, config(dep_gen=True, output_prefix=str(tmp_path)))
    assert x.tolist() == [1] * 4 + [2] * 8 + [1] * 4
    assert ("0", "1", "WAW") in edge_kinds(load_deps(tmp_path))


def test_strided_views_that_do_not_overlap_do_not_depend(worker, tmp_path):
    slot = worker.register_callable(fill)
    m = np.zeros((4, 8), np.int32)

    def orchestration(o):
        rt.submit(slot, rt.TaskArgs().output_existing(m[:, 0::2]).scalar(1, "int32"))  # even columns
        rt.submit(slot, rt.TaskArgs().output_existing(m[:, 1::2]).scalar(2, "int32"))  # odd columns
        rt.submit(slot, rt.TaskArgs().output_existing(m[1:3, 2:4]).scalar(3, "int32"))  # both

    worker.run(orchestration, config(dep_gen=True, output_prefix=str(tmp_path)))
    kinds = edge_kinds(load_deps(tmp_path))
    assert ("0", "1", "WAW") not in kinds
    assert {("0", "2", "WAW"), ("1", "2", "WAW")} <= kinds
    assert (m[1:3, 2:4] == 3).all() and m[0, 0] == 1 and m[0, 1] == 2


def test_no_dep_and_explicit_dependencies(worker, tmp_path):
    slot = worker.register_callable(fill)
    x = np.zeros(4, np.int32)

    def orchestration(o):
        a = rt.submit(slot, rt.TaskArgs().output_existing(x).scalar(1, "int32"))
        rt.submit(slot, rt.TaskArgs().no_dep(x).scalar(2, "int32").set_dependencies([a]))

    worker.run(orchestration, config(dep_gen=True, output_prefix=str(tmp_path)))
    deps = load_deps(tmp_path)
    assert [(e["pred"], e["succ"], e["source"], e["kind"]) for e in deps["edges"]] == [
        ("0", "1", "explicit", "ORDER")]
    assert (x == 2).all()


def test_outputs_feed_later_tasks_and_scalars_arrive_typed(worker):
    seen = {}

    def produce(block, out, i8, i64, f32, f64, bits):
        seen["scalars"] = (i8, i64, f32, f64, bits)
        out[:] = np.arange(len(out), dtype=np.float32)

    def consume(block, src, dst):
        assert not src.flags.writeable  # INPUT views are read-only
        dst[:] = src * 2

    p, c = worker.register_callable(produce), worker.register_callable(consume)
    result = np.zeros(6, np.float32)

    def orchestration(o):
        t = rt.submit(p, rt.TaskArgs().output(np.float32, [6]).scalar(-3, "int8").scalar(1 << 40)
                      .scalar(0.5, "fp32").scalar(2.25).scalar(np.uint64(2**64 - 1)))
        assert t.outputs[0].shape == (6,) and t.outputs[0].dtype == np.float32
        rt.submit(c, rt.TaskArgs().input(t.outputs[0]).output_existing(result))

    worker.run(orchestration, config())
    assert result.tolist() == [0, 2, 4, 6, 8, 10]
    assert seen["scalars"] == (-3, 1 << 40, 0.5, 2.25, 2**64 - 1)


def test_cpu_torch_tensors_are_arguments(worker):
    torch = pytest.importorskip("torch")
    slot = worker.register_callable(copy)
    src, dst = torch.arange(10, dtype=torch.float32), torch.zeros(10, dtype=torch.float32)
    worker.run(slot, rt.TaskArgs().input(src).output_existing(dst), config(block_dim=2))
    assert torch.equal(src, dst)


def test_back_pressure_with_python_tasks_waits_without_the_gil(worker, tmp_path):
    # A ring of 4 slots and 300 slow Python tasks: submit waits for ring space, while the tasks
    # that free it need the GIL.
    def slow_increment(block, x):
        time.sleep(0.001)
        x += 1

    slot = worker.register_callable(slow_increment)
    x = np.zeros(1, np.int64)

    def orchestration(o):
        for _ in range(300):
            with rt.scope():  # the root scope would hold every task: a deadlock error
                rt.submit(slot, rt.TaskArgs().inout(x))

    worker.run(orchestration, config(task_ring_slots=4, scope_stats=True, output_prefix=str(tmp_path)))
    assert x[0] == 300
    lines = [json.loads(l) for l in (tmp_path / "scope_stats.jsonl").read_text().splitlines()]
    assert max(l["hwm"]["task_window"] for l in lines if l["type"] == "scope_end") == 4


# --- failures -------------------------------------------------------------------------------

def test_a_raising_python_task_fails_the_run_naming_task_and_callable(worker):
    def boom(block, x):
        raise ValueError("tile 3 is bad")

    b, c = worker.register_callable(boom), worker.register_callable(copy)
    x, y = np.zeros(4, np.float32), np.zeros(4, np.float32)
    dependent_ran = []

    def orchestration(o):
        rt.submit(c, rt.TaskArgs().input(x).output_existing(y))
        rt.submit(b, rt.TaskArgs().inout(x), block_dim=2)
        for _ in range(50):  # keeps submitting after the failure: these are refused, not hung
            rt.submit(c, rt.TaskArgs().input(x).output_existing(y))
            dependent_ran.append(1)

    with pytest.raises(HpError) as info:
        worker.run(orchestration, config())
    e = info.value
    assert e.name == "KERNEL_FAILED", e
    assert "task 1 (callable 'test_a_raising_python_task_fails_the_run_naming_task_and_callable.<locals>.boom')" in e.message
    assert "ValueError: tile 3 is bad" in e.message and "test_runtime_python.py" in e.message


def test_a_raising_block_of_a_mixed_task_cancels_its_waiting_blocks(worker):
    def cube_fails(block, x):
        if block.core_type == "cube":
            raise RuntimeError("cube block gave up")
        block.wait_flag(0, 1)  # never set: the failure must cancel this wait

    slot = worker.register_callable(cube_fails)
    with pytest.raises(HpError) as info:
        worker.run(slot, rt.TaskArgs().inout(np.zeros(2, np.int8)), config(mode="mix"))
    assert info.value.name == "KERNEL_FAILED" and "cube block gave up" in info.value.message


def test_the_orchestration_functions_own_exception_comes_back_as_it_was(worker):
    slot = worker.register_callable(copy)

    def orchestration(o):
        rt.submit(slot, rt.TaskArgs().input(np.zeros(2)).output_existing(np.zeros(2)))
        raise KeyError("no such layer")

    with pytest.raises(KeyError, match="no such layer"):
        worker.run(orchestration, config())


@pytest.mark.parametrize("make_call, name", [
    (lambda w, s: w.run(s, rt.TaskArgs().input(np.zeros(2, np.float32)).output_existing(
        np.zeros(2, np.float32)), config(dep_gen=True)), "INVALID_ARGUMENT"),  # no output prefix
    (lambda w, s: w.run(s, rt.TaskArgs().output_existing(np.zeros(2).view()[::-1]), config()),
     "INVALID_ARGUMENT"),  # negative strides
    (lambda w, s: w.run(lambda o: rt.submit(s, rt.TaskArgs().input(np.zeros(2)).output_existing(
        np.zeros(2)), rt.CallConfig(dep_gen=True)), config()), "INVALID_ARGUMENT"),  # per-run field
    (lambda w, s: w.run(s, rt.TaskArgs().input(np.zeros(2)), config(mode="mix", block_dim=5)),
     "INVALID_ARGUMENT"),  # more groups than cube cores
    (lambda w, s: rt.submit(s, rt.TaskArgs()), "FAILED_PRECONDITION"),  # outside a run
    (lambda w, s: rt.Callable.from_library(rt.example_kernels_library(), "no_such_symbol"),
     "NOT_FOUND"),
])
def test_misuse_raises_named_errors(worker, make_call, name):
    slot = worker.register_callable(copy)
    with pytest.raises(HpError) as info:
        make_call(worker, slot)
    assert info.value.name == name, info.value


def test_read_only_array_cannot_be_written():
    a = np.zeros(4)
    a.flags.writeable = False
    with pytest.raises(HpError, match="read-only"):
        rt.TaskArgs().output_existing(a).native()


def test_a_block_is_refused_after_its_call(worker):
    kept = []
    slot = worker.register_callable(lambda block, x: kept.append(block))
    worker.run(slot, rt.TaskArgs().inout(np.zeros(1)), config())
    with pytest.raises(HpError) as info:
        kept[0].block_idx
    assert info.value.name == "FAILED_PRECONDITION"


# --- callables ------------------------------------------------------------------------------

def test_callables_are_content_addressed_and_reference_counted(worker):
    a = worker.register_callable(copy)
    b = worker.register_callable(copy)
    assert a == b and worker.callable_references(a) >= 2
    assert worker.register_callable(fill) != a
    c = rt.Callable.from_library(rt.example_kernels_library(), "hp_example_add_f32")
    assert c.kind == "library_symbol" and c.hashid.startswith("sha256:") and len(c.hashid) == 71
    refs = worker.callable_references(b)
    worker.unregister_callable(b)
    assert worker.callable_references(a) == refs - 1


def test_library_symbol_callable_runs_spmd(worker):
    slot = worker.register_callable(
        rt.Callable.from_library(rt.example_kernels_library(), "hp_example_add_f32"))
    x, y, z = np.arange(1000, dtype=np.float32), np.ones(1000, np.float32), np.zeros(1000, np.float32)
    worker.run(slot, rt.TaskArgs(rt.Arg.input(x), rt.Arg.input(y), rt.Arg.output_existing(z)),
               config(block_dim=3))
    assert np.array_equal(z, x + y)


# --- scopes ---------------------------------------------------------------------------------

def test_nested_scopes_release_their_outputs_and_name_their_python_sites(worker, tmp_path):
    slot = worker.register_callable(fill)
    depths = []
    kept = np.zeros(4, np.int32)

    def orchestration(o):
        depths.append(o.scope_depth)
        with rt.scope():
            depths.append(o.scope_depth)
            with o.scope():
                depths.append(o.scope_depth)
                inner = rt.submit(slot, rt.TaskArgs().output(np.int32, [4096]).scalar(1, "int32"))
                rt.escape(inner.outputs[0])  # lives on to the outer scope
            rt.submit(copy_slot, rt.TaskArgs().input(inner.outputs[0][:4]).output_existing(kept))
        depths.append(o.scope_depth)

    copy_slot = worker.register_callable(copy)
    worker.run(orchestration, config(scope_stats=True, output_prefix=str(tmp_path)))
    assert depths == [0, 1, 2, 0]
    assert (kept == 1).all()
    lines = [json.loads(l) for l in (tmp_path / "scope_stats.jsonl").read_text().splitlines()]
    ends = {l["depth"]: l for l in lines if l["type"] == "scope_end"}
    assert ends[2]["hwm"]["heap_bytes"] >= 4096 * 4 and ends[2]["ring"] == 2
    sites = [l["site"] for l in lines if l["type"] == "scope_begin"]
    assert sites[0] == "<root>"
    assert all(s.startswith(__file__ + ":") for s in sites[1:]), sites


# --- diagnostics ----------------------------------------------------------------------------

def diamond(worker):
    """An orchestration of 4 tasks (a diamond over x -> y, z -> w) with dump markers on
    task 1 (all its tensors, TaskArgs.dump()) and on task 3's second tensor (Arg.dump())."""
    slot = worker.register_callable(copy)
    add = worker.register_callable(
        rt.Callable.from_library(rt.example_kernels_library(), "hp_example_add_f32"))
    x = np.arange(8, dtype=np.float32)
    y, z, w = (np.zeros(8, np.float32) for _ in range(3))

    def orchestration(o):
        rt.submit(slot, rt.TaskArgs().input(x).output_existing(y))
        rt.submit(slot, rt.TaskArgs().input(x).output_existing(z).dump())
        with rt.scope():
            rt.submit(slot, rt.TaskArgs().input(y).output_existing(w))
            rt.submit(add, rt.TaskArgs(rt.Arg.input(y), rt.Arg.input(z).dump(), rt.Arg.inout(w)))

    return orchestration, (x, y, z, w)


@pytest.mark.parametrize("flag, files", [
    ({"dump_args": 1}, ["tensor_dump.json", "tensor_dump.bin"]),
    ({"dump_args": 2}, ["tensor_dump.json", "tensor_dump.bin"]),
    ({"scope_stats": True}, ["scope_stats.jsonl"]),
    ({"dep_gen": True}, ["deps.json"]),
    ({"swimlane": True}, ["swimlane.json"]),
])
def test_each_diagnostic_writes_its_file(worker, tmp_path, flag, files):
    orchestration, _ = diamond(worker)
    worker.run(orchestration, config(output_prefix=str(tmp_path), **flag))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(files)
    for name in files:
        check_diagnostic_file(tmp_path / name)


def check_diagnostic_file(path: Path) -> None:
    """Parses a diagnostic file and checks its schema's top level (docs/runtime.md)."""
    if path.name == "tensor_dump.json":
        dump = json.loads(path.read_text())
        assert dump["schema_version"] == 1 and dump["bin_file"] == "tensor_dump.bin"
        size = (path.parent / "tensor_dump.bin").stat().st_size
        for e in dump["entries"]:
            assert e["kind"] in ("tensor", "scalar") and isinstance(e["task"], str)
            for when in ("before", "after"):
                assert e[when]["offset"] + e[when]["bytes"] <= size
    elif path.name == "scope_stats.jsonl":
        lines = [json.loads(l) for l in path.read_text().splitlines()]
        assert lines[0]["type"] == "metadata" and lines[0]["schema_version"] == 1
        assert {l["type"] for l in lines[1:]} == {"scope_begin", "scope_end"}
    elif path.name == "deps.json":
        deps = json.loads(path.read_text())
        assert set(deps) >= {"tasks", "tensors", "edges", "scopes"}
        ids = {t["id"] for t in deps["tasks"]}
        assert all(e["pred"] in ids and e["succ"] in ids for e in deps["edges"])
    elif path.name == "swimlane.json":
        trace = json.loads(path.read_text())
        spans = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "task"]
        assert spans and all(e["dur"] >= 0 for e in spans)
    elif path.name == "tensor_dump.bin":
        assert path.stat().st_size > 0


def test_dump_level_1_holds_exactly_the_marked_arguments(worker, tmp_path):
    orchestration, (x, y, z, w) = diamond(worker)
    worker.run(orchestration, config(dump_args=1, output_prefix=str(tmp_path)))
    dump = json.loads((tmp_path / "tensor_dump.json").read_text())
    captured = {(e["task"], e["kind"], e["arg"]) for e in dump["entries"]}
    assert captured == {("1", "tensor", 0), ("1", "tensor", 1), ("3", "tensor", 1)}
    blob = (tmp_path / "tensor_dump.bin").read_bytes()
    after = next(e for e in dump["entries"] if (e["task"], e["arg"]) == ("1", 1))["after"]
    assert np.frombuffer(blob[after["offset"]:after["offset"] + after["bytes"]], np.float32).tolist() == x.tolist()


def test_dump_level_2_holds_every_argument(worker, tmp_path):
    orchestration, _ = diamond(worker)
    worker.run(orchestration, config(dump_args=2, output_prefix=str(tmp_path)))
    dump = json.loads((tmp_path / "tensor_dump.json").read_text())
    assert len(dump["entries"]) == 2 + 2 + 2 + 3


def test_deps_json_edges_are_the_diamond(worker, tmp_path):
    orchestration, _ = diamond(worker)
    worker.run(orchestration, config(dep_gen=True, swimlane=True, output_prefix=str(tmp_path)))
    deps = load_deps(tmp_path)
    assert {(e["pred"], e["succ"]) for e in deps["edges"]} == {("0", "2"), ("0", "3"), ("1", "3"), ("2", "3")}
    trace = json.loads((tmp_path / "swimlane.json").read_text())
    spans = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "task"]
    assert sorted(str(e["args"]["task"]) for e in spans) == ["0", "1", "2", "3"]


# --- examples -------------------------------------------------------------------------------

CPP_EXAMPLES = ["hp-example-vector-add", "hp-example-matmul", "hp-example-paged-attention"]
PY_EXAMPLES = [["vector_add.py"], ["matmul.py"], ["matmul.py", "--kernels", "library"],
               ["paged_attention.py"], ["paged_attention.py", "--kernel", "python"]]


def example_command(example) -> list:
    if isinstance(example, str):
        binary = PAYLOAD_DIR / "core" / "bin" / example
        assert binary.is_file(), f"{binary} is not in the payload: run ./scripts/build_core.sh"
        return [binary]
    return [SYSTEM_PYTHON, REPO / "examples" / "runtime" / example[0], *example[1:]]


def run_example(example, *flags) -> subprocess.CompletedProcess:
    env = base_env(PYTHONPATH=str(REPO / "python"))
    result = run([*example_command(example), *flags], env=env, timeout=EXAMPLE_TIMEOUT_S)
    assert result.returncode == 0, describe(result)
    assert "golden check passed" in result.stdout, describe(result)
    return result


EXAMPLES = CPP_EXAMPLES + PY_EXAMPLES
EXAMPLE_IDS = [e if isinstance(e, str) else " ".join(e) for e in EXAMPLES]


@pytest.mark.parametrize("example", EXAMPLES, ids=EXAMPLE_IDS)
def test_example_passes_its_golden_check(example):
    run_example(example)


@pytest.mark.parametrize("example", EXAMPLES, ids=EXAMPLE_IDS)
def test_example_writes_every_diagnostic(example, tmp_path):
    run_example(example, *DIAGNOSTIC_FLAGS, "--output-prefix", tmp_path / "out")
    for name in DIAGNOSTIC_FILES:
        assert (tmp_path / "out" / name).is_file(), f"{name} missing"
        check_diagnostic_file(tmp_path / "out" / name)
    dump = json.loads((tmp_path / "out" / "tensor_dump.json").read_text())
    assert dump["level"] == 1 and dump["entries"], "no marked argument was captured"


@pytest.mark.parametrize("example", [CPP_EXAMPLES[0], PY_EXAMPLES[0]], ids=["cpp", "python"])
def test_example_refuses_a_diagnostic_without_output_prefix(example):
    result = run([*example_command(example), "--enable-dep-gen"],
                 env=base_env(PYTHONPATH=str(REPO / "python")), timeout=EXAMPLE_TIMEOUT_S)
    assert result.returncode != 0 and "INVALID_ARGUMENT" in result.stderr, describe(result)


def test_hp_dump_prints_a_captured_argument_of_an_example(tmp_path):
    run_example(CPP_EXAMPLES[2], "--dump-args", "1", "--output-prefix", tmp_path)
    result = run([PAYLOAD_DIR / "core" / "bin" / "hp-dump", tmp_path, "--task", "0", "--arg", "4"])
    assert result.returncode == 0 and "int32[4]" in result.stdout, describe(result)


def test_a_recorded_run_replays_to_the_same_outputs(tmp_path):
    """deps.json replayed on a chip of another shape: recorded edges only, same outputs."""
    def scale(block, x, y, factor):
        y[:] = x * factor

    def accumulate(block, y, total):
        total[:] += y

    x = np.arange(64, dtype=np.float32)
    y = np.zeros(64, np.float32)
    total = np.zeros(64, np.float32)
    with rt.ChipWorker(num_cube=1, num_vector=2) as w:
        s, a = w.register_callable(scale), w.register_callable(accumulate)

        def orchestration(o):
            for i in range(5):
                with rt.scope():
                    o.submit(s, rt.TaskArgs().input(x).output_existing(y).scalar(float(i + 1)))
                    o.submit(a, rt.TaskArgs().input(y).inout(total))

        w.run(orchestration, config(dep_gen=True, output_prefix=str(tmp_path / "rec")))
    x2, y2, total2 = x.copy(), np.zeros_like(y), np.zeros_like(total)
    with rt.ChipWorker(num_cube=2, num_vector=4) as other:
        with pytest.raises(HpError) as e:  # recorded by their qualified names
            rt.replay(other, tmp_path / "rec" / "deps.json", {"scale": other.register_callable(scale)})
        assert e.value.name == "NOT_FOUND"
        slots = {f.__qualname__: other.register_callable(f) for f in (scale, accumulate)}
        rt.replay(other, tmp_path / "rec" / "deps.json", slots,
                  buffers=[(x, x2), (y, y2), (total, total2)],
                  config=config(dep_gen=True, output_prefix=str(tmp_path / "rep")))
    np.testing.assert_array_equal(total2, total)
    rec = json.loads((tmp_path / "rec" / "deps.json").read_text())
    rep = json.loads((tmp_path / "rep" / "deps.json").read_text())
    assert {(e["pred"], e["succ"]) for e in rep["edges"]} == {(e["pred"], e["succ"]) for e in rec["edges"]}
    assert all(e["source"] == "explicit" for e in rep["edges"])
