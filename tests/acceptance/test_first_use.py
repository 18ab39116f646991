"""First use without surprises (issue 14): what a new user meets before any cell runs.

Each test runs the plugin in a fresh pytest process, as a user would.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import textwrap

import pytest

TOY = '''
import torch
from triton_conformance import Dim, Tensor, subject

@subject(inputs={"x": Tensor(("N",), dtypes=("float32",), layouts="any")},
         dims={"N": Dim(1, 16)}, oracle=lambda x: x * 2, family="toy")
def {name}(x):
    if x.dtype != torch.float32:
        raise TypeError(f"{name}: x.dtype={x.dtype}, expected float32")
    if not 1 <= x.shape[0] <= 16:
        raise ValueError(f"{name}: x.shape={tuple(x.shape)}, expected (N,) with 1 <= N <= 16")
    return x * 2
'''


def toy(name: str) -> str:
    return textwrap.dedent(TOY).replace("{name}", name)


def _results(pytester: pytest.Pytester, path: str = "conformance-results/results.json") -> dict:
    return json.loads((pytester.path / path).read_text())


# -- 1. pytest-xdist is optional ------------------------------------------


def test_plain_pytest_runs_without_xdist(pytester: pytest.Pytester) -> None:
    """Installed without pytest-xdist, the plugin must not break an unrelated test run."""
    pytester.makepyfile(test_unrelated="def test_one():\n    assert 1 + 1 == 2\n")
    result = pytester.runpytest_subprocess("-p", "no:xdist")
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=1)


def test_the_battery_runs_without_xdist(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(toy_subjects=toy("doubled"))
    pytester.makeini("[pytest]\nconformance_modules = toy_subjects\n")
    result = pytester.runpytest_subprocess("-p", "no:xdist", "--conformance-only", "-k", "layout and contiguous")
    result.assert_outcomes(passed=1)


def test_every_xdist_hook_is_optional() -> None:
    """A hook that only pytest-xdist specifies must be marked ``optionalhook=True``."""
    import triton_conformance.plugin as entry
    from triton_conformance.plugin import session

    for owner in (entry, session.ConformanceSession):
        for name, fn in inspect.getmembers(owner, callable):
            if name.startswith("pytest_xdist_") or name in ("pytest_configure_node", "pytest_testnodedown",
                                                            "pytest_handlecrashitem"):
                opts = getattr(fn, "pytest_impl", {})
                assert opts.get("optionalhook"), f"{owner.__name__}.{name} needs @pytest.hookimpl(optionalhook=True)"


# -- 2. the rootdir is importable -------------------------------------------


def _checkout_only_env() -> dict[str, str]:
    """The environment, with PYTHONPATH cut down to the checkout of triton_conformance under test (if any)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("PYTEST_XDIST")}
    keep = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
            if p and os.path.isdir(os.path.join(p, "triton_conformance"))]
    if keep:
        env["PYTHONPATH"] = os.pathsep.join(keep)
    return env


def test_subject_modules_import_from_the_rootdir_without_pythonpath(pytester: pytest.Pytester) -> None:
    """``pytest`` (the script, unlike ``python -m pytest``) does not put the current directory on sys.path;
    ``-P`` does the same for ``python -m``, and running from a subfolder keeps the rootdir off it too.
    (Not pytester.run: it puts the current directory on PYTHONPATH.)"""
    pytester.mkpydir("mykernels")
    (pytester.path / "mykernels" / "add.py").write_text(toy("rooted"))
    pytester.makeini("[pytest]\nconformance_modules = mykernels.add\n")
    elsewhere = pytester.mkdir("elsewhere")
    proc = subprocess.run([sys.executable, "-P", "-m", "pytest", "--conformance-only", "-k", "layout and contiguous",
                           "-p", "no:randomly", "-p", "no:cacheprovider"], cwd=elsewhere, env=_checkout_only_env(),
                          capture_output=True, text=True, timeout=300)
    assert "cannot import" not in proc.stdout + proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stdout[-3000:]
    # The cell ran in a worker process, which got the rootdir on its sys.path too.
    doc = _results(pytester, "elsewhere/conformance-results/results.json")
    assert [r["outcome"] for r in doc["results"]] == ["honoured"]


