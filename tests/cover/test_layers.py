"""The package's layers: the import graph has no cycle, and no layer imports one above it.

Every import counts, at module level or inside a function: a function-level
import hides a cycle from Python, not from this test.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2] / "triton_conformance"

# Each layer may import itself and the layers listed; the package root, errors, options and version are
# shared leaves.
ALLOWED = {
    "model": {"model"},
    "strategies": {"strategies", "model"},
    "oracles": {"oracles", "model"},
    "reports": {"reports", "model"},
    "history": {"history", "model", "oracles"},  # oracles: the binomial tail that judges a flake count
    "compat": {"compat", "model"},
    "conformance": {"conformance", "model", "strategies", "oracles", "compat"},
    "workers": {"workers", "conformance", "model", "strategies", "oracles", "compat"},
    "plugin": {"plugin", "workers", "conformance", "model", "strategies", "oracles", "reports", "compat",
               "history"},
}
SHARED = {"errors", "options", "version", "__init__"}


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


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """An import cycle of ``edges`` (its modules, the first repeated at the end), or None."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for dep in sorted(edges.get(node, ())):
            if state.get(dep) == 1:
                return path[path.index(dep):] + [dep]
            if dep not in state and (found := visit(dep)):
                return found
        path.pop()
        state[node] = 2
        return None

    for module in sorted(edges):
        if module not in state and (found := visit(module)):
            return found
    return None


def _upward(module: str, deps: set[str]) -> list[str]:
    """The modules of ``deps`` in a layer above ``module``'s."""
    return sorted(d for d in deps if _layer(d) not in ALLOWED[_layer(module)] | SHARED)


def test_the_import_graph_has_no_cycle() -> None:
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _layer(m) in ALLOWED))
def test_no_layer_imports_one_above_it(module: str) -> None:
    upward = _upward(module, _graph()[module])
    assert not upward, f"{module} ({_layer(module)}) imports {upward}"


def test_the_checks_find_a_cycle_and_an_upward_import(tmp_path: pathlib.Path) -> None:
    # The parser sees function-level imports too (the kind that hid the old 8-module loop).
    sources = {"triton_conformance.model.a": "def f():\n    from triton_conformance.model.b import g\n",
               "triton_conformance.model.b": "from triton_conformance.model import c\n",
               "triton_conformance.model.c": "def h():\n    import triton_conformance.model.a\n",
               "triton_conformance.model.d": "from triton_conformance.model.c import h\n"}
    edges = {}
    for name, text in sources.items():
        (tmp_path / f"{name}.py").write_text(text)
        edges[name] = {m for m in _imports(tmp_path / f"{name}.py") if m in sources and m != name}
    assert _cycle(edges) == ["triton_conformance.model.a", "triton_conformance.model.b",
                             "triton_conformance.model.c", "triton_conformance.model.a"]
    edges["triton_conformance.model.c"].clear()  # the loop broken: d -> c is no cycle
    assert _cycle(edges) is None
    upward = tmp_path / "m.py"
    upward.write_text("def f():\n    from triton_conformance.reports.html import render_html\n")
    assert "triton_conformance.reports.html" in _upward("triton_conformance.model.m", _imports(upward))
    assert _upward("triton_conformance.plugin.m", _imports(upward)) == []


# A module past this many lines is split by topic.
MODULE_LINES = 400


def test_no_module_is_over_400_lines() -> None:
    long = {name: n for name, path in MODULES.items() if (n := len(path.read_text().splitlines())) > MODULE_LINES}
    assert not long, f"over {MODULE_LINES} lines, split by topic: {long}"


def _calls_of(path: pathlib.Path, name: str) -> list[int]:
    """The lines of ``path`` that call ``name(...)`` directly."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [n.lineno for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name]


def test_a_result_is_built_by_its_one_constructor() -> None:
    # CellResult.of names a result's subject, family and known bug one way; nothing else builds one by hand.
    by_hand = {name: lines for name, path in MODULES.items()
               if name != "triton_conformance.model.outcomes" and (lines := _calls_of(path, "CellResult"))}
    assert not by_hand, by_hand


def test_the_constructor_check_sees_a_result_built_by_hand(tmp_path: pathlib.Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f(s):\n    return CellResult(subject=s, family=s, cell='c', outcome='crash')\n")
    assert _calls_of(module, "CellResult") == [2]
