"""The package's layers: the import graph has no cycle, and no layer imports one above it.

Every import counts, at module level or inside a function: a function-level
import hides a cycle from Python, not from this test.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2] / "triton_conformance"

# Each layer may import itself and the layers listed; the package root, errors and options are shared leaves.
ALLOWED = {
    "model": {"model"},
    "strategies": {"strategies", "model"},
    "oracles": {"oracles", "model"},
    "reports": {"reports", "model"},
    "compat": {"compat", "model"},
    "conformance": {"conformance", "model", "strategies", "oracles", "compat"},
    "workers": {"workers", "conformance", "model", "strategies", "oracles", "compat"},
    "plugin": {"plugin", "workers", "conformance", "model", "strategies", "oracles", "reports", "compat"},
}
SHARED = {"errors", "options", "__init__"}


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: pathlib.Path) -> set[str]:
    """Every triton_conformance module ``path`` imports, wherever in the file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("triton_conformance"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("triton_conformance"):
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)  # `from pkg import submodule`
    return out


MODULES = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _graph() -> dict[str, set[str]]:
    return {name: {m for m in _imports(path) if m in MODULES and m != name} for name, path in MODULES.items()}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_the_import_graph_has_no_cycle() -> None:
    edges = _graph()
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for dep in sorted(edges[node]):
            if state.get(dep) == 1:
                cycle = path[path.index(dep):] + [dep]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep)
        path.pop()
        state[node] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module)


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _layer(m) in ALLOWED))
def test_no_layer_imports_one_above_it(module: str) -> None:
    layer = _layer(module)
    upward = sorted(d for d in _graph()[module] if _layer(d) not in ALLOWED[layer] | SHARED)
    assert not upward, f"{module} ({layer}) imports {upward}"


def test_the_checks_find_a_cycle_and_an_upward_import(tmp_path: pathlib.Path) -> None:
    # The parser sees function-level imports too (the kind that hid the old 8-module loop).
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from triton_conformance.reports.html import render_html\n")
    assert "triton_conformance.reports.html" in _imports(source)
    assert _layer("triton_conformance.reports.html") not in ALLOWED["model"]


def test_no_module_is_much_over_400_lines() -> None:
    long = {name: n for name, path in MODULES.items() if (n := len(path.read_text().splitlines())) > 450}
    assert not long, long
