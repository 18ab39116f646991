"""The one search every searching cell kind uses, the allowance it spends, and the classes it steers by.

- :mod:`.policy`: the profile read once (seeds, settings, caps);
- :mod:`.context`: the :class:`~.context.CellContext` a cell runs in, which the search takes typed;
- :mod:`.allowance`: one cell's limits, its meters and its discards (why an example was not judged:
  :mod:`triton_conformance.conformance.discards`, below the search, the battery and the judge alike);
- :mod:`.engine`: the Hypothesis loop over a kind's draws with its example runner;
- :mod:`.shrink`: the per-dim shrink, the error plot, the search for a second bug;
- :mod:`.cell`: a cell's search from start to result;
- :mod:`.compiles`, :mod:`.specializations`: the compile budget and classes on CUDA;
- :mod:`.interpreter_cost`: counted interpreted work on the interpreter.
"""
