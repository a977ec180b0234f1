"""A CppTarget's dim against the coordinates its source reads (issue 30, item 9): reading beyond
dim is an error, coordinates the density ignores a warning (an error in the CLI, naming --dim)."""
from __future__ import annotations

import warnings

import pytest
import torch

from fused_hmc import cli, dim_check
from fused_hmc.sampling.arguments import check_target_dim

READS = 10  # the coordinates the sources below read, whatever dim they are given


class ReadsTen:
    """N(0, I) in x[0 .. 10), read from x's storage as compiled C++ reads it: x[k] for k >= dim
    lies past the point's row (a stand-in for a CppTarget, so no compile is needed)."""

    def __init__(self, dim: int):
        self.dim = dim

    def log_density_and_gradient(self, x: torch.Tensor):
        n, dim = x.shape
        rows = torch.as_strided(x, (n, READS), (dim, 1), x.storage_offset())
        grad = torch.zeros_like(x)
        grad[:, :min(dim, READS)] = -rows[:, :min(dim, READS)]
        return -0.5 * (rows ** 2).sum(1), grad

    def log_density(self, x: torch.Tensor) -> torch.Tensor:
        return self.log_density_and_gradient(x)[0]

    def validate_start(self, q0):
        return self.log_density_and_gradient(q0)


def _starts(dim: int, n: int = 64) -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    return 4 * torch.rand(n, dim, dtype=torch.float64, generator=generator) - 2


@pytest.mark.parametrize("dim, beyond", [(5, True), (9, True), (10, False), (12, False)])
def test_reading_beyond_dim_is_found(dim, beyond):
    assert dim_check.reads_beyond_dim(ReadsTen(dim), _starts(dim)) is beyond


@pytest.mark.parametrize("dim, unused", [(10, []), (12, [10, 11]), (20, list(range(10, 20)))])
def test_coordinates_the_density_ignores_are_found(dim, unused):
    _, grad = ReadsTen(dim).log_density_and_gradient(_starts(dim))
    assert dim_check.unused_coordinates(grad) == unused


def test_one_point_cannot_tell_an_unused_coordinate():
    assert dim_check.unused_coordinates(torch.zeros(1, 3)) == []


def test_the_sampler_refuses_a_dim_below_the_source_and_warns_above_it():
    with pytest.raises(ValueError, match=r"^target.dim = 5 is less than the coordinates the "
                                         r"target's source reads.*reads x\[k\] for some k >= 5"):
        check_target_dim(ReadsTen(5), _starts(5))
    with pytest.warns(dim_check.UnusedCoordinatesWarning,
                      match=r"does not depend on x\[10\], x\[11\] \(its gradient is 0 in them at "
                            r"all 80 points tried\): is target.dim = 12 more"):
        check_target_dim(ReadsTen(12), _starts(12))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_target_dim(ReadsTen(10), _starts(10))
        # every chain started at the mode, where every derivative is 0: the random points show
        # that each coordinate is used
        check_target_dim(ReadsTen(10), torch.zeros(64, 10, dtype=torch.float64))


SOURCE = """// N(0, I) in 10 parameters, whatever --dim says.
template <typename T, typename Data>
FUSED_HMC_HD T log_density(const T* x, const Data& data) {
  T s = T(0);
  for (int k = 0; k < 10; ++k) s += x[k] * x[k];
  return -0.5 * s;
}
"""


@pytest.mark.slow
@pytest.mark.parametrize("dim, said", [
    (5, "argument --dim: --dim = 5 is less than the coordinates the target's source reads"),
    (12, "argument --dim: the target's log density does not depend on x[10], x[11]"),
])
def test_the_cli_names_dim_when_it_does_not_match_a_cpp_file(tmp_path, capsys, dim, said):
    """The issue's reproductions (each compiles the source once for its dim)."""
    source = tmp_path / "ten.cpp"
    source.write_text(SOURCE)
    status = cli.main(["sample", "--target", str(source), "--dim", str(dim), "--chains", "8",
                       "--samples", "4", "--warmup", "4", "--no-progress"])
    err = capsys.readouterr().err
    assert status == 2 and said in err, err
