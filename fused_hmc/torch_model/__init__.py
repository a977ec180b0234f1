"""Models written in PyTorch: parameter declarations and the TorchModel compiler."""
from .parameters import Parameters
from .model import TorchModel, TorchModelError

__all__ = ["Parameters", "TorchModel", "TorchModelError"]
