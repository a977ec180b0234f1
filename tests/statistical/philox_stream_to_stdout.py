"""Writes the CPU build's Philox4x32-10 stream to stdout as raw little-endian uint32 words.

The words come from ``fused_hmc.ops.philox4x32`` (csrc/math/rng/philox.h, the header the CUDA
kernels share), laid out as the kernels consume them: block ``n`` of subsequences (chains)
``0..C-1`` in turn, then block ``n + 1``, and so on; within a block, words x, y, z, w. With
``--chains 1`` it is one subsequence's consecutive counters. Feed it to an RNG battery, e.g.

    python tests/statistical/philox_stream_to_stdout.py | dieharder -g 200 -a

It writes until stdout closes (or ``--words`` words). Not part of the pytest run.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np
import torch


def blocks(key: int, chains: int, first_block: int, num_blocks: int) -> np.ndarray:
    """Blocks first_block .. first_block + num_blocks - 1 of subsequences 0..chains-1 -> uint32 words
    in stream order [num_blocks, chains, 4]."""
    from fused_hmc import ops

    block = np.arange(first_block, first_block + num_blocks, dtype=np.uint64)
    chain = np.arange(chains, dtype=np.uint64)
    blk, sub = np.meshgrid(block, chain, indexing="ij")
    mask = np.uint64(0xFFFFFFFF)
    counters = np.stack([blk & mask, blk >> np.uint64(32), sub & mask, sub >> np.uint64(32)],
                        axis=-1).astype(np.uint32).reshape(-1, 4)
    out = ops.philox4x32(torch.from_numpy(counters.view(np.int32)), key)
    return out.numpy().view(np.uint32).reshape(num_blocks, chains, 4)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--key", type=lambda s: int(s, 0), default=0x5EED_0000_2026,
                        help="64-bit Philox key (the seed)")
    parser.add_argument("--chains", type=int, default=256,
                        help="subsequences interleaved block by block (1: one subsequence)")
    parser.add_argument("--words", type=int, default=0, help="stop after this many words (0: never)")
    parser.add_argument("--chunk-blocks", type=int, default=1 << 18,
                        help="Philox blocks computed per call")
    args = parser.parse_args(argv)
    out = sys.stdout.buffer
    per_call = max(1, args.chunk_blocks // args.chains)
    written, block = 0, 0
    try:
        while args.words == 0 or written < args.words:
            words = blocks(args.key, args.chains, block, per_call).reshape(-1)
            if args.words:
                words = words[: args.words - written]
            out.write(words.astype("<u4").tobytes())
            written += words.size
            block += per_call
        out.flush()
    except BrokenPipeError:  # the battery closed its end: done
        sys.stderr.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
