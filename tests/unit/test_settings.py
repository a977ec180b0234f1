"""The keyword API of ``fused_hmc.sample`` and ``Sampler`` comes from one list
(sampling.settings.SamplerOptions), is the API it was (names, order, defaults, keyword-only), and
is checked once into a frozen SamplerSettings."""
from __future__ import annotations

import dataclasses
import inspect

import pytest
import torch

import fused_hmc
from fused_hmc.sampling.settings import SamplerOptions, SamplerSettings, check_settings

# The public keyword arguments and their defaults, as users call them (keep in step with the docs).
API = [("step_size", 0.1), ("num_leapfrog_steps", 10), ("mu", None), ("thin", 1),
       ("keep_samples", True), ("seed", None), ("generator", None), ("progress", True),
       ("chunk_size", None), ("chain_offset", 0), ("first_transition", 0), ("num_warmup", 0),
       ("target", None), ("target_accept", None), ("adapt_step_size", True),
       ("adapt_mass_matrix", True), ("pooled", None), ("jitter", 0.0), ("inverse_mass", None),
       ("mass_matrix", "diagonal"), ("adapt_windows", None), ("out", None), ("checkpoint", None),
       ("checkpoint_every", 60.0), ("superchains", None), ("process_group", None),
       ("adapt_trajectory_length", False), ("max_leapfrog_steps", 1000),
       ("trajectory_length", None), ("mass_estimator", "draws"), ("pooled_acceptance", None)]


@pytest.mark.parametrize("function, positional", [(fused_hmc.Sampler, ["q0"]),
                                                  (fused_hmc.sample, ["q0", "num_samples"])])
def test_the_keyword_api_is_unchanged(function, positional):
    parameters = list(inspect.signature(function).parameters.values())
    assert [p.name for p in parameters[:len(positional)]] == positional
    keywords = parameters[len(positional):]
    assert [(p.name, p.default) for p in keywords] == API
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in keywords)


@pytest.mark.parametrize("call, name", [(lambda q, **kw: fused_hmc.Sampler(q, **kw), "Sampler"),
                                        (lambda q, **kw: fused_hmc.sample(q, 2, **kw), "sample")])
def test_an_unknown_keyword_is_named(call, name):
    with pytest.raises(TypeError, match=rf"{name}\(\) got an unexpected keyword argument "
                                        "'num_leapfrogs'"):
        call(torch.zeros(2, 3), num_leapfrogs=5)


def test_settings_are_checked_once_and_frozen():
    q = torch.zeros(4, 3)
    options = SamplerOptions(step_size=torch.full((4,), 0.2), num_warmup=30, thin=2, seed=7,
                             mu=[1.0, 2.0, 3.0])
    settings = check_settings(options, q)
    assert isinstance(settings.step_size, torch.Tensor) and settings.warmup.num_warmup == 30
    assert settings.mu.dtype == q.dtype and settings.mu.tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.thin = 3
    sampler = fused_hmc.Sampler(q, **{f.name: getattr(options, f.name)
                                      for f in dataclasses.fields(options)})
    assert isinstance(sampler.settings, SamplerSettings)
    assert (sampler.thin, sampler.seed, sampler.warmup) == (2, 7, settings.warmup)
    with pytest.raises(ValueError, match="thin must be >= 1, got 0"):
        check_settings(dataclasses.replace(options, thin=0), q)
