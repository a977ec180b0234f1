"""Checkpoints and saved results are data: the C++ source of a CppTarget read from one is never
compiled (so never run) unless the caller gives the target again or opts in with
trust_source=True. Nothing here compiles: cpp_build.load, the one way a source is compiled, is
replaced by a function that records the source and stops there."""
from __future__ import annotations

import pytest
import torch

import fused_hmc
from fused_hmc import CppTarget, cpp_build
from fused_hmc.sampling.checkpoint import Checkpointer
from fused_hmc.sampling.stored_target import StoredCppTarget, UntrustedSourceError

from .test_sampler import _q0, _run, assert_results_equal

# What the outside review planted: a static constructor runs when the library loads.
EVIL = r"""
#include <cstdlib>
static const int planted = std::system("touch /tmp/fused_hmc_planted");
template <typename T, typename Data>
FUSED_HMC_HD T log_density(const T* x, const Data& data) { return -0.5 * x[0] * x[0]; }
"""
HONEST = EVIL.replace('std::system("touch /tmp/fused_hmc_planted")', "0")


class Compiled(Exception):
    pass


@pytest.fixture
def compiles(monkeypatch):
    """The sources cpp_build.load was asked to compile (each ends the call with Compiled)."""
    sources = []

    def load(spec):
        sources.append(spec.source)
        raise Compiled(spec.source)

    monkeypatch.setattr(cpp_build, "load", load)
    return sources


def _checkpoint_holding(tmp_path, target) -> object:
    """A finished checkpoint whose target is `target` (written without compiling it)."""
    ck = tmp_path / "run.ckpt"
    sampler = fused_hmc.Sampler(_q0("cpu"), seed=1, progress=False, keep_samples=False)
    sampler.run(4)
    state = sampler._checkpoint_state()
    state["arguments"] = dict(state["arguments"], target=target)
    Checkpointer(ck, 0.0).write(state)
    return ck


def test_a_checkpoints_source_is_not_compiled_unasked(tmp_path, compiles):
    ck = _checkpoint_holding(tmp_path, CppTarget(EVIL, 5))
    with pytest.raises(UntrustedSourceError, match=f"the checkpoint {ck} holds a CppTarget as C"
                                                   r"\+\+ source.*target=.*--resume"):
        fused_hmc.Sampler.from_checkpoint(ck)
    with pytest.raises(ValueError, match="not the target the checkpoint .* source differs"):
        fused_hmc.Sampler.from_checkpoint(ck, target=CppTarget(HONEST, 5))
    with pytest.raises(ValueError, match="its dim is 4, the file's 5"):
        fused_hmc.Sampler.from_checkpoint(ck, target=CppTarget(EVIL, 4))
    with pytest.raises(TypeError, match="trust_source must be True or False"):
        fused_hmc.Sampler.from_checkpoint(ck, trust_source="yes")
    assert compiles == []
    # The caller's own target, or the caller's explicit trust: then (and only then) it compiles.
    with pytest.raises(Compiled):
        fused_hmc.Sampler.from_checkpoint(ck, target=CppTarget(EVIL, 5))
    with pytest.raises(Compiled):
        fused_hmc.Sampler.from_checkpoint(ck, trust_source=True)
    assert compiles == [EVIL, EVIL]


def test_a_gaussian_checkpoint_takes_its_own_target_again(tmp_path):
    target = fused_hmc.DiagonalGaussian(torch.zeros(5), torch.logspace(-1, 0, 5))
    ck = tmp_path / "run.ckpt"
    whole = _run(_q0("cpu"), 8, target=target)
    _run(_q0("cpu"), 8, target=target, checkpoint=ck)
    assert_results_equal(fused_hmc.Sampler.from_checkpoint(ck, target=target).run(), whole)
    other = fused_hmc.DiagonalGaussian(torch.zeros(5), torch.ones(5))
    with pytest.raises(ValueError, match="not the target the checkpoint"):
        fused_hmc.Sampler.from_checkpoint(ck, target=other)


def test_a_loaded_results_target_is_inert_data(tmp_path, compiles):
    data = {"y": torch.arange(3.0), "n": 3, "scale": 0.5}
    target = CppTarget(EVIL, 5, data=data, names=list("abcde"))
    res = _run(_q0("cpu"), 6)._replace(target=target)
    res.save(tmp_path / "res")
    back = fused_hmc.load(tmp_path / "res")
    assert isinstance(back.target, StoredCppTarget)
    assert (back.target.source, back.target.dim, back.target.names) == (EVIL, 5, list("abcde"))
    assert back.target.difference(target) is None
    assert back.parameter_names == list("abcde")
    with pytest.raises(UntrustedSourceError, match="target: this StoredCppTarget .* as C"):
        fused_hmc.Sampler(_q0("cpu"), target=back.target)
    back.save(tmp_path / "again")  # saved again as it was read, still without compiling
    assert fused_hmc.load(tmp_path / "again").target.difference(target) is None
    assert compiles == []
    trusted = back.target.to_cpp_target()  # the explicit call: a CppTarget, compiled on first use
    assert isinstance(trusted, CppTarget) and trusted.source == EVIL and compiles == []


def test_the_cli_resumes_a_cpp_checkpoint_only_with_the_target_given_again(tmp_path, compiles,
                                                                            capsys):
    from fused_hmc import cli

    ck = _checkpoint_holding(tmp_path, CppTarget(EVIL, 5))
    (tmp_path / "model.cpp").write_text(EVIL)
    (tmp_path / "other.cpp").write_text(HONEST)
    assert cli.main(["sample", "--resume", str(ck)]) == 2
    assert "argument --resume: " in capsys.readouterr().err
    assert cli.main(["sample", "--resume", str(ck), "--target", str(tmp_path / "other.cpp"),
                     "--dim", "5"]) == 2
    assert "argument --target: target is not the target" in capsys.readouterr().err
    assert compiles == []
    with pytest.raises(Compiled):
        cli.main(["sample", "--resume", str(ck), "--target", str(tmp_path / "model.cpp"),
                  "--dim", "5"])
    assert compiles == [EVIL]
