"""The layer benchmark's Python peers: the MoE layer as a user runs it instead of the fused C++
layer, each peer a long-lived worker process driven over stdin/stdout.

    peers.py --impl torch --dtype bf16|fp32 | --impl kt --kt-path DIR
             --hidden H --intermediate I --experts E --topk K --tokens T --threads N
             [--weight-max W] [--impls name,name]

Hosted impls (--impls picks some; default all of the kind):
    torch-<dtype>       PyTorch eager forward, router output given (under torch.no_grad())
    torch-<dtype>+bwd   the same forward, then autograd's backward of y with a fixed dy
    kt-int8             KTransformers' kt-kernel AMXInt8_MOE (int8 weights quantised online)
    kt-bf16             kt-kernel AMXBF16_MOE (AVX2BF16_MOE where the extension lacks it)

Every peer builds its layer from workload.py (the numpy twin of workload.h): weights of
experts [0, E), tokens [0, T), int8 weights in [-W, W] (--weight-max, the C++ worker's
weight_max: run.py passes it on). The weights are the workload's int8 dequantised,
W1 = w1 * w1_scale [E, H, 2I] (gate = [..., :I], up = [..., I:]), W2 = w2 * w2_scale [E, I, H],
in the impl's dtype (kt: rounded to bf16 in its own layout, see KtPeer).

Protocol: one JSON object a line. After preparing, the worker prints
    {"ready": [names], "prepare_s": s, "info": "...", "unavailable_impls": {name: reason}}
(prepare_s: seconds from start to ready, imports, workload and weight conversion and kt's
load included; info: the library, variant, classes and threads in words; unavailable_impls
only when some requested impl cannot run here), or, when none can,
    {"unavailable": "<reason>"} and exits 0.
Then, per line on stdin:
    {"cmd": "run", "impl": n, "iterations": k} -> {"impl": n, "seconds": [k wall times]}
        each one layer call (forward, or forward + backward) timed with time.perf_counter;
        no warm-up of its own
    {"cmd": "check", "impl": n} -> {"impl": n, "y": [[H floats], [H floats]]}
        y of global tokens 0 and 1 (only 0 when T = 1) from the impl's last forward (one
        forward first if the impl has not run yet), as float32 values
    {"cmd": "quit"} or end of input -> exit 0
Any failure prints {"error": "<message>"} and exits 1. Only protocol lines reach stdout
(flushed one by one); kt's own C++ output and every diagnostic go to stderr.
"""
import argparse
import glob
import importlib.util
import json
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))


class Unavailable(Exception):
    """The peer, or one of its impls, cannot run on this machine or with this shape."""


# ------------------------------------------------------------------------------------------
# Protocol


class Protocol:
    """stdout for protocol lines only.

    The protocol keeps its own duplicate of the original stdout; fd 1 then points at stderr,
    so that whatever else writes to stdout (kt's C++ printf / std::cout, stray prints) lands
    on stderr instead of corrupting the JSON stream.
    """

    def __init__(self):
        sys.stdout.flush()
        self._out = os.fdopen(os.dup(1), "w")
        os.dup2(2, 1)
        sys.stdout = sys.stderr

    def emit(self, obj):
        self._out.write(json.dumps(obj) + "\n")
        self._out.flush()


class _Parser(argparse.ArgumentParser):
    """Bad usage is a failure like any other: reported on the protocol, exit 1."""

    def error(self, message):
        raise ValueError(f"usage: {message}")


