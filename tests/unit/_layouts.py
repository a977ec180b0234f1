"""Named memory layouts of a [B, d] tensor, built on any device from seeded CPU draws."""
from __future__ import annotations

import torch

# name -> (shape of the base tensor drawn for [b, d], the view of it that is the [b, d] tensor)
_VIEWS = {
    "contiguous": (lambda b, d: (b, d), lambda t, b, d: t),
    "transposed": (lambda b, d: (d, b), lambda t, b, d: t.t()),
    "row-sliced": (lambda b, d: (2 * b, d), lambda t, b, d: t[::2]),
    "column-sliced": (lambda b, d: (b, 2 * d), lambda t, b, d: t[:, ::2]),
    # torch.randn(64, 4096)[:, ::2].t(): not dense, and its stride order is not row-major
    "sliced-transposed": (lambda b, d: (d, 2 * b), lambda t, b, d: t[:, ::2].t()),
    "transposed-row-sliced": (lambda b, d: (2 * d, b), lambda t, b, d: t[::2].t()),
    "middle-of-3d": (lambda b, d: (b, 3, d), lambda t, b, d: t[:, 1]),
    "permuted-3d": (lambda b, d: (d, 2, b), lambda t, b, d: t.permute(2, 1, 0)[:, 1]),
    "expanded-rows": (lambda b, d: (1, d), lambda t, b, d: t.expand(b, d)),
    "expanded-columns": (lambda b, d: (b, 1), lambda t, b, d: t.expand(b, d)),
    "expanded-then-contiguous": (lambda b, d: (1, d), lambda t, b, d: t.expand(b, d).contiguous()),
    # rows start one element past the allocation's (aligned) start
    "storage-offset": (lambda b, d: (b * d + 1,), lambda t, b, d: t[1:].view(b, d)),
}
LAYOUTS = tuple(_VIEWS)


def make_layout(gen: torch.Generator, batch: int, dim: int, *, dtype: torch.dtype,
                device: torch.device | str, layout: str) -> torch.Tensor:
    """A [batch, dim] tensor of normal draws from `gen` (the same numbers on every device) in the
    named layout."""
    base_shape, view = _VIEWS[layout]
    base = torch.randn(*base_shape(batch, dim), generator=gen, dtype=dtype).to(device)
    return view(base, batch, dim)
