"""ESS and posteriordb agreement of bench_lanes.py's runs, one estimator for both samplers.

Draws are reported as the TorchModel reports them (its constrained parameters, each flattened);
the smallest bulk ESS over them is arviz-stats' (as bench_models and bench_chees use it), on the
first ESS_CHAINS chains and scaled to all of them (the chains are exchangeable: bench_chees does
the same, since rank-normalising 4,096 x 1,000 draws per parameter takes a while on the host).
"""
from __future__ import annotations

import numpy as np
import torch

ESS_CHAINS = 256


def constrained_array(params: dict, x: np.ndarray) -> np.ndarray:
    """x [chain, draw, dim] unconstrained -> [chain, draw, P], the constrained values of
    fused_hmc.torch_model.Parameters(params) in its order, each flattened row-major."""
    from fused_hmc.torch_model import Parameters

    values = Parameters(params).constrain(torch.from_numpy(np.array(x, dtype=np.float64)))
    lead = x.shape[:2]
    return torch.cat([v.reshape(*lead, -1) for v in values.values()], -1).numpy()


def ess_summary(model, x: np.ndarray, seconds: float) -> dict:
    """x [chain, draw, dim] unconstrained draws of lanes_models.LanesModel `model` in `seconds`:
    the smallest bulk ESS, ESS per second and, where the model has a posteriordb reference, the
    worst |mean - reference mean| / reference sd over its reported parameters."""
    from arviz_stats.base import array_stats

    reported = constrained_array(model.params, x)
    first = reported[:ESS_CHAINS]
    ess = np.asarray(array_stats.ess(first, chain_axis=0, draw_axis=1, method="bulk"))
    min_ess = float(ess.min()) * reported.shape[0] / first.shape[0]
    out = {"wall_s": seconds, "min_bulk_ess": min_ess, "ess_per_second": min_ess / seconds}
    library = model.library
    if library is not None and library.posteriordb is not None:
        from fused_hmc.validation.posteriordb import load_reference

        ref = load_reference(library.posteriordb)
        x64 = torch.from_numpy(np.array(x, dtype=np.float64))
        values = library.constrained_values(x64).numpy()
        means = values.reshape(-1, values.shape[-1]).mean(0)
        out["worst_mean_error_sd"] = float(np.max(np.abs(means - np.asarray(ref.mean))
                                                  / np.asarray(ref.sd)))
    return out