def parse_args(argv):
    p = _Parser(description="MoE layer benchmark peer worker (see module docstring)")
    p.add_argument("--impl", required=True, choices=["torch", "kt"])
    p.add_argument("--dtype", choices=["bf16", "fp32"], help="torch only")
    p.add_argument("--kt-path", help="kt only: the directory holding kt_kernel/ and kt_kernel.libs/")
    p.add_argument("--hidden", type=int, required=True)
    p.add_argument("--intermediate", type=int, required=True)
    p.add_argument("--experts", type=int, required=True)
    p.add_argument("--topk", type=int, required=True)
    p.add_argument("--tokens", type=int, required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--weight-max", type=int, default=127, help="the int8 weights' range [-W, W]")
    p.add_argument("--impls", help="comma-separated names of the hosted impls to prepare")
    a = p.parse_args(argv)
    if a.impl == "torch" and a.dtype is None:
        p.error("--impl torch needs --dtype")
    if a.impl == "kt" and a.kt_path is None:
        p.error("--impl kt needs --kt-path")
    if not 1 <= a.weight_max <= 127:
        p.error("--weight-max must be in 1..127")
    for name in ("hidden", "intermediate", "experts", "topk", "tokens", "threads"):
        if getattr(a, name) < 1:
            p.error(f"--{name} must be positive")
    if a.topk > a.experts:
        p.error("--topk cannot exceed --experts")
    return a


def select_impls(hosted, requested):
    """The requested names (default: all hosted), in the order given; unknown names fail."""
    if requested is None:
        return list(hosted)
    names = [n for n in requested.split(",") if n]
    if not names:
        raise ValueError(f"--impls names none of {', '.join(hosted)}")
    unknown = [n for n in names if n not in hosted]
    if unknown:
        raise ValueError(f"--impls {','.join(unknown)}: this peer hosts {', '.join(hosted)}")
    return names


def serve(peer, proto):
    """Answer commands until quit or end of input; returns the exit status."""
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            cmd = json.loads(line)
            kind = cmd.get("cmd")
            if kind == "quit":
                return 0
            if kind == "run":
                name = cmd["impl"]
                proto.emit({"impl": name, "seconds": peer.run(name, int(cmd["iterations"]))})
            elif kind == "check":
                name = cmd["impl"]
                proto.emit({"impl": name, "y": peer.check(name)})
            else:
                raise ValueError(f"unknown command {kind!r}")
        except Exception as e:  # noqa: BLE001 - every failure ends the worker with an error line
            traceback.print_exc(file=sys.stderr)
            proto.emit({"error": f"{type(e).__name__}: {e}"})
            return 1
    return 0


class Peer:
    """What serve() drives: named impls with run(name, n) and check(name)."""

    def __init__(self, ready):
        self.ready = ready  # the names that run here
        self.last_y = {}  # name -> y [T, H] of its last forward

    def _check_name(self, name):
        if name not in self.ready:
            raise ValueError(f"impl {name!r} is not prepared here (ready: {', '.join(self.ready)})")

    def run(self, name, iterations):
        self._check_name(name)
        return [self._timed(name) for _ in range(iterations)]

    def check(self, name):
        self._check_name(name)
        if name not in self.last_y:
            self._timed(name)
        return self._rows01(self.last_y[name])


# ------------------------------------------------------------------------------------------
# PyTorch eager


class TorchPeer(Peer):
    """The layer as a PyTorch user writes it, the router's output given.

    Each expert's W1[e] [H, 2I] and W2[e] [I, H] is its own tensor, as in a ModuleList of
    experts: indexing one [E, ...] leaf instead would make every expert's backward produce a
    full-size [E, ...] gradient (E of them summed), a cost a ModuleList layer never pays.
    """

    def __init__(self, args, torch, np, workload):
        hosted = [f"torch-{args.dtype}", f"torch-{args.dtype}+bwd"]
        super().__init__(select_impls(hosted, args.impls))
        self.torch = torch
        self.dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[args.dtype]
        H, I, E, K, T = args.hidden, args.intermediate, args.experts, args.topk, args.tokens
        self.E, self.I = E, I

        # Expert by expert, so that only one expert's int8 and float32 temporaries exist at a time.
        self.W1, self.W2 = [], []
        for e in range(E):
            w1, s1, w2, s2 = workload.make_experts(H, I, e, 1, args.weight_max)
            self.W1.append((torch.from_numpy(w1[0]).to(torch.float32) * torch.from_numpy(s1[0])).to(self.dtype))
            self.W2.append((torch.from_numpy(w2[0]).to(torch.float32) * torch.from_numpy(s2[0])).to(self.dtype))
            del w1, s1, w2, s2

        x, topk_idx, topk_weights = workload.make_tokens(H, E, K, 0, T)
        self.x = torch.from_numpy(workload.bf16_to_float(x)).to(self.dtype)  # exact in either dtype
        self.topk_idx = torch.from_numpy(topk_idx)
        # Routing weights in the activations' dtype, as a model casts them before weighting.
        self.topk_weights = torch.from_numpy(topk_weights).to(self.dtype)

        self.leaves = []
        if any(n.endswith("+bwd") for n in self.ready):
            self.dy = torch.from_numpy(workload.make_dy(H, 0, T)).to(self.dtype)
            self.leaves = [self.x, self.topk_weights] + self.W1 + self.W2
            for t in self.leaves:
                t.requires_grad_(True)
        threads = torch.get_num_threads()
        self.info = f"torch {torch.__version__}, {args.dtype}, {threads} thread{'s' if threads > 1 else ''}"
        if args.dtype == "fp32":
            self.info += f", BLAS {mapped_blas()}"

    def forward(self):
        torch, I = self.torch, self.I
        y = torch.zeros(self.x.shape, dtype=self.dtype)
        for e in range(self.E):
            tok, slot = (self.topk_idx == e).nonzero(as_tuple=True)
            if tok.numel() == 0:
                continue
            xe = self.x.index_select(0, tok)
            h = xe @ self.W1[e]
            g, u = h[:, :I], h[:, I:]
            a = torch.nn.functional.silu(g) * u
            out = (a @ self.W2[e]) * self.topk_weights[tok, slot, None]
            y.index_add_(0, tok, out)
        return y

    def _timed(self, name):
        if name.endswith("+bwd"):
            for t in self.leaves:
                t.grad = None
            t0 = time.perf_counter()
            y = self.forward()
            y.backward(self.dy)
            seconds = time.perf_counter() - t0
        else:
            with self.torch.no_grad():  # inference: no graph is recorded
                t0 = time.perf_counter()
                y = self.forward()
                seconds = time.perf_counter() - t0
        self.last_y[name] = y.detach()
        return seconds

    def _rows01(self, y):
        return y[:2].to(self.torch.float32).tolist()


def mapped_blas():
    """The BLAS this process has mapped, as its real path's last two parts: torch's fp32 matmul
    runs on it, and on Debian libblas.so.3 is whichever alternative is installed
    (blas/libblas.so.3.* is netlib's single-threaded reference BLAS, openblas-pthread/... OpenBLAS)."""
    found = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if path.startswith("/") and "blas" in os.path.basename(path):
                found.add(os.path.join(*path.split("/")[-2:]))
    return " + ".join(sorted(found)) or "none mapped"


# ------------------------------------------------------------------------------------------
# KTransformers' kt-kernel

# The extension variants kt-kernel ships, best first, with the /proc/cpuinfo flags kt-kernel
# requires for each (a flag also matches spelled without underscores).
KT_VARIANTS = [
    ("amx", ["amx_tile", "amx_int8", "amx_bf16", "avx512f", "avx512bw", "avx512_vnni", "avx512_vbmi",
             "avx512_bf16"]),
    ("avx512_bf16", ["avx512f", "avx512bw", "avx512_vnni", "avx512_vbmi", "avx512_bf16"]),
    ("avx512_vbmi", ["avx512f", "avx512bw", "avx512_vnni", "avx512_vbmi"]),
    ("avx512_vnni", ["avx512f", "avx512bw", "avx512_vnni"]),
    ("avx512_base", ["avx512f", "avx512bw"]),
    ("avx2", ["avx2"]),
]
KT_VARIANT_NAMES = [v for v, _ in KT_VARIANTS]


def kt_detect_variant():
    """The variant kt-kernel itself would pick: KT_KERNEL_CPU_VARIANT if valid, else the best
    whose flags are all in /proc/cpuinfo's first flags line, else avx2."""
    forced = os.environ.get("KT_KERNEL_CPU_VARIANT", "").lower()
    if forced in KT_VARIANT_NAMES:
        return forced
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].lower().split())
                    break
    except OSError:
        return "avx2"
    for variant, needed in KT_VARIANTS:
        if all(flag in flags or flag.replace("_", "") in flags for flag in needed):
            return variant
    return "avx2"


