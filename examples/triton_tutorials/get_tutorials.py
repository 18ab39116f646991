"""Put the Triton tutorials' kernels and launchers, verbatim, in sources/ (not committed: upstream's code).

    python get_tutorials.py --git ~/src/triton --ref c147f0988de75b002a05945a3c82f2597d1ae23d
    python get_tutorials.py --dir ~/src/triton/python/tutorials  # from a folder of the tutorials

Each tutorial becomes sources/<module>.py: the file as upstream has it, cut
before its first statement at module level that is an expression (the unit
test and the benchmark run there: ``torch.manual_seed(0)``,
``test_layer_norm(...)``, ``benchmark.run(...)``) or, for a tutorial whose
module-level test starts with assignments (08: ``group_m = [...]``, then
``tri_out = group_gemm_fn(...)``), before the statement that starts it; with a
header naming its origin.  What is kept is a prefix of the file, unchanged:
imports, the kernels, the launchers, the module-level device queries.
"""

import argparse
import ast
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TUTORIALS = {  # module in sources/ -> the tutorial's file in python/tutorials/
    "tutorial_01_vector_add": "01-vector-add.py",
    "tutorial_02_fused_softmax": "02-fused-softmax.py",
    "tutorial_03_matrix_multiplication": "03-matrix-multiplication.py",
    "tutorial_05_layer_norm": "05-layer-norm.py",
    "tutorial_06_fused_attention": "06-fused-attention.py",
    "tutorial_08_grouped_gemm": "08-grouped-gemm.py",
    "tutorial_09_persistent_matmul": "09-persistent-matmul.py",
}
TEST_STARTS = {  # a tutorial whose module-level test begins with an assignment -> the name it assigns first
    "08-grouped-gemm.py": "group_m",
}


def starts_test(node, name):
    """Whether module-level ``node`` runs the tutorial's test: an expression, or the assignment to ``name``."""
    return isinstance(node, ast.Expr) or (isinstance(node, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == name for t in node.targets))


def launchers(text, test_start=None):
    """The prefix of a tutorial before its first module-level expression statement (its docstring aside), or
    before its assignment to ``test_start``."""
    body = ast.parse(text).body
    for node in body[1:] if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            else body:
        if starts_test(node, test_start):
            start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            return "".join(text.splitlines(keepends=True)[:start - 1])
    return text


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--git", help="a clone of triton-lang/triton")
    source.add_argument("--dir", help="a folder holding the tutorials' files")
    parser.add_argument("--ref", default="HEAD", help="the tag or commit to read with --git (default HEAD)")
    parser.add_argument("--origin", default="triton-lang/triton",
                        help="the repository the --git clone's commits are from, for the header (a fork's mirror of "
                             "upstream's commits: say so)")
    args = parser.parse_args(argv)
    os.makedirs(os.path.join(HERE, "sources"), exist_ok=True)
    for module, name in TUTORIALS.items():
        if args.git:
            origin = f"{args.origin} {args.ref}:python/tutorials/{name}"
            commit = subprocess.run(["git", "-C", args.git, "rev-parse", args.ref], capture_output=True, text=True,
                                    check=True).stdout.strip()
            text = subprocess.run(["git", "-C", args.git, "show", f"{args.ref}:python/tutorials/{name}"],
                                  capture_output=True, text=True, check=True).stdout
            origin += f" (commit {commit})"
        else:
            origin = os.path.join(os.path.abspath(args.dir), name)
            if not os.path.exists(origin):
                print(f"sources/{module}.py: no {origin}, left out")
                continue
            with open(origin) as f:
                text = f.read()
        kept = launchers(text, TEST_STARTS.get(name))
        header = (f"# Verbatim from {origin}, lines 1-{kept.count(chr(10))} of {text.count(chr(10))}: the kernels and\n"
                  "# launchers; the unit test and benchmark that follow are left out (get_tutorials.py).\n")
        with open(os.path.join(HERE, "sources", f"{module}.py"), "w") as f:
            f.write(header + kept)
        print(f"sources/{module}.py: {kept.count(chr(10))} lines from {origin}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
