"""Long chains: the ``Sampler`` driver, ``sample``, and ``SampleResult``."""
from .driver import Sampler, sample
from .resources import SamplesTooLargeError
from .result import SampleResult

__all__ = ["Sampler", "SampleResult", "SamplesTooLargeError", "sample"]
