"""The ``triton-conformance`` command as a new user meets it (issue 14): help, pipes, replay."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

from triton_conformance.options import EXIT_USAGE

from triton_conformance.cli import main

CLI = [sys.executable, "-m", "triton_conformance.cli"]


def _help(capsys: pytest.CaptureFixture, *argv: str) -> str:
    with pytest.raises(SystemExit) as info:
        main([*argv, "--help"])
    assert info.value.code == 0
    return capsys.readouterr().out


def _option_help(text: str, flag: str) -> str:
    """The help text of ``flag`` in argparse's output, on one line."""
    match = re.search(rf"^  {re.escape(flag)}\b.*?(?=^  -|\Z)", text, re.M | re.S)
    assert match, f"{flag} not in the help"
    return " ".join(match.group(0).split())


# -- 6. help -------------------------------------------------------------------


def test_each_battery_command_shows_its_own_defaults(capsys: pytest.CaptureFixture) -> None:
    nightly = _help(capsys, "nightly")
    assert _option_help(nightly, "--device").endswith("[default: cuda]")
    assert _option_help(nightly, "--profile").endswith("[default: nightly]")
    assert "[default: --workers-per-gpu for each GPU in --gpus, else each visible GPU]" in _option_help(nightly, "-n")
    assert _option_help(nightly, "--workers-per-gpu").endswith("[default: auto]")
    run = _help(capsys, "run")
    assert _option_help(run, "--device").endswith("[default: interpreter]")
    assert _option_help(run, "--profile").endswith("[default: ci]")


@pytest.mark.parametrize("command", ["run", "nightly"])
def test_no_help_states_its_default_twice_or_as_none(capsys: pytest.CaptureFixture, command: str) -> None:
    text = " ".join(_help(capsys, command).split())
    assert "[default: None]" not in text
    assert not re.search(r"\(default[:)]", text), "a default belongs in the one [default: ...] at the end"
    assert "[default: fresh each run, printed]" in _option_help(_help(capsys, command), "--seed")
    for flag in ("--seed", "--gpus", "--compiles", "--results", "--timeout", "--isolation", "--sanitizer"):
        assert _option_help(_help(capsys, command), flag).count("default") == 1, flag


def test_the_options_help_states_each_default_once() -> None:
    from triton_conformance.options import OPTIONS, help_for

    for name, _, _, text in OPTIONS:
        assert "default" not in text, f"{name}: the help states its own default"
        assert help_for(name).count("[default: ") == 1
        assert "None" not in help_for(name)


def test_the_top_level_help_describes_the_commands_with_examples(capsys: pytest.CaptureFixture) -> None:
    text = _help(capsys)
    assert text.count("\n") > 15
    assert "examples:" in text
    for command in ("run", "nightly", "show", "report", "diff", "replay"):
        assert re.search(rf"^    {command}\b", text, re.M), f"{command} is listed"
        assert f"triton-conformance {command} " in text, f"an example of {command}"
    assert "  triton-conformance run -n 2 " in text, "the examples keep their layout (RawDescriptionHelpFormatter)"


