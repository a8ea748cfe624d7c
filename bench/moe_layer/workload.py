"""The layer benchmark's workload in numpy: the same definition as workload.h / workload.cpp,
equal to the C++ bit for bit (int8 values, float32 bits, bf16 bits), so that the Python peers
(peers.py) build the same weights, tokens and routing as the C++ worker without sharing files.

    mix(z)        splitmix64's finaliser of z + 0x9E3779B97F4A7C15 (uint64, wrapping)
    hash(tag, i)  mix(mix(tag) ^ i)
    pool(tag, n, m)  int8 values hash(tag, j) % (2m + 1) - m for j < n + POOL_SLACK
    row(tag, r, n, m)  pool(tag, n, m)[s, s + n) with s = hash(tag + 16, r) % POOL_SLACK;
                       row(tag, r, n) = row(tag, r, n, 127)

Tensors (E experts, H hidden, I intermediate, K top-k, t a token's global index, W the weight
range, 127 or 63: what the C++ worker reports as weight_max):
    w1 [E, H, 2I] int8    row (e H + h) = row(1, e H + h, 2I, W); columns [0, I) gate, [I, 2I) up
    w2 [E, I, H] int8     row (e I + i) = row(2, e I + i, H, W)
    w1_scale = 1 / (73 (W / 127) sqrt H), w2_scale = 1 / (73 (W / 127) sqrt I) for every
                          channel (float32)
    x [T, H] bf16         x[t] = row(3, t, H) / 64 (exact in bf16)
    topk_idx [T, K]       token t's k-th expert: the k-th distinct value of
                          hash(4, 64 t + a) % E for a = 0, 1, ...
    topk_weights [T, K]   u_k = 1 + (hash(5, K t + k) % 1024) / 1024, normalised to sum 1
    dy [T, H]             dy[t] = row(6, t, H) / 64 (exact in bf16): the output gradient of
                          the backward benchmarks (Python peers only; the C++ side has no
                          definition of it)

All uint64 arithmetic runs on numpy uint64 arrays, which wrap silently; every constant is an
np.uint64 so nothing is promoted to float64 or to a Python int.
"""
import numpy as np

POOL_SLACK = 1021

_U64 = np.uint64
_GOLDEN = _U64(0x9E3779B97F4A7C15)
_M1 = _U64(0xBF58476D1CE4E5B9)
_M2 = _U64(0x94D049BB133111EB)


def mix(z):
    """splitmix64's finaliser of z + golden ratio; z a uint64 scalar or array (same shape back)."""
    z = np.asarray(z, dtype=_U64)
    with np.errstate(over="ignore"):  # wrapping is the definition
        z = z + _GOLDEN
        z = (z ^ (z >> _U64(30))) * _M1
        z = (z ^ (z >> _U64(27))) * _M2
        return z ^ (z >> _U64(31))


def hash(tag, i):  # noqa: A001 - the definition's name
    """mix(mix(tag) ^ i); i a scalar or an array of indices."""
    return mix(mix(tag) ^ np.asarray(i, dtype=_U64))


def _pool(tag, n, m=127):
    """pool(tag, n, m): int8 [n + POOL_SLACK]."""
    h = hash(tag, np.arange(n + POOL_SLACK, dtype=_U64))
    return ((h % _U64(2 * m + 1)).astype(np.int16) - m).astype(np.int8)


def _rows_into(pool, tag, first, out):
    """Rows [first, first + len(out)) of tensor `tag` into out [count, n], n = out.shape[1].

    Each row is a window of the pool: a fancy index into the pool's sliding-window view
    writes straight into `out`, with no temporary larger than one index per row.
    """
    count, n = out.shape
    starts = hash(tag + 16, np.arange(first, first + count, dtype=_U64)) % _U64(POOL_SLACK)
    windows = np.lib.stride_tricks.sliding_window_view(pool, n)
    # The starts are always in range; mode="clip" spares the buffered copy mode="raise" makes.
    np.take(windows, starts.astype(np.intp), axis=0, out=out, mode="clip")


def make_rows(tag, first, count, n):
    """The rows [first, first + count) of tensor `tag`, n values each: int8 [count, n]."""
    out = np.empty((count, n), dtype=np.int8)
    _rows_into(_pool(tag, n), tag, first, out)
    return out


