"""hyper_parallel.runtime.Worker(level=3): chips as processes of the payload's node runtime,
next-level and sub tasks written in Python, callable handles, the collectives, diagnostics of
both levels, and the errors a user meets (a Python task raising on a chip, a function registered
too late, memory a chip cannot see), with 2 and 4 chips."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from hyper_parallel import HpError
from hyper_parallel import runtime as rt

TIMEOUT_S = 60.0


def fill(block, out, value):
    out[:] = value


def add_one(block, x, y):
    y[:] = x + 1


def report_pid(block, out):
    out[0] = os.getpid()


def raises(block, out):
    raise ValueError("chip task gave up")


@pytest.fixture(params=[2, 4], ids=lambda n: f"{n}chips")
def node(request):
    """A started worker of 2 or 4 chips with fill, add_one, report_pid and raises registered."""
    w = rt.Worker(level=3, chips=request.param, heap_bytes=16 << 20, tensor_bytes=8 << 20,
                  scratch_bytes=64 << 10, timeout_s=TIMEOUT_S)
    handles = {f.__name__: w.register(f) for f in (fill, add_one, report_pid, raises)}
    w.init()
    yield w, handles
    w.close()


def test_next_level_tasks_run_in_each_chips_process(node):
    w, h = node
    pids = w.alloc([w.chips, 1], np.int64)

    def orchestration(o):
        assert o.chips == w.chips
        for chip in range(w.chips):
            o.submit_next_level(h["report_pid"], rt.TaskArgs().output_existing(pids.on(chip)[chip]),
                                worker=chip)

    w.run(orchestration)
    got = [int(pids.on(c)[c, 0]) for c in range(w.chips)]
    assert got == [w.chip_pid(c) for c in range(w.chips)]
    assert os.getpid() not in got


def test_dependencies_cross_chips_and_sub_workers(node):
    w, h = node
    x = w.alloc([256], np.int32)
    last = w.chips - 1

    def orchestration(o):
        for round_ in range(10):
            with rt.scope():
                o.submit_next_level(h["fill"], rt.TaskArgs().output_existing(x.on(0)).scalar(
                    round_ * 10, "int32"), worker=0)
                o.submit_sub(h["add_one"], rt.TaskArgs().input(x.on(0)).output_existing(x.on(last)))
                o.submit_next_level(h["add_one"],
                                    rt.TaskArgs().input(x.on(last)).output_existing(x.on(0)),
                                    worker=last)

    w.run(orchestration)
    assert (x.on(0) == 92).all()


def test_collectives(node):
    w, h = node
    n = w.chips
    count = 5000  # several chunks through a 64 KiB scratch window
    a = w.alloc([count], np.float32)
    m = w.alloc([count], np.int64)
    b = w.alloc([count], np.int32)
    g_in, g_out = w.alloc([count], np.int32), w.alloc([n, count], np.int32)
    rs_in, rs_out = w.alloc([n, count], np.float64), w.alloc([count], np.float64)
    t_in, t_out = w.alloc([n, count], np.int32), w.alloc([n, count], np.int32)
    rng = np.random.default_rng(0)
    data = rng.integers(-1000, 1000, size=(n, count)).astype(np.float32)
    for c in range(n):
        a.on(c)[:] = data[c]
        m.on(c)[:] = np.arange(count) * (c + 1) % 97
        b.on(c)[:] = np.arange(count) if c == n - 1 else -1
        g_in.on(c)[:] = c * 100000 + np.arange(count)
        rs_in.on(c)[:] = np.arange(n * count).reshape(n, count) + c
        t_in.on(c)[:] = c * 1000 + np.arange(n)[:, None] * 10 + np.arange(count)[None, :] % 10

    def orchestration(o):
        o.allreduce(a)
        o.allreduce(m, op="max")
        o.broadcast(b, root=n - 1)
        o.allgather(g_out, g_in)
        o.reduce_scatter(rs_out, rs_in)
        o.all_to_all(t_out, t_in)

    w.run(orchestration)
    want_sum = data[0].copy()
    for c in range(1, n):
        want_sum += data[c]  # chip order, as the collective folds
    for c in range(n):
        np.testing.assert_array_equal(a.on(c), want_sum)
        np.testing.assert_array_equal(m.on(c), np.max([np.arange(count) * (q + 1) % 97 for q in range(n)], axis=0))
        np.testing.assert_array_equal(b.on(c), np.arange(count))
        np.testing.assert_array_equal(g_out.on(c), [q * 100000 + np.arange(count) for q in range(n)])
        np.testing.assert_array_equal(
            rs_out.on(c), sum(np.arange(n * count).reshape(n, count)[c] + q for q in range(n)))
        np.testing.assert_array_equal(
            t_out.on(c), [q * 1000 + c * 10 + np.arange(count) % 10 for q in range(n)])


def test_a_python_task_raising_on_a_chip_names_it_and_the_next_run_works(node):
    w, h = node
    x = w.alloc([4], np.int32)
    with pytest.raises(HpError) as e:
        w.run(lambda o: o.submit_next_level(h["raises"], rt.TaskArgs().output_existing(x.on(1)),
                                            worker=1))
    assert e.value.name == "KERNEL_FAILED"
    assert "chip task gave up" in str(e.value) and "chip 1" in str(e.value)
    assert "callable 'raises'" in str(e.value)
    w.run(lambda o: o.submit_next_level(h["fill"], rt.TaskArgs().output_existing(x.on(1)).scalar(
        3, "int32"), worker=1))
    assert (x.on(1) == 3).all()


def test_misuse_is_refused(node):
    w, h = node
    x = w.alloc([4], np.int32)
    private = np.zeros(4, np.int32)
    with pytest.raises(HpError) as e:
        w.run(lambda o: o.submit_next_level(h["fill"], rt.TaskArgs().output_existing(private).scalar(
            1, "int32"), worker=0))
    assert e.value.name == "INVALID_ARGUMENT" and "shared memory" in str(e.value)
    with pytest.raises(HpError) as e:
        w.run(lambda o: o.submit_next_level(h["fill"], rt.TaskArgs().output_existing(x.on(0)).scalar(
            1, "int32"), worker=w.chips))
    assert e.value.name == "OUT_OF_RANGE"
    with pytest.raises(HpError) as e:
        w.run(lambda o: o.submit(0, rt.TaskArgs()))
    assert e.value.name == "FAILED_PRECONDITION"
    with pytest.raises(HpError) as e:
        w.register(lambda block: None)
    assert e.value.name == "FAILED_PRECONDITION" and "before start()" in str(e.value)
    with pytest.raises(HpError) as e:
        rt.Worker(level=2)
    assert e.value.name == "INVALID_ARGUMENT"
    # Sub tasks take any memory.
    w.run(lambda o: o.submit_sub(h["add_one"], rt.TaskArgs().input(x.on(0)).output_existing(private)))
    assert (private == 1).all()


def test_handles_count_references(node):
    w, h = node
    again = w.register(rt.Callable.from_function(add_one, "add_one", identity=None))
    assert again.name == "add_one"
    assert w.callable_references(h["fill"]) == 1
    w.unregister(h["raises"])
    assert w.callable_references(h["raises"]) == 0
    with pytest.raises(HpError) as e:
        w.unregister(h["raises"])
    assert e.value.name == "NOT_FOUND"


def test_diagnostics_cover_both_levels(node, tmp_path):
    w, h = node
    x = w.alloc([16], np.int32)

    def orchestration(o):
        for chip in range(w.chips):
            o.submit_next_level(h["fill"], rt.TaskArgs().output_existing(x.on(chip)).scalar(
                chip, "int32").dump(), worker=chip)
        o.allreduce(x)

    config = rt.CallConfig(dump_args=1, scope_stats=True, dep_gen=True, swimlane=True,
                           output_prefix=str(tmp_path))
    w.run(orchestration, config)
    deps = json.loads((tmp_path / "deps.json").read_text())
    assert deps["runtime_level"] == 3
    assert len(deps["tasks"]) == 2 * w.chips  # the fills and one allreduce task per chip
    for chip in range(w.chips):
        chip_deps = json.loads((tmp_path / f"chip{chip}" / "deps.json").read_text())
        assert chip_deps["runtime_level"] == 2
        assert [t["callable"] for t in chip_deps["tasks"]] == ["fill", "allreduce"]
    spawned = {(s["chip"], s["task"]): s["l3_task"] for s in deps["spawned"]}
    assert len(spawned) == 2 * w.chips
    trace = json.loads((tmp_path / "swimlane.json").read_text())
    processes = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "process_name"}
    assert {f"chip {c}: vector cores" for c in range(w.chips)} <= processes
    assert "node: orchestrator" in processes
    assert any(e.get("cat") == "spawn" for e in trace["traceEvents"])
    assert (tmp_path / "scope_stats.jsonl").is_file()
    assert (tmp_path / "chip0" / "tensor_dump.json").is_file()
    # The next run records nothing: the chips went back to plain sessions.
    w.run(orchestration)


# --- the examples (examples/runtime/l3), with 2 and 4 chips, with and without diagnostics ----

from conftest import REPO, SYSTEM_PYTHON, base_env, describe, run  # noqa: E402

L3_EXAMPLES = [["collectives.py", kind] for kind in
               ("allreduce", "allgather", "reduce_scatter", "broadcast", "all_to_all")]
L3_EXAMPLES.append(["ep_dispatch_combine.py"])
DIAGNOSTIC_FLAGS = ["--dump-args", "1", "--enable-scope-stats", "--enable-dep-gen",
                    "--enable-swimlane"]


def run_l3_example(example: list[str], *args) -> None:
    script = REPO / "examples" / "runtime" / "l3" / example[0]
    result = run([SYSTEM_PYTHON, script, *example[1:], *map(str, args)],
                 env=base_env(PYTHONPATH=str(REPO / "python")), timeout=180)
    assert result.returncode == 0 and "OK" in result.stdout, describe(result)


@pytest.mark.parametrize("chips", [2, 4])
@pytest.mark.parametrize("example", L3_EXAMPLES, ids=lambda e: e[-1].removesuffix(".py"))
def test_l3_example_passes_its_golden_check(example, chips):
    extra = ["--root", chips - 1] if example[-1] == "broadcast" else []
    run_l3_example(example, "--chips", chips, *extra)


@pytest.mark.parametrize("example", L3_EXAMPLES, ids=lambda e: e[-1].removesuffix(".py"))
def test_l3_example_writes_every_diagnostic_of_both_levels(example, tmp_path):
    out = tmp_path / "out"
    run_l3_example(example, "--chips", 2, *DIAGNOSTIC_FLAGS, "--output-prefix", out)
    for level_dir, level in [(out, 3), (out / "chip0", 2), (out / "chip1", 2)]:
        assert json.loads((level_dir / "deps.json").read_text())["runtime_level"] == level
        trace = json.loads((level_dir / "swimlane.json").read_text())
        assert trace["otherData"]["runtime_level"] == level
        lines = (level_dir / "scope_stats.jsonl").read_text().splitlines()
        assert json.loads(lines[0])["runtime_level"] == level
        assert json.loads((level_dir / "tensor_dump.json").read_text())["runtime_level"] == level
    trace = json.loads((out / "swimlane.json").read_text())
    assert min(e["ts"] for e in trace["traceEvents"] if "ts" in e) >= 0
    assert any(e.get("cat") == "spawn" for e in trace["traceEvents"])


def test_a_node_run_replays_to_the_same_outputs(node, tmp_path):
    w, h = node
    a, b = w.alloc([32], np.int32), w.alloc([32], np.int32)
    last = w.chips - 1

    def orchestration(o):
        for r in range(3):
            with rt.scope():
                o.submit_next_level(h["fill"], rt.TaskArgs().output_existing(a.on(0)).scalar(r, "int32"),
                                    worker=0)
                o.submit_sub(h["add_one"], rt.TaskArgs().input(a.on(0)).output_existing(a.on(last)))
        o.allreduce(a)

    w.run(orchestration, rt.CallConfig(dep_gen=True, output_prefix=str(tmp_path)))
    w.replay(tmp_path / "deps.json", {"fill": h["fill"], "add_one": h["add_one"]},
             buffers=[(a.on(c), b.on(c)) for c in range(w.chips)])
    for c in range(w.chips):
        np.testing.assert_array_equal(b.on(c), a.on(c))
