"""The package's layering, read from its source (an AST walk over fused_hmc/*.py and the
subpackages but torch_model/):

- no module reads another fused_hmc module's private attribute (``_build._state``): a module's
  private names are its own; what another module needs is made public;
- no ``from .x import _y`` of a private name from another module (private modules such as
  ``_build`` and ``_limits`` are imported as modules, or their public names from them);
- the op layer (ops.py, _build.py, _limits.py, transition.py, targets.py) imports neither the
  sampling driver nor the CLI, so the ops load and run without them.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import fused_hmc

PACKAGE = Path(fused_hmc.__file__).parent
# The top level and the subpackages (torch_model/ apart: two private names cross its border).
MODULES = sorted(p for p in PACKAGE.glob("*.py")) + sorted(
    p for sub in ("cli", "sampling", "validation", "models") for p in (PACKAGE / sub).glob("*.py"))
OP_LAYER = {"ops", "_build", "_limits", "transition", "targets"}
ABOVE_THE_OPS = {"sampling", "cli"}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _imports(tree: ast.Module, path: Path):
    """(local alias, absolute dotted module, imported name or None) for each fused_hmc import."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "fused_hmc" or a.name.startswith("fused_hmc."):
                    yield (a.asname or a.name.split(".")[0]), a.name, None, node
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ["fused_hmc"] + list(path.relative_to(PACKAGE).parent.parts)
                base = base[:len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            elif node.module and (node.module == "fused_hmc"
                                  or node.module.startswith("fused_hmc.")):
                module = node.module
            else:
                continue
            for a in node.names:
                yield (a.asname or a.name), module, a.name, node


def _is_module(dotted: str) -> bool:
    rel = Path(*dotted.split(".")[1:])
    return (PACKAGE / rel).with_suffix(".py").is_file() or (PACKAGE / rel / "__init__.py").is_file()


def _violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    own = path.stem
    found, module_aliases = [], {}
    for alias, module, name, node in _imports(tree, path):
        where = f"{path.name}:{node.lineno}"
        target = module if name is None else f"{module}.{name}"
        if name is not None and _is_module(target):
            module_aliases[alias] = target  # from . import _build: the module itself
        elif name is None:
            module_aliases[alias] = module
        elif _private(name) and module.split(".")[-1] != own:
            found.append(f"{where}: from {module} import {name} (a private name of another "
                         "module)")
        if own in OP_LAYER:
            parts = target.split(".")
            if len(parts) > 1 and parts[1] in ABOVE_THE_OPS:
                found.append(f"{where}: the op layer imports {target}")
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in module_aliases and _private(node.attr)):
            found.append(f"{path.name}:{node.lineno}: {node.value.id}.{node.attr} (a private "
                         f"attribute of {module_aliases[node.value.id]})")
    return found


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(PACKAGE)) for p in MODULES])
def test_module_respects_the_layering(path):
    assert _violations(path) == []


def test_the_rules_catch_what_they_forbid(tmp_path, monkeypatch):
    """Each rule fails on a module that breaks it (so the walk above cannot pass vacuously)."""
    bad = {
        "ops.py": "from . import _build\nfrom .sampling import driver\nx = _build._state\n",
        "cli.py": "from ._build import _state\nfrom . import _limits\ny = _limits.LIMITS\n",
    }
    for name, source in bad.items():
        (tmp_path / name).write_text(source)
    (tmp_path / "_build.py").write_text("")
    (tmp_path / "_limits.py").write_text("")
    (tmp_path / "sampling").mkdir()
    (tmp_path / "sampling" / "__init__.py").write_text("")
    (tmp_path / "sampling" / "driver.py").write_text("")
    monkeypatch.setitem(globals(), "PACKAGE", tmp_path)
    ops = _violations(tmp_path / "ops.py")
    assert any("the op layer imports fused_hmc.sampling.driver" in v for v in ops), ops
    assert any("_build._state" in v for v in ops), ops
    cli = _violations(tmp_path / "cli.py")
    assert cli == [cli[0]] and "from fused_hmc._build import _state" in cli[0], cli