def test_a_module_that_does_not_exist_is_one_line_naming_it_and_where_it_looked(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nconformance_modules = mykernels.nope\n")
    result = pytester.runpytest_subprocess("--conformance-only")
    result.stderr.fnmatch_lines([f"ERROR: conformance_modules: cannot import 'mykernels.nope': No module named "
                                 f"'mykernels' (looked on sys.path, which includes the rootdir '{pytester.path}')*"])
    assert "Traceback" not in result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR


# -- 3. a module that fails to import is a crash cell; the run goes on ------------

BROKEN = {
    "broken_name": "x = 1\nprint(undefined_name)\n",
    "broken_syntax": "def launcher(:\n    pass\n",
    "broken_dep": "import not_a_real_package_xyz\n",
}
ERRORS = {
    "broken_name": "NameError: name 'undefined_name' is not defined (broken_name.py:2)",
    "broken_syntax": "SyntaxError: * (broken_syntax.py:1)",
    "broken_dep": "ModuleNotFoundError: No module named 'not_a_real_package_xyz' (broken_dep.py:1)",
}


def _broken_project(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(good=toy("doubled"), **BROKEN)
    pytester.makeini("[pytest]\nconformance_modules =\n    broken_name\n    good\n    broken_syntax\n    broken_dep\n")


def test_a_module_that_fails_to_import_is_a_crash_cell_and_the_run_goes_on(pytester: pytest.Pytester) -> None:
    _broken_project(pytester)
    result = pytester.runpytest_subprocess("--conformance-only", "-k", "layout and contiguous or import",
                                           "-p", "no:randomly")
    out = result.stdout.str()
    assert "INTERNALERROR" not in out + result.stderr.str()
    result.assert_outcomes(passed=1, failed=3)
    result.stdout.fnmatch_lines_random([f"cannot import subject module {m!r}: {e}; recorded as the crash cell "
                                        f"{m}[[]import[]]" for m, e in ERRORS.items()])
    # One line each in the failures, the traceback only under -v.
    assert "Traceback" not in out
    doc = _results(pytester)
    by_cell = {(r["subject"], r["cell"]): r for r in doc["results"]}
    assert by_cell[("doubled", "layout:contiguous")]["outcome"] == "honoured"
    for module in BROKEN:
        cell = by_cell[(module, "import")]
        assert (cell["outcome"], cell["finding"]) == ("crash", "import-error")
        assert "Traceback" in cell["details"]["traceback"] and module in cell["message"]
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_the_import_traceback_is_shown_under_verbose(pytester: pytest.Pytester) -> None:
    _broken_project(pytester)
    result = pytester.runpytest_subprocess("--conformance-only", "-k", "import", "-v", "-p", "no:randomly")
    result.stdout.fnmatch_lines(["*Traceback (most recent call last)*", "*broken_name.py*line 2*",
                                 "NameError: name 'undefined_name' is not defined"])


# -- 4. declaration mistakes name the subject, the module and the fix --------------


def test_a_misspelled_keyword_names_the_subject_module_and_closest_field(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(typo_subjects=toy("doubled").replace("oracle=", "oracel="))
    pytester.makeini("[pytest]\nconformance_modules = typo_subjects\n")
    result = pytester.runpytest_subprocess("--conformance-only")
    result.stderr.fnmatch_lines(["ERROR: @subject: oracel= is not a field of a declaration (subject 'doubled' in "
                                 "module 'typo_subjects'); did you mean oracle=? expected one of inputs, dims, "
                                 "oracle, *typo_subjects.py:4"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert len(result.stderr.str().strip().splitlines()) == 1
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_an_autotuned_field_that_is_no_autotuner_is_a_usage_error_naming_the_subject(
        pytester: pytest.Pytester) -> None:
    source = toy("doubled").replace('family="toy"', 'family="toy", autotuned=plain_kernel')
    source = source.replace("import torch\n", "import torch\nimport triton\n\n\n@triton.jit\n"
                            "def plain_kernel(x_ptr):\n    pass\n\n")
    pytester.makepyfile(untuned_subjects=source)
    pytester.makeini("[pytest]\nconformance_modules = untuned_subjects\n")
    result = pytester.runpytest_subprocess("--conformance-only")
    result.stderr.fnmatch_lines(["ERROR: Contract: autotuned=plain_kernel (a *Function), expected @triton.autotune "
                                 "kernels*(subject 'doubled' in module 'untuned_subjects')"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_a_declaration_error_names_the_subject_and_the_module(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(bad_dims=toy("doubled").replace('Tensor(("N",)', 'Tensor(("K",)'))
    pytester.makeini("[pytest]\nconformance_modules = bad_dims\n")
    result = pytester.runpytest_subprocess("--conformance-only")
    result.stderr.fnmatch_lines(["ERROR: Contract: inputs*shape='K', expected a dim declared in dims=*"
                                 "(subject 'doubled' in module 'bad_dims') at bad_dims.py:4"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


@pytest.mark.parametrize(
    ("declaration", "message"),
    [
        ({"inputs": {}, "dims": {}, "oracel": abs}, r"oracel= is not a field .*did you mean oracle=\?"),
        ({"inputs": {}, "dims": {}, "oracle": abs, "tolerence": None}, r"did you mean tolerance=\?"),
        ({"inputs": {}, "dims": {}, "oracle": abs, "zzz": 1}, r"zzz= is not a field [^?]*expected one of inputs"),
        ({"dims": {}, "oracle": abs}, r"inputs= is missing \(subject 'launcher' in module '[\w.]+'\)"),
    ],
    ids=["oracel", "tolerence", "no-close-match", "missing-inputs"],
)
def test_subject_keyword_errors(declaration: dict, message: str) -> None:
    from triton_conformance import InvalidContract, subject

    with pytest.raises(InvalidContract, match=message):
        @subject(**declaration)
        def launcher(x):  # noqa: ANN001, ANN202
            return x


def test_subject_without_parentheses_says_how_to_call_it() -> None:
    from triton_conformance import InvalidContract, subject

    with pytest.raises(InvalidContract, match=r"@subject: got launcher as a positional argument, expected keywords"):
        @subject
        def launcher(x):  # noqa: ANN001, ANN202
            return x


# -- 5. configuration mistakes are usage errors, found before any cell runs ----------


def test_cuda_without_a_gpu_is_one_usage_error(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(toy_subjects=toy("doubled"))
    pytester.makeini("[pytest]\nconformance_modules = toy_subjects\n")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU, even on a machine that has one
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    result = pytester.runpytest_subprocess("--conformance-only", "--conformance-device=cuda")
    result.stderr.fnmatch_lines(["ERROR: --conformance-device='cuda' but no CUDA GPU is usable here: torch * sees "
                                 "none, CUDA_VISIBLE_DEVICES=''; expected a machine with a GPU, or run on the CPU "
                                 "with --conformance-device=interpreter (the default)"])
    assert len(result.stderr.str().strip().splitlines()) == 1
    assert "process-died" not in result.stdout.str()
    assert not (pytester.path / "conformance-results").exists(), "no cell ran"
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_the_plugin_module_does_not_import_torch_to_check_cuda() -> None:
    import triton_conformance.plugin as entry

    source = inspect.getsource(entry)
    assert "import torch" not in source.replace("_CUDA_PROBE = (\"import json, torch", "")


@pytest.mark.parametrize("timeout", ["0", "-5", "nan"])
def test_a_timeout_that_is_not_positive_is_a_usage_error(pytester: pytest.Pytester, timeout: str) -> None:
    pytester.makepyfile(toy_subjects=toy("doubled"))
    pytester.makeini("[pytest]\nconformance_modules = toy_subjects\n")
    result = pytester.runpytest_subprocess("--conformance-only", f"--conformance-timeout={timeout}")
    result.stderr.fnmatch_lines([f"ERROR: --conformance-timeout='{timeout}', expected a positive number of seconds"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    ini = pytester.runpytest_subprocess("--conformance-only", "-o", f"conformance_timeout={timeout}")
    ini.stderr.fnmatch_lines([f"ERROR: conformance_timeout ini option='{timeout}', expected a positive number*"])
    assert ini.ret == pytest.ExitCode.USAGE_ERROR


# -- 7. nothing already computed is lost -------------------------------------------

SUBJECT_CONFTEST = "def pytest_conformance_modules(config):\n    return ['toy_subjects']\n"


def _two_subjects(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(toy_subjects=toy("first") + toy("second").split("subject\n", 1)[1])
    pytester.makeconftest(SUBJECT_CONFTEST)


def test_a_partial_run_merges_into_the_results_and_says_which_run_made_each_cell(pytester: pytest.Pytester) -> None:
    _two_subjects(pytester)
    full = pytester.runpytest_subprocess("--conformance-only", "-k", "layout", "-p", "no:randomly")
    assert full.ret == 0
    before = _results(pytester)
    assert len(before["runs"]) == 1 and {r["run"] for r in before["results"]} == {before["runs"][0]["id"]}
    n = len(before["results"])
    assert {r["subject"] for r in before["results"]} == {"first", "second"}

    partial = pytester.runpytest_subprocess("--conformance-only", "--conformance-cell=first[layout:contiguous]",
                                            "-p", "no:randomly")
    partial.assert_outcomes(passed=1)
    after = _results(pytester)
    assert len(after["results"]) == n, "the cells the partial run did not run are kept"
    first_run, second_run = (r["id"] for r in after["runs"])
    assert first_run == before["runs"][0]["id"] and second_run != first_run
    owners = {(r["subject"], r["cell"]): r["run"] for r in after["results"]}
    assert owners.pop(("first", "layout:contiguous")) == second_run
    assert set(owners.values()) == {first_run}
    assert [r["cells"] for r in after["runs"]] == [n - 1, 1]
    assert after["summary"]["honoured"] + after["summary"]["skipped"] == n
    assert "--conformance-cell=first[layout:contiguous]" in after["runs"][1]["argv"]


def test_fresh_starts_a_new_results_file(pytester: pytest.Pytester) -> None:
    _two_subjects(pytester)
    pytester.runpytest_subprocess("--conformance-only", "-k", "layout", "-p", "no:randomly")
    result = pytester.runpytest_subprocess("--conformance-only", "--conformance-fresh",
                                           "--conformance-cell=second[layout:contiguous]")
    result.assert_outcomes(passed=1)
    doc = _results(pytester)
    assert [(r["subject"], r["cell"]) for r in doc["results"]] == [("second", "layout:contiguous")]
    assert len(doc["runs"]) == 1
    pytester.makeini("[pytest]\nconformance_fresh = true\n")
    pytester.runpytest_subprocess("--conformance-only", "--conformance-cell=first[layout:contiguous]")
    assert [(r["subject"], r["cell"]) for r in _results(pytester)["results"]] == [("first", "layout:contiguous")]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"schema": "someone-else/results", "version": 1, "results": []},
         "cannot be merged into: *schema='someone-else/results', expected 'triton-conformance/results'; "),
        ({"schema": "triton-conformance/results", "version": 1, "environment": {"device": "cuda"}, "results": []},
         "holds results from device 'cuda' and this run is on 'interpreter'; expected the same device to merge "
         "them: "),
        ("{not json", "cannot be merged into: *is not valid JSON: *; "),
    ],
    ids=["schema", "device", "not-json"],
)
def test_results_of_another_kind_are_not_merged_into(pytester: pytest.Pytester, document, message: str) -> None:
    _two_subjects(pytester)
    target = pytester.path / "conformance-results" / "results.json"
    target.parent.mkdir()
    target.write_text(document if isinstance(document, str) else json.dumps(document))
    before = target.read_text()
    result = pytester.runpytest_subprocess("--conformance-only", "--conformance-cell=first[layout:contiguous]")
    result.stderr.fnmatch_lines(["ERROR: --conformance-results='conformance-results/results.json' " + message +
                                 "pass --conformance-fresh (ini conformance_fresh = true) to replace it, or choose "
                                 "another path"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert target.read_text() == before, "the file is left as it was"
    fresh = pytester.runpytest_subprocess("--conformance-only", "--conformance-cell=first[layout:contiguous]",
                                          "--conformance-fresh")
    fresh.assert_outcomes(passed=1)
    assert [r["subject"] for r in _results(pytester)["results"]] == ["first"]


def test_update_results_keeps_old_cells_and_records_runs() -> None:
    from triton_conformance.reports.combine import update_results

    def doc(created, cells, runs=None):
        out = {"schema": "triton-conformance/results", "version": 1, "created": created,
               "environment": {"device": "interpreter", "argv": [created]},
               "results": [{"subject": s, "family": s, "cell": c, "outcome": o} for s, c, o in cells]}
        return dict(out, runs=runs) if runs is not None else out

    old = doc("t1", [("a", "x", "honoured"), ("a", "y", "wrong"), ("b", "x", "honoured")])
    new = doc("t1", [("a", "y", "honoured")])  # in the same second: the run id is still its own
    merged = update_results(old, new)
    assert [(r["subject"], r["cell"], r["outcome"], r["run"]) for r in merged["results"]] == [
        ("a", "x", "honoured", "t1"), ("a", "y", "honoured", "t1#2"), ("b", "x", "honoured", "t1")]
    assert [(r["id"], r["cells"]) for r in merged["runs"]] == [("t1", 2), ("t1#2", 1)]
    assert merged["summary"]["honoured"] == 3 and merged["summary"]["wrong"] == 0
    # A run that no longer owns a cell drops out of the list.
    again = update_results(merged, doc("t3", [("a", "y", "wrong")]))
    assert [r["id"] for r in again["runs"]] == ["t1", "t3"]
    assert update_results(None, new)["runs"][0]["cells"] == 1


# -- 8. the user's own tests are never conformance cells --------------------------


def test_a_failing_parametrized_user_test_is_not_a_conformance_crash(pytester: pytest.Pytester) -> None:
    _two_subjects(pytester)
    pytester.makepyfile(test_mine='''
        import pytest

        @pytest.mark.parametrize("n", [1, 2])
        def test_mine(n):
            assert n == 1
    ''')
    result = pytester.runpytest_subprocess("--conformance", "-k", "mine or layout and contiguous",
                                           "-p", "no:randomly")
    result.assert_outcomes(passed=3, failed=1)
    subjects = {r["subject"] for r in _results(pytester)["results"]}
    assert subjects == {"first", "second"}, subjects


# -- 9. a failing cell can be re-run by name ----------------------------------------


def test_failing_cells_print_a_command_that_reruns_them(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(toy_subjects=toy("halved").replace("return x * 2", "return x / 2"))
    pytester.makeconftest(SUBJECT_CONFTEST)
    result = pytester.runpytest_subprocess("--conformance-only", "-k", "layout", "-p", "no:randomly")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    lines = result.stdout.lines
    start = lines.index("re-run a failing cell:")
    import shlex

    # Each names the Python that ran the job (a bare `pytest` may be another environment's, without the plugin).
    commands = [shlex.split(line) for line in lines[start + 1:] if line.startswith("  ") and "-m pytest" in line]
    command = ["-m", "pytest", "--conformance-only", "--conformance-cell=halved[layout:contiguous]"]
    assert command in [argv[1:] for argv in commands], lines[start:]
    assert {argv[0] for argv in commands} == {os.path.relpath(sys.executable)
                                              if not os.path.relpath(sys.executable).startswith("..")
                                              else sys.executable}
    from triton_conformance.reports.findings import finding_groups

    failing = [r for r in _results(pytester)["results"] if r["outcome"] == "wrong"]
    assert len(commands) == len(finding_groups(failing)) >= 1  # one per finding, not one per cell
    rerun = pytester.runpytest_subprocess(*command[2:], "-p", "no:randomly")
    rerun.assert_outcomes(failed=1)
    rerun.stdout.fnmatch_lines(["*halved[[]layout:contiguous[]]: wrong*"])


def test_conformance_cell_selects_cells_and_subjects_and_refuses_unknown_ones(pytester: pytest.Pytester) -> None:
    _two_subjects(pytester)
    both = pytester.runpytest_subprocess("--conformance-only", "--conformance-cell=first[layout:contiguous]",
                                         "--conformance-cell=second[shape:tiny]", "-p", "no:randomly")
    both.assert_outcomes(passed=2)
    whole = pytester.runpytest_subprocess("--conformance-only", "--conformance-cell=second", "-k", "layout")
    assert {r["subject"] for r in _results(pytester)["results"] if r["run"] == _results(pytester)["runs"][-1]["id"]
            } == {"second"}
    assert whole.ret == 0
    bad = pytester.runpytest_subprocess("--conformance-only", "--conformance-cell=first[layout:contigous]")
    bad.stderr.fnmatch_lines(["ERROR: --conformance-cell='first[[]layout:contigous[]]' names no cell, expected "
                              "subject[[]cell[]] as the terminal prints it, or a subject name; closest: "
                              "first[[]layout:contiguous[]]*"])
    assert bad.ret == pytest.ExitCode.USAGE_ERROR


# -- issue 29 item 7: first-use papercuts ----------------------------------


def test_collect_only_counts_the_cells_it_lists(pytester: pytest.Pytester) -> None:
    """The cells come from no collector: the count must still be theirs, not "no tests collected"."""
    pytester.makepyfile(toy_subjects=toy("counted"))
    pytester.makeini("[pytest]\nconformance_modules = toy_subjects\n")
    result = pytester.runpytest_subprocess("-p", "no:xdist", "--conformance-only", "--collect-only", "-q")
    listed = [line for line in result.stdout.lines if line.startswith("::counted[")]
    assert listed and f"{len(listed)} tests collected" in result.stdout.str(), result.stdout.str()
    assert "no tests collected" not in result.stdout.str()


def test_starting_pytest_after_importing_the_package_does_not_warn_about_rewriting(tmp_path) -> None:
    """The ``triton-conformance`` command imports the package, then runs pytest in the same process."""
    (tmp_path / "test_one.py").write_text("def test_one():\n    pass\n")
    code = "import triton_conformance, pytest, sys; sys.exit(pytest.main(['-q', '-p', 'no:xdist']))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "cannot be rewritten" not in done.stdout + done.stderr