def kt_load_extension(kt_path):
    """(ext, detected variant): the extension module loaded straight from its .so, without
    importing the kt_kernel package (whose __init__ imports torch 2.x). Like kt-kernel, a
    variant that fails to load falls back to the next one down, then to a single-variant
    build (kt_kernel_ext.*.so)."""
    pkg = os.path.join(kt_path, "kt_kernel")
    if not os.path.isdir(pkg):
        raise Unavailable(f"kt-kernel is not installed: no kt_kernel/ in {kt_path}")
    detected = kt_detect_variant()
    candidates = [glob.glob(os.path.join(pkg, f"_kt_kernel_ext_{v}.*.so"))
                  for v in KT_VARIANT_NAMES[KT_VARIANT_NAMES.index(detected):]]
    candidates.append(glob.glob(os.path.join(pkg, "kt_kernel_ext.*.so")))
    failures = []
    for files in candidates:
        for so in files:
            try:
                spec = importlib.util.spec_from_file_location("kt_kernel_ext", so)
                ext = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(ext)
                return ext, detected
            except (ImportError, OSError) as e:
                failures.append(f"{os.path.basename(so)}: {e}")
    if not failures:
        raise Unavailable(f"kt-kernel in {kt_path} has no extension for this CPU (detected {detected})")
    raise Unavailable("kt-kernel's extension does not load: " + "; ".join(failures))


