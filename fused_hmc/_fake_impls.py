"""Fake (meta) implementations, so torch.compile and CUDA graphs can trace through the ops."""
from __future__ import annotations

import torch

_registered = False


def register() -> None:
    global _registered
    if _registered:
        return
    _registered = True

    @torch.library.register_fake("fused_hmc::transition")
    def _(q, mu, step_size, num_leapfrog_steps, noise, generator=None, seed=None, transition=0,
          momentum=None, uniform=None, trace=False):
        q_new = q.new_empty(q.shape)
        accepted = q.new_empty((q.shape[0],), dtype=torch.bool)
        if not trace:
            return q_new, accepted, q.new_empty((0,)), q.new_empty((0,), dtype=torch.float32)
        if noise == "given":
            return q_new, accepted, q.new_empty(q.shape), uniform.new_empty(uniform.shape)
        uniform_dtype = torch.float32 if noise == "philox" else torch.get_default_dtype()
        return q_new, accepted, q.new_empty(q.shape), q.new_empty((q.shape[0],),
                                                                   dtype=uniform_dtype)

    @torch.library.register_fake("fused_hmc::sample")
    def _(*args, **kwargs):
        return None  # mutates its (a!)..(f!) arguments in place, returns nothing

    @torch.library.register_fake("fused_hmc::warmup")
    def _(*args, **kwargs):
        return None  # mutates its (a!)..(h!) arguments in place, returns nothing

    @torch.library.register_fake("fused_hmc::pooled_update")
    def _(*args, **kwargs):
        return None  # mutates step_size, dual_averaging and inv_mass in place

    @torch.library.register_fake("fused_hmc_testing::philox4x32")
    def _(counters, key):
        return torch.empty_like(counters)
