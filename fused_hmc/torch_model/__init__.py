"""Models written in PyTorch: parameter declarations (and, beside them, the TorchModel compiler)."""
from .parameters import Parameters

__all__ = ["Parameters"]
