"""The target read from a file (a checkpoint, a saved result) is data, never code that runs.

A CppTarget is C++ source, and compiling it runs code (a static constructor runs as the library
loads). So a CppTarget read back from a file is a :class:`StoredCppTarget`: its source, dim, data,
names, gradient flag and lanes, which compile nothing. A Sampler refuses it. To continue a
checkpointed run, pass the target again (``Sampler.from_checkpoint(path, target=...)``: checked to
be the one the checkpoint ran), or opt in with ``trust_source=True``; :meth:`to_cpp_target`
compiles a stored source on request. The Gaussian targets are numbers only and come back as they
were saved.
"""
from __future__ import annotations

import dataclasses

import torch


class UntrustedSourceError(ValueError):
    """A C++ source read from a file was about to be compiled without the caller's say-so."""


class TargetMismatchError(ValueError):
    """The target given again is not the one the file holds."""


@dataclasses.dataclass(frozen=True, eq=False)
class StoredCppTarget:
    """A CppTarget as a file holds it: inert data (compiles and runs nothing).

    ``to_cpp_target()`` makes the CppTarget of this source: compiling it (on first use) runs the
    stored C++ in this process, so call it only for a file you trust.
    """

    source: str
    dim: int
    data: dict
    names: list[str] | None
    has_gradient: bool
    lanes: int

    def to_cpp_target(self):
        """The CppTarget of the stored source (compiled on first use: only for trusted files)."""
        from ..cpp_target import CppTarget

        return CppTarget(self.source, self.dim, data=self.data or None, names=self.names,
                         gradient=self.has_gradient, lanes=self.lanes)

    def difference(self, target) -> str | None:
        """What makes `target` (a CppTarget) sample another density than this one, or None."""
        from ..cpp_target import CppTarget

        if not isinstance(target, CppTarget):
            return f"it is a {type(target).__name__}, the file's target a CppTarget"
        for name, mine, theirs in (("dim", self.dim, target.dim),
                                   ("gradient", self.has_gradient, target.has_gradient),
                                   ("lanes", self.lanes, target.lanes)):
            if mine != theirs:
                return f"its {name} is {theirs!r}, the file's {mine!r}"
        if self.source != target.source:
            return "its source differs from the file's"
        if self.data.keys() != target.data.keys():
            return f"its data names {sorted(target.data)}, the file's {sorted(self.data)}"
        for name, value in self.data.items():
            other = target.data[name]
            same = (isinstance(other, torch.Tensor) and other.dtype == value.dtype
                    and torch.equal(other.cpu(), value)) if isinstance(value, torch.Tensor) \
                else (not isinstance(other, torch.Tensor) and other == value)
            if not same:
                return f"its data[{name!r}] differs from the file's"
        return None


def refusal(what: str) -> str:
    """How to give a sampler the target that `what` holds as source."""
    return (f"{what} holds a CppTarget as C++ source, which fused_hmc does not compile from a "
            "file (files are data; compiling runs the code). Pass the target again "
            "(Sampler.from_checkpoint(path, target=CppTarget(...)); the CLI: --target FILE.cpp or "
            "--model NAME beside --resume), or, for a file you trust, "
            "Sampler.from_checkpoint(path, trust_source=True) or stored.to_cpp_target()")


def resupplied(stored, target, trust_source: bool, path):
    """The target a sampler resumed from the checkpoint at `path` runs: `target` when given (it
    must be the stored one), the stored Gaussian, or the stored source when `trust_source`."""
    if not isinstance(trust_source, bool):
        raise TypeError(f"trust_source must be True or False, got {trust_source!r}")
    if target is not None:
        difference = (stored.difference(target) if isinstance(stored, StoredCppTarget)
                      else None if target == stored
                      else f"it is {target!r}, the checkpoint's {stored!r}")
        if difference is not None:
            raise TargetMismatchError(f"target is not the target the checkpoint {path} ran: "
                             f"{difference}")
        return target
    if isinstance(stored, StoredCppTarget):
        if not trust_source:
            raise UntrustedSourceError(refusal(f"the checkpoint {path}"))
        return stored.to_cpp_target()
    return stored
