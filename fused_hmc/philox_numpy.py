"""An independent Philox4x32-10 in numpy (Salmon et al. 2011), for checking the C++/CUDA stream.

Vectorised over blocks; written from the Random123 specification, sharing no code with csrc/.
"""
from __future__ import annotations

import numpy as np

_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
_MASK32 = np.uint64(0xFFFFFFFF)
_MASK64 = (1 << 64) - 1
EXPLICIT_SEED_DOMAIN = int.from_bytes(b"fusedhmc", "big")  # 0x6675736564686D63


def philox_key_from_seed(seed: int) -> int:
    """The Philox key of an explicit ``seed=`` (any int, read as its 64 bits): SplitMix64's
    finalizer of seed ^ EXPLICIT_SEED_DOMAIN, a bijection of 64-bit words, so explicit-seed streams
    are not torch's generator streams (torch keys Philox with its raw seed)."""
    z = (seed & _MASK64) ^ EXPLICIT_SEED_DOMAIN
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def philox4x32_10(counters: np.ndarray, key: int) -> np.ndarray:
    """counters [N, 4] uint32 (words x, y, z, w), 64-bit key -> [N, 4] uint32 output blocks."""
    c = np.asarray(counters, dtype=np.uint32).reshape(-1, 4).astype(np.uint64)
    k0, k1 = key & 0xFFFFFFFF, (key >> 32) & 0xFFFFFFFF
    x, y, z, w = c[:, 0], c[:, 1], c[:, 2], c[:, 3]
    for rnd in range(10):
        p0, p1 = _M0 * x, _M1 * z
        hi0, lo0 = p0 >> np.uint64(32), p0 & _MASK32
        hi1, lo1 = p1 >> np.uint64(32), p1 & _MASK32
        x, y, z, w = (hi1 ^ y ^ np.uint64(k0)), lo1, (hi0 ^ w ^ np.uint64(k1)), lo0
        k0, k1 = (k0 + _W0) & 0xFFFFFFFF, (k1 + _W1) & 0xFFFFFFFF
    return np.stack([x, y, z, w], axis=1).astype(np.uint32)


def curand_counters(subsequence: np.ndarray, block_index: np.ndarray) -> np.ndarray:
    """curand's layout: block index in words (x, y), subsequence in words (z, w)."""
    sub = np.asarray(subsequence, dtype=np.uint64)
    blk = np.asarray(block_index, dtype=np.uint64)
    sub, blk = np.broadcast_arrays(sub, blk)
    return np.stack([blk & _MASK32, blk >> np.uint64(32), sub & _MASK32, sub >> np.uint64(32)],
                    axis=-1).astype(np.uint32).reshape(-1, 4)


def stream_blocks(seed: int, chains: np.ndarray, transition: int, dim: int,
                  dtype: str) -> np.ndarray:
    """The blocks [chains, blocks_per_transition, 4] of one transition of explicit seed ``seed``.

    The key is philox_key_from_seed(seed); chain c is subsequence c; transition t owns blocks
    t * bpt + [0, bpt), where bpt = ceil(dim / normals_per_block) + 1 (4 normals per block in
    float32, 2 in float64).
    """
    per_block = 4 if dtype == "float32" else 2
    bpt = -(-dim // per_block) + 1
    chains = np.asarray(chains, dtype=np.uint64)
    blocks = transition * bpt + np.arange(bpt, dtype=np.uint64)
    sub, blk = np.meshgrid(chains, blocks, indexing="ij")
    out = philox4x32_10(curand_counters(sub.ravel(), blk.ravel()), philox_key_from_seed(seed))
    return out.reshape(len(chains), bpt, 4)


def box_muller_float32(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """curand's float32 Box-Muller in float64 arithmetic (reference values, not bit-exact)."""
    inv = np.float64(np.float32(2.3283064e-10))
    inv_2pi = np.float64(np.float32(np.float32(2.3283064e-10) * np.float32(6.2831855)))
    u = np.float32(a.astype(np.float64) * inv + inv / 2)
    v = np.float32(b.astype(np.float64) * inv_2pi + inv_2pi / 2)
    s = np.sqrt(-2.0 * np.log(u.astype(np.float64)))
    return s * np.sin(v.astype(np.float64)), s * np.cos(v.astype(np.float64))
