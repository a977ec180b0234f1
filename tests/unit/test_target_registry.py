"""The built-in targets register themselves (fused_hmc.targets.BUILT_IN), and everything that lists
them takes the list from there: a new built-in target is its C++ header and one class.

The test defines such a class (its op target unknown to the kernel, so nothing samples it here)
and finds it in the CLI's --target choices, help, first line and start, the sampler's target
check, and a saved result's target."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest
import torch
import zarr

from fused_hmc import targets
from fused_hmc.cli import CliError, build_parser, gaussian, report
from fused_hmc.sampling import arguments, saving


def test_the_built_in_targets_are_registered_in_order():
    assert targets.BUILT_IN == {"standard": targets.StandardGaussian,
                                "diagonal": targets.DiagonalGaussian,
                                "dense": targets.DenseGaussian}
    assert targets.kinds() == "StandardGaussian, DiagonalGaussian or DenseGaussian"


@pytest.fixture
def new_target(monkeypatch):
    """A built-in target defined here, registered for the test only."""
    monkeypatch.setattr(targets, "BUILT_IN", dict(targets.BUILT_IN))

    @dataclass(frozen=True, eq=False)
    class ShiftedScale(targets.BuiltInTarget):
        """N(mu, s^2 I) with one scale s for every coordinate."""

        mu: torch.Tensor
        s: torch.Tensor
        op_target: ClassVar[str] = "shifted_scale"
        flag_help: ClassVar[str] = "N(mean, s^2 I)"
        flags: ClassVar[tuple[str, ...]] = ("scale",)
        max_dim: ClassVar[int | None] = 8

        @classmethod
        def from_flags(cls, mu, scale, correlation):
            return cls(mu, scale[:1].clone())

        def describe(self) -> str:
            return f"N({float(self.mu[0]):g}, {float(self.s[0]):g}^2 I)"

        @property
        def covariance(self) -> torch.Tensor:
            return torch.eye(self.dim, dtype=torch.float64) * self.s[0] ** 2

    return ShiftedScale


def _args(*argv):
    args = build_parser().parse_args(["sample", *argv])
    args.dim, args.mean, args.dtype, args.library_model = args.dim or 4, args.mean or 0.0, \
        args.dtype or "float64", None
    return args


def test_a_new_built_in_target_is_one_class(new_target):
    assert targets.BUILT_IN["shifted_scale"] is new_target
    # the CLI: --target NAME, its help, its flags and dim limit, the first line, the start
    help_text = build_parser()._subparsers._group_actions[0].choices["sample"].format_help()
    assert "shifted_scale: N(mean, s^2 I)" in " ".join(help_text.split())
    args = _args("--target", "shifted_scale", "--scale", "3", "--mean", "1")
    target = gaussian.target_of(args)
    assert isinstance(target, new_target) and float(target.s[0]) == 3.0
    assert report.describe(args, target) == "N(1, 3^2 I)"
    draws = target.draw(20_000, torch.float64, "cpu", torch.Generator().manual_seed(0))
    assert abs(float(draws.std()) - 3) < 0.05 and abs(float(draws.mean()) - 1) < 0.05
    with pytest.raises(CliError, match="--correlation.*needs --target dense"):
        gaussian.target_of(_args("--target", "shifted_scale", "--correlation", "0.5"))
    with pytest.raises(CliError, match="--dim.*--target shifted_scale supports dim <= 8"):
        gaussian.target_of(_args("--target", "shifted_scale", "--dim", "9"))
    with pytest.raises(CliError, match="--scale.*needs --target diagonal or dense or "
                                        "shifted_scale"):
        gaussian.target_of(_args("--target", "standard", "--scale", "2"))
    # the sampler's check accepts it, and its message lists it
    assert arguments.check_target(target, None, torch.zeros(2, 4)) is target
    with pytest.raises(TypeError, match="DenseGaussian or ShiftedScale, or a fused_hmc.CppTarget"):
        arguments.check_target(object(), None, torch.zeros(2, 4))


def test_a_new_built_in_target_is_saved_and_read_back(new_target, tmp_path):
    target = new_target(torch.arange(3.0), torch.tensor([2.0]))
    group = zarr.open_group(tmp_path / "t.zarr", mode="w")
    saving.write_target(group, target)
    back = saving.read_target(zarr.open_group(tmp_path / "t.zarr", mode="r"))
    assert type(back) is new_target and back == target