def make_experts(H, I, E_first, E_count, W=127):
    """Experts [E_first, E_first + E_count) with weights in [-W, W]: (w1 int8 [E, H, 2I],
    w1_scale float32 [E, 2I], w2 int8 [E, I, H], w2_scale float32 [E, H]), E = E_count."""
    w1 = np.empty((E_count, H, 2 * I), dtype=np.int8)
    w2 = np.empty((E_count, I, H), dtype=np.int8)
    pool1, pool2 = _pool(1, 2 * I, W), _pool(2, H, W)
    for e in range(E_count):  # expert by expert: the only temporaries are one expert's starts
        _rows_into(pool1, 1, (E_first + e) * H, w1[e])
        _rows_into(pool2, 2, (E_first + e) * I, w2[e])
    # float32 throughout, as the C++ computes 1.0f / (sigma * std::sqrt(float(H))).
    sigma = np.float32(73) * (np.float32(W) / np.float32(127))
    s1 = np.float32(1) / (sigma * np.sqrt(np.float32(H)))
    s2 = np.float32(1) / (sigma * np.sqrt(np.float32(I)))
    w1_scale = np.full((E_count, 2 * I), s1, dtype=np.float32)
    w2_scale = np.full((E_count, H), s2, dtype=np.float32)
    return w1, w1_scale, w2, w2_scale


def float_to_bf16(f):
    """float32 array -> bf16 bits (uint16), round to nearest even; NaN stays a quiet NaN."""
    bits = np.ascontiguousarray(f, dtype=np.float32).view(np.uint32)
    with np.errstate(over="ignore"):
        rounded = (bits + (np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))) >> np.uint32(16)
    nan = ((bits & np.uint32(0x7F800000)) == np.uint32(0x7F800000)) & ((bits & np.uint32(0x007FFFFF)) != 0)
    quiet = (bits >> np.uint32(16)) | np.uint32(0x0040)
    return np.where(nan, quiet, rounded).astype(np.uint16)


def bf16_to_float(b):
    """bf16 bits (uint16 array) -> float32, exact."""
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def _routing(E, K, first, count):
    """topk_idx int64 [count, K]: for token t the first K distinct hash(4, 64 t + a) % E."""
    assert K <= E, "top-k cannot exceed the expert count"
    g = np.arange(first, first + count, dtype=_U64)
    width = 64
    draws = hash(4, _U64(64) * g[:, None] + np.arange(width, dtype=_U64)) % _U64(E)
    idx = np.empty((count, K), dtype=np.int64)
    for r in range(count):
        distinct = list(dict.fromkeys(draws[r].tolist()))  # first occurrences, in draw order
        a = width
        while len(distinct) < K:  # rare: keep drawing past a = 63, as the C++ loop does
            e = int(hash(4, _U64(64) * g[r] + _U64(a)) % _U64(E))
            if e not in distinct:
                distinct.append(e)
            a += 1
        idx[r] = distinct[:K]
    return idx


def _topk_weights(K, first, count):
    """topk_weights float32 [count, K]: u_k in float32, summed in float32 in order k = 0..K-1,
    each divided by the sum in float32, as the C++ does."""
    g = np.arange(first, first + count, dtype=_U64)
    h = hash(5, _U64(K) * g[:, None] + np.arange(K, dtype=_U64))
    u = np.float32(1) + (h % _U64(1024)).astype(np.float32) / np.float32(1024)
    total = np.zeros(count, dtype=np.float32)
    for k in range(K):  # sequential, not np.sum's pairwise order
        total = total + u[:, k]
    return u / total[:, None]


def make_tokens(H, E, K, first, count):
    """Tokens [first, first + count) (global indices): (x bf16 bits uint16 [T, H],
    topk_idx int64 [T, K], topk_weights float32 [T, K]), T = count."""
    x = float_to_bf16(make_x_float(H, first, count))
    return x, _routing(E, K, first, count), _topk_weights(K, first, count)


def make_x_float(H, first, count):
    """x of tokens [first, first + count) as float32 [T, H] (the same values as the bf16 x)."""
    return make_rows(3, first, count, H).astype(np.float32) / np.float32(64)


def make_dy(H, first, count):
    """dy of tokens [first, first + count): row(6, t, H) / 64 as float32 [T, H] (exact in bf16)."""
    return make_rows(6, first, count, H).astype(np.float32) / np.float32(64)