class KtPeer(Peer):
    """KTransformers' CPU MoE kernels, fed the workload's weights from memory.

    kt's layout: gate_proj [E, I, H], up_proj [E, I, H], down_proj [E, H, I] in bf16, i.e. the
    transposes of W1's gate and up halves and of W2, rounded to bf16. With MOEConfig.save and
    .load both False and no per-expert pointer lists (gate_projs), load_weights reads those
    pointers: AMXInt8_MOE quantises them online (per output channel), AMXBF16_MOE packs them;
    nothing is read from or written to MOEConfig.path.

    Shapes: AMXInt8_MOE needs H and I to be multiples of 64 (its K_STEP; it throws otherwise),
    AMXBF16_MOE multiples of 32 (it segfaults otherwise), so both are checked here first;
    AVX2BF16_MOE is not restricted here. MOEConfig.max_len (the row capacity of its
    activation buffers) must be a multiple of 32 (the int8 M_STEP); T is rounded up to it.
    """

    # impl name -> (class names, best first; H and I must be multiples of this)
    CLASSES = {"kt-int8": (["AMXInt8_MOE"], {"AMXInt8_MOE": 64}),
               "kt-bf16": (["AMXBF16_MOE", "AVX2BF16_MOE"], {"AMXBF16_MOE": 32, "AVX2BF16_MOE": 1})}

    def __init__(self, args, np, workload):
        wanted = select_impls(list(self.CLASSES), args.impls)
        self.np, self.workload = np, workload
        H, I, E, K, T = args.hidden, args.intermediate, args.experts, args.topk, args.tokens
        self.K = K
        ext, detected = kt_load_extension(args.kt_path)
        self.ext = ext

        classes, self.unavailable = {}, {}
        for name in wanted:
            try:
                classes[name] = self._pick_class(name, H, I)
            except Unavailable as u:
                self.unavailable[name] = str(u)
        if not classes:
            raise Unavailable("; ".join(f"{n}: {r}" for n, r in self.unavailable.items()))
        super().__init__(list(classes))

        pool = ext.WorkerPoolConfig()  # one subpool of all threads, as kt's wrapper builds it
        pool.subpool_count = 1
        pool.subpool_numa_map = [0]
        pool.subpool_thread_count = [args.threads]
        self.cpu_infer = ext.CPUInfer(pool)

        self._make_weights(E, I, H, args.weight_max)
        x, topk_idx, topk_weights = workload.make_tokens(H, E, K, 0, T)
        # The forward's operands, referenced for the life of the moe objects (kt keeps pointers).
        self.x, self.topk_idx, self.topk_weights = x, topk_idx, topk_weights
        self.bsz = np.array([T], dtype=np.int32)
        self.gpu_mask = np.zeros(E, dtype=np.uint8)  # no expert on a GPU
        self.physical_to_logical = np.arange(E, dtype=np.int64)

        self.moe, self.out = {}, {}
        for name, cls_name in classes.items():
            self.moe[name] = self._build(getattr(ext.moe, cls_name), E, K, H, I, T)
            self.out[name] = np.zeros((T, H), dtype=np.uint16)  # bf16 y

        version = kt_version(args.kt_path)
        loaded = getattr(ext, "__cpu_variant__", "?")
        parts = [f"kt-kernel{' ' + version if version else ''} ext {loaded} (cpu: {detected})"]
        parts += [f"{n}: {c}" + (f" [int8 kernel {ext.__int8_kernel__}]" if n == "kt-int8" and
                                 hasattr(ext, "__int8_kernel__") else "") for n, c in classes.items()]
        parts.append(f"{args.threads} thread{'s' if args.threads > 1 else ''}")
        self.info = ", ".join(parts)

    def _pick_class(self, name, H, I):
        names, align = self.CLASSES[name]
        present = [c for c in names if hasattr(self.ext.moe, c)]
        if not present:
            raise Unavailable(f"this kt-kernel build has no {' or '.join(names)}")
        cls = present[0]
        if H % align[cls] or I % align[cls]:
            raise Unavailable(f"{cls} needs hidden and intermediate multiples of {align[cls]} "
                              f"(got {H}, {I})")
        return cls

    def _make_weights(self, E, I, H, W):
        """gate/up [E, I, H] and down [E, H, I] bf16 bits, expert by expert."""
        np, wl = self.np, self.workload
        self.gate = np.empty((E, I, H), dtype=np.uint16)
        self.up = np.empty((E, I, H), dtype=np.uint16)
        self.down = np.empty((E, H, I), dtype=np.uint16)
        for e in range(E):
            w1, s1, w2, s2 = wl.make_experts(H, I, e, 1, W)
            f1 = w1[0].astype(np.float32) * s1[0]  # W1[e] [H, 2I], the same float32 as torch's
            self.gate[e] = wl.float_to_bf16(f1[:, :I]).T
            self.up[e] = wl.float_to_bf16(f1[:, I:]).T
            del f1
            self.down[e] = wl.float_to_bf16(w2[0].astype(np.float32) * s2[0]).T  # W2[e]^T
            del w1, s1, w2, s2

    def _build(self, cls, E, K, H, I, T):
        cfg = self.ext.moe.MOEConfig(E, K, H, I)
        # Set the mask as a property: the 5-argument constructor has an int overload
        # (num_gpu_experts) that a pointer below 2^31 would silently select.
        cfg.gpu_experts_mask = self.gpu_mask.ctypes.data
        cfg.pool = self.cpu_infer.backend_
        cfg.max_len = (T + 31) // 32 * 32
        cfg.gate_proj = self.gate.ctypes.data
        cfg.up_proj = self.up.ctypes.data
        cfg.down_proj = self.down.ctypes.data
        cfg.save = False
        cfg.load = False
        moe = cls(cfg)
        self.cpu_infer.submit(moe.load_weights_task(self.physical_to_logical.ctypes.data))
        self.cpu_infer.sync()
        return moe

    def _timed(self, name):
        moe, out = self.moe[name], self.out[name]
        t0 = time.perf_counter()
        # incremental=False: the output is overwritten, not accumulated into.
        self.cpu_infer.submit(moe.forward_task(self.bsz.ctypes.data, self.K, self.topk_idx.ctypes.data,
                                               self.topk_weights.ctypes.data, self.x.ctypes.data,
                                               out.ctypes.data, False))
        self.cpu_infer.sync()
        seconds = time.perf_counter() - t0
        self.last_y[name] = out
        return seconds

    def _rows01(self, y):
        return self.workload.bf16_to_float(y[:2]).tolist()