def test_the_pytest_help_shows_each_default_once(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--help")
    text = " ".join(result.stdout.str().split())
    assert "[default: None]" not in text
    assert "--conformance-fresh" in text and "--conformance-cell=SUBJECT[CELL]" in text


# -- 6. a reader that goes away --------------------------------------------------


def _many_cells(path, n: int = 3000) -> None:
    from triton_conformance.model.outcomes import CellResult
    from triton_conformance.reports.results_json import environment, results_document, write_results

    cells = [CellResult(subject=f"subject_{i:05d}", family="toy", cell="layout:contiguous", outcome="honoured")
             for i in range(n)]
    write_results(str(path), results_document(cells, environment(device="interpreter", profile="ci", seed=None)))


def test_show_into_a_closed_pipe_exits_quietly(tmp_path) -> None:
    results = tmp_path / "results.json"
    _many_cells(results)
    proc = subprocess.Popen([*CLI, "show", str(results)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline()  # `| head -1`
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    code = proc.wait(timeout=60)
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr
    assert code == 141


def test_show_into_head_in_a_shell(tmp_path) -> None:
    results = tmp_path / "results.json"
    _many_cells(results)
    command = " ".join([*CLI, "show", str(results)]) + " | head -3"
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", command], capture_output=True, text=True, timeout=60)
    assert len(proc.stdout.splitlines()) == 3
    assert proc.stderr == "", proc.stderr


# -- 10. replay --------------------------------------------------------------------

HALVED = '''
import torch
from triton_conformance import Dim, Tensor, subject

@subject(inputs={"x": Tensor(("N",), dtypes=("float32",), layouts="any")},
         dims={"N": Dim(1, 16)}, oracle=lambda x: x * 2, family="toy")
def halved(x):
    if x.dtype != torch.float32:
        raise TypeError(f"halved: x.dtype={x.dtype}, expected float32")
    if not 1 <= x.shape[0] <= 16:
        raise ValueError(f"halved: x.shape={tuple(x.shape)}, expected (N,) with 1 <= N <= 16")
    return x / 2
'''


def _run(cwd, *argv: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("PYTEST_XDIST")}
    if os.environ.get("PYTHONPATH"):  # the checkout under test, when it is not the installed one
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def failing_run(tmp_path_factory: pytest.TempPathFactory):
    """A project whose one subject is wrong, after one run of its layout cells (run once for this module)."""
    project = tmp_path_factory.mktemp("halved")
    (project / "toy_subjects.py").write_text(textwrap.dedent(HALVED))
    (project / "conftest.py").write_text("def pytest_conformance_modules(config):\n    return ['toy_subjects']\n")
    (project / "pytest.ini").write_text("[pytest]\n")
    result = _run(project, sys.executable, "-m", "pytest", "--conformance-only", "-k", "layout", "-p", "no:randomly",
                  "-p", "no:cacheprovider")
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, result.stdout + result.stderr
    return project


def test_replay_runs_the_stored_reproducer_and_exits_with_its_status(failing_run, tmp_path) -> None:
    result = _run(failing_run, *CLI, "replay", "conformance-results/results.json", "halved[layout:contiguous]")
    first = result.stderr.splitlines()[0]
    # With the interpreter shims the run used (every one, the default), installed before the subject imports.
    assert first == (f"replaying halved[layout:contiguous] (wrong, mismatch) with {sys.executable}, compat shims "
                     "nested_calls, fast_paths, libdevice, autotune, device_context, device_properties, cuda_allocations, torch_hip, "
                     "vendor_blas, nvidia_smi, jit_function, compiled_kernel, tensor_wrappers, lang_globals, float_scalars, "
                     "loop_vars, overflow_checks, fp8, bf16, descriptors")
    assert "StillFails" in result.stderr and "mismatch" in result.stderr
    assert result.returncode == 1, "the reproducer still fails"
    # Fixed: the same reproducer now passes, and replay says so with exit status 0.
    fixed = tmp_path / "fixed"
    shutil.copytree(failing_run, fixed)
    (fixed / "toy_subjects.py").write_text(textwrap.dedent(HALVED).replace("x / 2", "x * 2"))
    again = _run(fixed, *CLI, "replay", "conformance-results/results.json", "halved[layout:contiguous]")
    assert again.returncode == 0, again.stderr


@pytest.mark.parametrize(
    ("cell", "message"),
    [
        ("halved[layout:contigous]", "cell='halved[layout:contigous]' is not in 'conformance-results/results.json'; "
                                     "closest: halved[layout:contiguous]"),
        ("doubled[layout:contiguous]", "cell='doubled[layout:contiguous]' is not in "
                                       "'conformance-results/results.json'; the file has no subject 'doubled'"),
        ("halved", "cell='halved' is not in 'conformance-results/results.json'; expected subject[cell], as the "
                   "matrix names it"),
        ("halved[layout:transposed]", "cell='halved[layout:transposed]' (skipped) has no reproducer in "
                                      "'conformance-results/results.json': only failing cells carry one"),
    ],
    ids=["misspelled", "no-subject", "no-cell", "no-reproducer"],
)
def test_replay_names_the_argument_that_is_wrong(failing_run, cell: str, message: str) -> None:
    result = _run(failing_run, *CLI, "replay", "conformance-results/results.json", cell)
    assert result.stderr.startswith("triton-conformance replay: " + message), result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert result.returncode == EXIT_USAGE


def test_replay_of_a_missing_file_names_it(tmp_path) -> None:
    proc = subprocess.run([*CLI, "replay", str(tmp_path / "nope.json"), "a[b]"], capture_output=True, text=True)
    assert proc.returncode == EXIT_USAGE
    assert proc.stderr.strip() == f"triton-conformance replay: results file {str(tmp_path / 'nope.json')!r} does " \
                                  "not exist"
