"""`./hp moe`, the main job: it starts the ranks itself (hprun), runs the MoE layer, checks it
against the references and reports per phase; bad requests are refused before any rank starts."""
from __future__ import annotations

import json

import pytest

from conftest import REPO, describe, run
from jobs import job_env

HP = REPO / "hp"
SMALL = ["--tokens", "24", "--hidden", "128", "--intermediate", "64", "--topk", "3", "--iterations", "2",
         "--warmup", "1"]


def hp_moe(*args):
    return run([HP, "moe", *args], env=job_env(HP_PAYLOAD_DIR=None), timeout=240)


@pytest.mark.parametrize("ranks,comm", [(2, "shmem"), (4, "window")])
def test_hp_moe_runs_checks_and_reports(ranks, comm):
    result = hp_moe("--ranks", str(ranks), "--experts", str(2 * ranks), "--comm", comm, "--json", *SMALL)
    assert result.returncode == 0, describe(result)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["ranks"] == ranks and report["transport"] == "shm"
    assert report["check"] == "passed", report
    assert report["check_error_quantized"] < 5e-3 and 0 < report["check_error_float"] < 6e-2, report
    assert report["rows"] == ranks * 24 * 3  # every token to top-3 distinct experts
    assert set(report["phases"]) == {"dispatch", "GMM1+SwiGLU", "GMM2", "combine"}
    assert report["planned_path"] == "deep" and report["path"] == "staged"


@pytest.mark.parametrize("ranks,comm,shared", [(2, "shmem", 0), (4, "window", 48)])
def test_hp_moe_deep_path(ranks, comm, shared):
    result = hp_moe("--ranks", str(ranks), "--experts", str(2 * ranks), "--comm", comm,
                    "--path", "shared" if shared else "deep",
                    "--shared-intermediate", str(shared), "--json", *SMALL)
    assert result.returncode == 0, describe(result)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["path"] == ("shared" if shared else "deep") and report["check"] == "passed", report
    assert report["overlap_ms"] >= 0 and report["rows"] == ranks * 24 * 3, report


@pytest.mark.parametrize("shared,keep,int8,dtype", [(0, False, False, "fp32"), (48, False, False, "bf16"),
                                                    (0, True, False, "fp32"), (48, True, True, "bf16")])
def test_hp_moe_backward(shared, keep, int8, dtype):
    result = hp_moe("--ranks", "2", "--experts", "4", "--backward", "--shared-intermediate", str(shared), "--json",
                    *(["--keep-activations"] if keep else []), *(["--int8-act-grads"] if int8 else []),
                    "--grad-dtype", dtype, *SMALL)
    assert result.returncode == 0, describe(result)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["check"] == "passed", report
    backward = report["backward"]
    assert backward["keep_activations"] == keep and backward["int8_activation_grads"] == int8
    assert backward["grad_dtype"] == dtype
    assert set(backward["phases"]) == {"bwd dispatch", "bwd recompute", "bwd act grad", "bwd weight grad",
                                       "bwd combine"}
    assert set(backward["check_error"]) == {"dx", "d_topk_weights", "dw1", "dw2"}
    assert all(0 < e < 3e-2 for e in backward["check_error"].values()), backward
    assert backward["total_ms"] > 0


@pytest.mark.parametrize("flag", [["--keep-activations"], ["--int8-act-grads"], ["--grad-dtype", "bf16"]])
def test_hp_moe_backward_options_need_backward(flag):
    result = hp_moe("--ranks", "1", *flag, *SMALL)
    assert result.returncode != 0 and "--backward" in result.stderr + result.stdout, describe(result)


def test_hp_moe_with_a_shared_expert():
    result = hp_moe("--ranks", "2", "--experts", "4", "--shared-intermediate", "48", "--json", *SMALL)
    assert result.returncode == 0, describe(result)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["check"] == "passed" and report["planned_path"] == "shared", report


def test_hp_moe_table_and_trace(tmp_path):
    trace = tmp_path / "moe.json"
    result = hp_moe("--ranks", "2", "--experts", "2", "--topk", "1", "--skew", "2", "--trace", str(trace),
                    "--tokens", "24", "--hidden", "128", "--intermediate", "64", "--iterations", "2", "--warmup", "1")
    assert result.returncode == 0, describe(result)
    out = result.stdout
    for phase in ("dispatch", "GMM1+SwiGLU", "GMM2", "combine", "total"):
        assert phase in out, out
    assert "check (first 8 tokens of every rank): passed" in out, out
    assert "the planner's path is non-deep" in out, out  # one expert per rank
    events = json.loads(trace.read_text())["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert {e["pid"] for e in spans} == {0, 1}
    assert len(spans) == 2 * 2 * 4  # ranks x iterations x phases (staged, on the rank's thread)
    assert all(e["dur"] >= 0 and e["tid"] == 0 for e in spans)


def test_hp_moe_trace_of_every_core_on_the_deep_path(tmp_path):
    trace = tmp_path / "deep.json"
    result = hp_moe("--ranks", "2", "--experts", "4", "--path", "deep", "--backward", "--trace", str(trace), *SMALL)
    assert result.returncode == 0, describe(result)
    events = json.loads(trace.read_text())["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names[(0, 1)] == "cube core 0" and names[(0, 2)] == "vector core 0", names
    spans = [e for e in events if e["ph"] == "X"]
    rows = {(e["pid"], names[(e["pid"], e["tid"])], e["name"]) for e in spans}
    for rank in (0, 1):
        assert (rank, "cube core 0", "GMM1+SwiGLU") in rows and (rank, "cube core 0", "GMM2") in rows, rows
        assert (rank, "vector core 0", "dispatch") in rows and (rank, "vector core 0", "combine") in rows, rows
        assert (rank, "cube core 0", "bwd weight grad") in rows and (rank, "vector core 0", "bwd combine") in rows
    assert all(e["dur"] >= 0 for e in spans)


@pytest.mark.parametrize("args,message", [
    (["--path", "shared"], "needs a shared expert"),
    (["--path", "deep", "--vector-cores", "3"], "does not fit"),
    (["--experts", "6", "--ranks", "4"], "not a multiple"),
    (["--topk", "9", "--experts", "8"], "more than"),
    (["--comm", "carrier-pigeon"], "carrier-pigeon"),
])
def test_hp_moe_refuses_what_it_cannot_do(args, message):
    result = hp_moe(*args)
    assert result.returncode != 0, describe(result)
    assert message in result.stderr, describe(result)
    assert "Traceback" not in result.stderr
