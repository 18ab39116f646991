"""The benchmark scripts import only what the package has: they run on the GPU machine, where CI never goes."""

import ast
import importlib
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPTS = sorted((ROOT / "bench").rglob("*.py"))


def _package_imports(path: pathlib.Path) -> list[tuple[int, str, str]]:
    """(line, module, name) of every ``from triton_conformance... import name`` in the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "triton_conformance":
            found += [(node.lineno, node.module, alias.name) for alias in node.names]
    return found


def _resolves(module: str, name: str) -> bool:
    if hasattr(importlib.import_module(module), name):
        return True
    try:
        importlib.import_module(f"{module}.{name}")
    except ModuleNotFoundError:
        return False
    return True


@pytest.mark.parametrize("script", SCRIPTS, ids=[str(p.relative_to(ROOT)) for p in SCRIPTS])
def test_a_bench_script_imports_only_names_the_package_has(script: pathlib.Path) -> None:
    missing = [f"line {line}: from {module} import {name}" for line, module, name in _package_imports(script)
               if not _resolves(module, name)]
    assert not missing, missing


def test_the_check_sees_a_name_the_package_lacks(tmp_path: pathlib.Path) -> None:
    script = tmp_path / "old.py"
    script.write_text("def main():\n    from triton_conformance import get_subject, registry\n")
    assert [n for _, m, n in _package_imports(script) if not _resolves(m, n)] == ["registry"]
