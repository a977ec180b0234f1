"""No import cycle anywhere in fused_hmc: the graph of its modules' imports (grimp reads every
import statement, module-level and inside functions alike) has no path back from an imported
module to its importer.

Function-level imports count: one that closes a cycle only defers it to run time, and the two
modules still cannot be understood, tested or moved apart; the cycles this test replaced were of
that kind (cli <-> cli_models, result <-> saving, _build <-> build_cache).
"""
from __future__ import annotations

import textwrap

import grimp
import pytest

# Cycles in code another piece of work owns, named here until it breaks them (the test fails when
# one is gone, so that its entry goes too): torch_model's ops build code with codegen's classes
# (imports inside functions), while codegen imports ops and rows, and rows imports ops.
KNOWN = {frozenset({"fused_hmc.torch_model.codegen", "fused_hmc.torch_model.ops",
                    "fused_hmc.torch_model.rows"})}


@pytest.fixture(scope="module")
def graph():
    return grimp.build_graph("fused_hmc", cache_dir=None)


def cycles(graph) -> dict[frozenset, str]:
    """Every import A -> B that a chain B -> ... -> A closes, as {its modules: "A -> B -> ... -> A
    (A line n)"}, one entry per set of modules."""
    found = {}
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back is None:
                continue
            loop = (importer,) + tuple(back)
            line = graph.get_import_details(importer=importer, imported=imported)[0]
            found.setdefault(frozenset(loop), " -> ".join(loop)
                             + f" ({importer} line {line['line_number']})")
    return found


def test_the_package_has_no_import_cycle(graph):
    found = cycles(graph)
    new = [path for modules, path in found.items()
           if not any(modules <= known for known in KNOWN)]
    assert new == [], "import cycles:\n" + "\n".join(new)
    gone = [sorted(known) for known in KNOWN if not any(modules <= known for modules in found)]
    assert gone == [], f"no longer cycles: remove them from KNOWN: {gone}"


def test_a_cycle_through_a_function_level_import_is_found(tmp_path, monkeypatch):
    """The check fails on a package whose cycle closes inside a function (and not on one
    without)."""
    root = tmp_path / "cyclic"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "a.py").write_text("from . import b\n")
    (root / "b.py").write_text(textwrap.dedent("""\
        def later():
            from .a import b
            return b
    """))
    (root / "c.py").write_text("from . import b\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = cycles(grimp.build_graph("cyclic", cache_dir=None))
    assert list(found) == [frozenset({"cyclic.a", "cyclic.b"})], found
    (root / "b.py").write_text("def later():\n    return None\n")
    assert cycles(grimp.build_graph("cyclic", cache_dir=None)) == {}


@pytest.mark.parametrize("module", ["fused_hmc.cli", "fused_hmc.sampling"])
def test_the_packages_modules_are_in_the_graph(graph, module):
    """The graph sees the subpackages' modules (so the check above is not vacuous)."""
    assert len(graph.find_children(module)) > 5


# fused_hmc/cli/'s modules in the order its docstring (and docs/ARCHITECTURE.md) lists them.
CLI_ORDER = ["errors", "data_file", "model_file", "flag_types", "user_targets", "gaussian",
             "diagnosed_draws", "report", "named_summary", "resume", "ranks", "sample", "bench",
             "validate", "parser", "entry"]


def test_each_cli_module_imports_only_those_listed_before_it(graph):
    assert {m.rsplit(".", 1)[1] for m in graph.find_children("fused_hmc.cli")} == set(CLI_ORDER)
    for i, name in enumerate(CLI_ORDER):
        imported = {m.rsplit(".", 1)[1]
                    for m in graph.find_modules_directly_imported_by(f"fused_hmc.cli.{name}")
                    if m.startswith("fused_hmc.cli.")}
        assert imported <= set(CLI_ORDER[:i]), (name, imported - set(CLI_ORDER[:i]))
