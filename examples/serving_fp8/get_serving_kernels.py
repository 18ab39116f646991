"""Put vLLM's and SGLang's fp8 Triton kernels and their launchers, verbatim, in sources/ (not committed).

    python get_serving_kernels.py --vllm ~/src/vllm --vllm-ref v0.34.0 --sglang ~/src/sglang --sglang-ref v0.5.23
    python get_serving_kernels.py --vllm /tmp/vllm-wheel --sglang /tmp/sglang-wheel   # unpacked wheels

Each of ``--vllm`` and ``--sglang`` is a git clone (read at its ``--*-ref`` with ``git show``) or a folder
holding the package itself (an unzipped wheel, a site-packages: ``vllm/...``, ``sglang/...``).  Neither
package installs on a CPU machine (vLLM's C++ ops, SGLang's sgl-kernel), so the kept functions are taken
out of their modules: for each upstream file, the top-level statements that define the names in ``KEEP``
(functions with their decorators, assignments, an ``if`` that assigns one), unchanged and in upstream's
order, after a prelude that binds the few names those statements read from the rest of the library.  Each
prelude name says how upstream resolves it; nothing in the kept code is edited.  Names the kept code
still reads and nobody binds are printed (they are on branches the subjects do not take).
"""

from __future__ import annotations

import argparse
import ast
import builtins
import os
import subprocess
import sys
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))

VLLM_PRELUDE = '''\
import functools
import json
import logging
import os
from typing import Any

import torch
import triton
import triton.language as tl

logger = logging.getLogger("vllm.model_executor.layers.quantization.utils.fp8_utils")


class _CpuPlatform:
    """What the kept code asks vllm.platforms.current_platform, answered as vLLM's CPU platform does: so
    per_token_group_quant_fp8 takes its Triton fallback for every x (on CUDA vLLM calls its C++
    torch.ops._C.per_token_group_fp8_quant for a contiguous x, and the Triton kernel for any other)."""

    def fp8_dtype(self):
        return torch.float8_e4m3fn

    def is_cuda_alike(self):
        return False

    def is_xpu(self):
        return False

    def is_rocm(self):
        return False

    def is_fp8_fnuz(self):
        return False


current_platform = _CpuPlatform()


class envs:  # vllm.envs: the default of the one variable read
    VLLM_BATCH_INVARIANT = False


def get_fp8_min_max():  # quant_utils.get_fp8_min_max for a platform without fnuz
    finfo = torch.finfo(current_platform.fp8_dtype())
    return finfo.min, finfo.max


def is_deep_gemm_e8m0_used():  # vllm.utils.deep_gemm: False without DeepGEMM installed
    return False


def get_device_name_as_file_name():  # vllm.utils.platform_utils (only names a tuned-config file)
    name = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    return name.replace(" ", "_")
'''

SGLANG_QUANT_PRELUDE = '''\
import logging
from functools import lru_cache
from typing import Optional, Tuple

import torch
import triton
import triton.language as tl

_is_hip = False  # sglang.srt.utils.is_hip() on NVIDIA (and on the CPU)
logger = logging.getLogger("sglang.kernels.ops.quantization.fp8_kernel")
'''

SGLANG_GEMM_PRELUDE = '''\
import functools
import json
import logging
import os
from typing import Any, Dict, List, Optional, Tuple

import torch
import triton
import triton.language as tl

_is_hip = False  # sglang.srt.utils.is_hip() on NVIDIA
_is_cuda = torch.cuda.is_available()  # sglang.srt.utils.is_cuda()
_is_gfx1250 = False  # sglang.srt.utils.is_gfx1250_supported() on NVIDIA
logger = logging.getLogger("sglang.kernels.ops.gemm.fp8_kernel")


def get_device_name():  # sglang.srt.utils.get_device_name (only names a tuned-config file)
    return torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"


def log_info_on_rank0(logger, msg):  # sglang.srt.utils
    logger.info(msg)


class _Platform:  # sglang.srt.runtime_context.get_platform(): the one property read
    is_sm90 = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


def get_platform():
    return _Platform()
'''


@dataclass(frozen=True)
class Upstream:
    """One upstream file: where it is in the repository and in the package, and what is kept of it."""

    library: str  # "vllm" or "sglang": the command-line source it comes from
    repo_path: str  # its path in a clone
    package_path: str  # its path in an unpacked wheel
    keep: tuple[str, ...]  # the top-level names whose defining statements are kept
    prelude: str


