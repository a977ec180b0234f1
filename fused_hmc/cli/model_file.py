"""``fused-hmc sample --model path/to/model.py[:NAME] [--data FILE.json]``: a TorchModel from a
user's Python file.

Running the file is what the user asked for here (a checkpoint or a saved result never runs
code). NAME is a module-level ``fused_hmc.TorchModel``, or a function that, given the data (a
dict: ``--data``'s, else empty), returns one or the ``(fn, params)`` pair TorchModel takes; with
no NAME, the file's only module-level TorchModel, or its only such function when it has no
TorchModel. The result is wrapped as the CLI's library models are (:class:`FileModel`), so that
the start, the first line and the summary in constrained parameters work alike.
"""
from __future__ import annotations

import importlib.util
import inspect
import re
import sys
from pathlib import Path

import torch

from .errors import CliError

_SPEC = re.compile(r"^(?P<path>.+\.py)(?::(?P<name>[A-Za-z_]\w*))?$")


def is_model_file(text: str | None) -> bool:
    """Whether a --model value names a Python file (path.py or path.py:NAME)."""
    return text is not None and _SPEC.match(text) is not None


class FileModel:
    """A TorchModel from a file, with what the CLI asks of a library Model."""

    posteriordb = None
    gradient_source = None

    def __init__(self, model, label: str):
        from ..sampling import constrained

        self.torch_model, self.name, self.dim = model, label, model.dim
        self.names = tuple(model.names)
        self.constrained_names = tuple(constrained.names(model.constrained_shapes))

    def target(self, gradient: bool = False):
        return self.torch_model

    def constrained_values(self, x: torch.Tensor) -> torch.Tensor:
        from ..sampling import constrained

        return constrained.flatten(self.torch_model.constrain(x), lead=x.ndim - 1)

    def initial_point(self, num_chains: int, *, dtype, device, generator):
        return self.torch_model.initial_point(num_chains, generator=generator, dtype=dtype,
                                              device=device)


def load(spec: str, data: dict | None) -> FileModel:
    """The TorchModel `spec` (path.py[:NAME]) names, built with `data` where NAME is a function."""
    from ..torch_model import TorchModel, TorchModelError

    match = _SPEC.match(spec)
    path, name = Path(match["path"]), match["name"]
    if not path.is_file():
        raise CliError("--model", f"no file {path}")
    namespace = _run(path)
    models = {k: v for k, v in namespace.items() if isinstance(v, TorchModel)}
    functions = {k: v for k, v in namespace.items() if inspect.isfunction(v)
                 and v.__module__ == namespace["__name__"] and not k.startswith("_")}
    if name is None:
        pool = models or functions
        if len(pool) != 1:
            kind = "TorchModels" if models else "functions"
            raise CliError("--model", f"{path} defines {len(pool)} {kind} "
                                      f"({', '.join(sorted(pool)) or 'none'}): name one, "
                                      f"--model {path}:NAME")
        name = next(iter(pool))
    if name not in namespace:
        raise CliError("--model", f"{path} defines no {name!r}; its TorchModels and functions: "
                                  f"{', '.join(sorted(models | functions)) or 'none'}")
    obj = namespace[name]
    if isinstance(obj, TorchModel):
        if data is not None:
            raise CliError("--data", f"{path}:{name} is a TorchModel built with its own data; "
                                     "--data goes with a function of the data")
        return FileModel(obj, f"{path.name}:{name}")
    if not callable(obj):
        raise CliError("--model", f"{path}:{name} is a {type(obj).__name__}, not a TorchModel "
                                  "or a function of the data returning one")
    data = {} if data is None else data
    try:
        made = obj(data)
        if isinstance(made, tuple) and len(made) == 2:
            made = TorchModel(made[0], made[1], data=data)
    except (TorchModelError, ValueError, TypeError, KeyError) as exc:
        raise CliError("--model", f"{path}:{name}: {type(exc).__name__}: {exc}") from None
    if not isinstance(made, TorchModel):
        raise CliError("--model", f"{path}:{name}(data) returned a {type(made).__name__}; it must "
                                  "return a fused_hmc.TorchModel or the (fn, params) pair")
    return FileModel(made, f"{path.name}:{name}")


def _run(path: Path) -> dict:
    """The file's module-level names after running it (as ``python path`` would import it)."""
    module_name = f"fused_hmc_user_model_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except CliError:
        raise
    except Exception as exc:  # the user's code failed: say where, not a raw traceback
        raise CliError("--model", f"running {path} raised {type(exc).__name__}: {exc}") from None
    return vars(module)
