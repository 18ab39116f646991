"""A stored finding's values in hand: :func:`counterexample_inputs`, served by the package root.

It reads a finding where it is kept (a results file, a document or one of its results, or a reproducer's
example) and rebuilds its tensors through the one path every replay takes
(:func:`~triton_conformance.conformance.replay.example_tensors`), so that what a person checks by hand is
what the kernel was handed.
"""

from __future__ import annotations

import importlib
import os
from typing import Any, Mapping

from triton_conformance.conformance.replay import ExampleTensors, example_tensors
from triton_conformance.errors import InvalidArgument
from triton_conformance.model.cells import cell_id, split_cell_id
from triton_conformance.model.subject import Subject, get_subject
from triton_conformance.reports.results_json import check_cells, read_results

__all__ = ["counterexample_inputs"]


def _result_of(doc: Mapping[str, Any], wanted: str | None, where: str) -> Mapping[str, Any]:
    names = {cell_id(r["subject"], r["cell"]): r for r in doc["results"]}
    if wanted not in names:
        failing = sorted(n for n, r in names.items() if r.get("counterexample"))
        raise InvalidArgument(f"counterexample_inputs: cell={wanted!r} is not in {where}; expected "
                              f"subject[cell], one of the cells with a counterexample: {failing}")
    return names[wanted]


def _subject(name: str, module: str | None) -> Subject:
    if module is not None:
        importlib.import_module(module)
    try:
        return get_subject(name)
    except KeyError as exc:
        raise InvalidArgument(f"counterexample_inputs: subject={name!r} is not declared in this process "
                              f"({exc}); expected module= naming the module that declares it") from None


def counterexample_inputs(source: Any, cell: str | None = None, *, subject: str | Subject | None = None,
                          module: str | None = None, device: str = "cpu",
                          grad_dtype: str | None = None) -> ExampleTensors:
    """Returns the exact tensors of a stored finding: an :class:`ExampleTensors` whose ``inputs`` have the
    counterexample's real shape, strides and storage offset (views into sentinel storage, as the launcher
    had them), with its ``scalars``, its ``grad_outputs`` (for a ``grad`` cell) and its ``spec``.

    - ``source``: a results file's path with ``cell="subject[cell]"``; a results document (its parsed JSON)
      with ``cell``; one result of it (a dict with a ``counterexample``); or a reproducer's ``example`` (a
      spec dict or ``Spec``) with ``subject=`` and ``cell=`` (the cell's own name, ``"shape:tiny"``);
    - ``module``: the module that declares the subject, when this process has not imported it;
    - ``device``: where to build the tensors (``"cpu"``, or a CUDA device);
    - ``grad_dtype``: grad_output's dtype, where the output's is not its first gradient's input's.

    >>> ex = counterexample_inputs("conformance-results/results.json", "add[layout:sliced]",
    ...                            module="kernels_under_test.vector_add")  # doctest: +SKIP
    >>> ex.inputs["x"].stride(), ex.inputs["x"].storage_offset()  # doctest: +SKIP
    ((2,), 0)
    >>> ex.save("add-sliced.pt")  # torch.load gives {"inputs", "scalars", "grad_outputs", "spec", ...}
    """
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        source = _result_of(check_cells(read_results(path), path), cell, repr(path))
    elif isinstance(source, Mapping) and "results" in source:
        source = _result_of(source, cell, "the document")
    if isinstance(source, Mapping) and "counterexample" in source:
        counterexample = source.get("counterexample")
        if not counterexample:
            raise InvalidArgument(f"counterexample_inputs: cell {cell_id(source['subject'], source['cell'])} "
                                  f"({source.get('outcome')}) has no counterexample: only failing cells keep one")
        subject, cell = source["subject"], source["cell"]
        example: Any = {k: v for k, v in counterexample.items() if k not in ("tensors", "shrunk")}
    else:
        example = source
        if subject is None and cell is not None and split_cell_id(cell) is not None:
            subject, cell = split_cell_id(cell)
        if subject is None or cell is None:
            raise InvalidArgument(f"counterexample_inputs: source={source!r} is an example; expected subject= "
                                  "and cell= with it (as the reproducer's replay(...) call names them)")
    if not isinstance(subject, Subject):
        subject = _subject(subject, module)
    return example_tensors(subject, cell, example, device=device, grad_dtype=grad_dtype)