UPSTREAM = {  # module in sources/ -> the file it is cut from
    "vllm_fp8_utils": Upstream(
        "vllm", "vllm/model_executor/layers/quantization/utils/fp8_utils.py",
        "vllm/model_executor/layers/quantization/utils/fp8_utils.py",
        ("_per_token_group_quant_fp8", "_per_token_group_quant_fp8_colmajor", "per_token_group_quant_fp8",
         "_w8a8_triton_block_scaled_mm", "get_w8a8_block_fp8_configs", "w8a8_triton_block_scaled_mm"),
        VLLM_PRELUDE),
    "sglang_fp8_quant": Upstream(
        "sglang", "python/sglang/kernels/ops/quantization/fp8_kernel.py",
        "sglang/kernels/ops/quantization/fp8_kernel.py",
        ("is_fp8_fnuz", "fp8_dtype", "fp8_max", "fp8_min", "_per_token_group_quant_8bit",
         "_per_token_group_quant_8bit_colmajor", "_per_token_group_quant_8bit_raw",
         "create_per_token_group_quant_fp8_output_scale"),
        SGLANG_QUANT_PRELUDE),
    "sglang_fp8_gemm": Upstream(
        "sglang", "python/sglang/kernels/ops/gemm/fp8_kernel.py", "sglang/kernels/ops/gemm/fp8_kernel.py",
        ("_w8a8_block_fp8_matmul", "get_w8a8_block_fp8_configs", "select_w8a8_block_fp8_matmul_kernel",
         "prepare_block_fp8_matmul_inputs", "w8a8_block_fp8_matmul_triton"),
        SGLANG_GEMM_PRELUDE),
}


def defined_names(node: ast.stmt) -> set[str]:
    """The module-level names a top-level statement binds (an ``if`` binds what either branch binds)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    if isinstance(node, ast.If):
        return set().union(*(defined_names(s) for s in node.body + node.orelse))
    return set()


def cut(text: str, keep: tuple[str, ...]) -> tuple[str, list[str]]:
    """The statements of ``text`` that define a name in ``keep``, verbatim and in order (decorators
    included); raise ValueError naming any kept name the file does not define."""
    lines = text.splitlines(keepends=True)
    pieces, found = [], set()
    for node in ast.parse(text).body:
        names = defined_names(node) & set(keep)
        if not names:
            continue
        found |= names
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        pieces.append(f"# upstream lines {start}-{node.end_lineno}\n" + "".join(lines[start - 1:node.end_lineno]))
    missing = [n for n in keep if n not in found]
    if missing:
        raise ValueError(f"the file defines no {', '.join(missing)} at module level (a renamed or moved kernel?)")
    return "\n\n".join(pieces), sorted(found)


def unbound(source: str) -> list[str]:
    """Names the module reads that nothing in it binds and that are not builtins (a rough, local check)."""
    tree = ast.parse(source)
    bound = set(dir(builtins)) | {"__file__", "__name__"}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
            bound |= {a.arg for a in node.args.args + node.args.kwonlyargs + node.args.posonlyargs} \
                if not isinstance(node, ast.ClassDef) else set()
            if not isinstance(node, ast.ClassDef):
                bound |= {a.arg for a in (node.args.vararg, node.args.kwarg) if a}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.Lambda):
            bound |= {a.arg for a in node.args.args}
        elif isinstance(node, ast.comprehension):
            bound |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
    return sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - bound)


def read_upstream(root: str, ref: str, spec: Upstream) -> tuple[str, str]:
    """(text, origin) of ``spec``'s file from a clone at ``ref`` or from an unpacked package folder."""
    if os.path.exists(os.path.join(root, ".git")):
        git = ["git", "-C", root]
        commit = subprocess.run(git + ["rev-parse", ref], capture_output=True, text=True, check=True).stdout.strip()
        text = subprocess.run(git + ["show", f"{ref}:{spec.repo_path}"], capture_output=True, text=True,
                              check=True).stdout
        return text, f"{spec.library} {ref}:{spec.repo_path} (commit {commit})"
    path = os.path.join(root, spec.package_path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"--{spec.library}={root!r}: no {spec.package_path} there (expected a git clone "
                                f"or an unpacked {spec.library} package)")
    version = next((d for d in os.listdir(root) if d.startswith(f"{spec.library}-") and d.endswith(".dist-info")),
                   "version unknown")
    with open(path) as f:
        return f.read(), f"{path} ({version})"


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for lib in ("vllm", "sglang"):
        parser.add_argument(f"--{lib}", help=f"a clone of {lib}, or a folder holding the unpacked {lib} package")
        parser.add_argument(f"--{lib}-ref", default="HEAD", help="the tag or commit to read from a clone")
    args = parser.parse_args(argv)
    if not (args.vllm or args.sglang):
        parser.error("give --vllm, --sglang or both")
    os.makedirs(os.path.join(HERE, "sources"), exist_ok=True)
    for module, spec in UPSTREAM.items():
        root = getattr(args, spec.library)
        if not root:
            print(f"sources/{module}.py: no --{spec.library}, left out")
            continue
        text, origin = read_upstream(root, getattr(args, f"{spec.library}_ref"), spec)
        kept, names = cut(text, spec.keep)
        header = (f"# Cut from {origin}: the top-level statements defining {', '.join(names)}, verbatim,\n"
                  "# after a prelude binding the names they import from the rest of the library\n"
                  "# (get_serving_kernels.py). Upstream's code: not committed.\n\n")
        source = header + spec.prelude + "\n\n" + kept
        with open(os.path.join(HERE, "sources", f"{module}.py"), "w") as f:
            f.write(source)
        loose = unbound(source)
        print(f"sources/{module}.py: {kept.count(chr(10))} lines from {origin}"
              + (f"; unbound (on branches not taken): {', '.join(loose)}" if loose else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
