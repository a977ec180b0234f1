"""Fake (meta) implementations, so torch.compile and CUDA graphs can trace through the ops."""
from __future__ import annotations

import torch

_registered = False


def _outputs(q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return q.new_empty(q.shape), q.new_empty((q.shape[0],), dtype=torch.bool)


def register() -> None:
    global _registered
    if _registered:
        return
    _registered = True

    @torch.library.register_fake("fused_hmc::hmc_step_noise")
    def _(q, mu, momentum, uniform, step_size, num_leapfrog_steps):
        return _outputs(q)

    @torch.library.register_fake("fused_hmc::hmc_step")
    def _(q, mu, step_size, num_leapfrog_steps, rng, generator=None, seed=None, transition=0):
        return _outputs(q)

    @torch.library.register_fake("fused_hmc::hmc_step_traced")
    def _(q, mu, step_size, num_leapfrog_steps, rng, generator=None, seed=None, transition=0):
        uniform_dtype = torch.float32 if rng == "philox" else torch.get_default_dtype()
        return (*_outputs(q), q.new_empty(q.shape), q.new_empty((q.shape[0],), dtype=uniform_dtype))

    @torch.library.register_fake("fused_hmc::philox4x32")
    def _(counters, key):
        return torch.empty_like(counters)

    @torch.library.register_fake("fused_hmc::run_chains")
    def _(q, mu, step_size, num_leapfrog_steps, seed, chain_offset, first_transition,
          num_transitions, thin, samples, mean, m2, accept_count, accept_prob_sum, kept_before):
        return None  # mutates its (a!)..(f!) arguments in place, returns nothing

    @torch.library.register_fake("fused_hmc::run_chains_tuned")
    def _(q, target_kind, mu, precision, step_size, inv_mass, jitter, num_leapfrog_steps, seed,
          chain_offset, first_transition, num_transitions, thin, samples, mean, m2, accept_count,
          accept_prob_sum, kept_before):
        return None  # mutates q, samples, mean, m2, accept_count, accept_prob_sum in place

    @torch.library.register_fake("fused_hmc::warmup_chains")
    def _(q, target_kind, mu, precision, step_size, inv_mass, jitter, num_leapfrog_steps, seed,
          chain_offset, first_transition, num_transitions, warmup_start, num_warmup, init_buffer,
          base_window, term_buffer, target_accept, adapt_step_size, adapt_mass_matrix,
          dual_averaging, window_mean, window_m2):
        return None  # mutates q, step_size, inv_mass and the adaptation state in place
