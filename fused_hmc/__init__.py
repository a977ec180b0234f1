"""fused_hmc: Hamiltonian Monte Carlo for many parallel chains, one fused kernel per transition.

Importing never compiles; the C++/CUDA extension is built on first use.
"""
from ._build import CudaUnavailableError, ExtensionBuildError, load_extension
from .module import HMC, ModelNew
from .transition import hmc_step

__all__ = ["HMC", "ModelNew", "hmc_step", "load_extension", "ExtensionBuildError",
           "CudaUnavailableError"]
__version__ = "0.1.0"

from . import models, targets  # noqa: E402,F401 - fused_hmc.models is public
from .sampling import (  # noqa: E402
    SampleResult, Sampler, SamplesTooLargeError, StuckChainsWarning, load, sample)
from .targets import DenseGaussian, DiagonalGaussian, StandardGaussian  # noqa: E402

__all__ += ["sample", "Sampler", "SampleResult", "SamplesTooLargeError", "StuckChainsWarning",
            "load", "targets",
            "StandardGaussian", "DiagonalGaussian", "DenseGaussian"]

from .cpp_target import CppTarget  # noqa: E402
__all__ += ["CppTarget"]
from .torch_model import TorchModel  # noqa: E402
__all__ += ["TorchModel"]
