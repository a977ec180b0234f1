"""Long chains: the ``Sampler`` driver, ``sample``, ``SampleResult`` and ``load``."""
from .driver import Sampler, sample
from .resources import SamplesTooLargeError
from .result import SampleResult
from .loading import load
from .stuck_chains import StuckChainsWarning

__all__ = ["Sampler", "SampleResult", "SamplesTooLargeError", "StuckChainsWarning", "load",
           "sample"]