def kt_version(kt_path):
    """kt-kernel's version from its dist-info directory name, if installed with one."""
    found = glob.glob(os.path.join(kt_path, "kt_kernel-*.dist-info"))
    return os.path.basename(found[0])[len("kt_kernel-"):-len(".dist-info")] if found else ""


# ------------------------------------------------------------------------------------------


def main(argv):
    t0 = time.perf_counter()
    proto = Protocol()
    try:
        args = parse_args(argv)
    except ValueError as e:
        proto.emit({"error": str(e)})
        return 1
    # OpenBLAS (numpy's, and Debian torch's fp32 matmul) and OpenMP read their thread counts
    # from the environment once, when they load: set them before numpy and torch are imported.
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    try:
        sys.path.insert(0, HERE)
        import numpy as np
        import workload

        if args.impl == "torch":
            try:
                import torch
            except ImportError as e:
                raise Unavailable(f"torch does not import: {e}") from e
            torch.set_num_threads(args.threads)
            peer = TorchPeer(args, torch, np, workload)
        else:
            peer = KtPeer(args, np, workload)
    except Unavailable as u:
        proto.emit({"unavailable": str(u)})
        return 0
    except Exception as e:  # noqa: BLE001 - reported on the protocol, then exit 1
        traceback.print_exc(file=sys.stderr)
        proto.emit({"error": f"{type(e).__name__}: {e}"})
        return 1
    ready = {"ready": peer.ready, "prepare_s": round(time.perf_counter() - t0, 3), "info": peer.info}
    if getattr(peer, "unavailable", None):
        ready["unavailable_impls"] = peer.unavailable
    proto.emit(ready)
    return serve(peer, proto)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
