#!/bin/bash
# Two recorded runs at two commits, a known bug committed between them, and `history first-bad` naming the
# commit where the cell turned red (issue 33's "done when").
#
#   bash bench/gpu/history_first_bad.sh [cuda|interpreter] [WHEEL_DIR]
#
# In a scratch git repository made from this checkout (which needs no .git of its own): run 1 of the
# vector-add subject at commit A (a nightly run on cuda: nightly profile, one worker; the ci profile on the
# interpreter), then commit B drops the store's mask in kernels_under_test/vector_add.py (the last block
# writes past the output), run 2, then `triton-conformance history first-bad` on the first cell that failed.
# WHEEL_DIR (default: .whl in this checkout): SQLAlchemy's wheel, for a machine without network, where the
# Python in hand lacks it: installed with pip --no-index --no-deps into /tmp/site (its one dependency,
# typing_extensions, comes with torch), and put on PYTHONPATH.
# Prints the two runs' summary lines, the first-bad answer, and "FIRST-BAD OK: <commit B>" if it names B.
set -u
DEVICE=${1:-cuda}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
WHEELS=${2:-$SRC/.whl}
PY=${PYTHON:-python3}
SITE=
if ! $PY -c "import sqlalchemy" 2>/dev/null; then
    ls "$WHEELS"/sqlalchemy-*.whl >/dev/null 2>&1 || { echo "SQLAlchemy is not installed and $WHEELS has no wheel of it"; exit 2; }
    SITE=/tmp/site
    $PY -m pip install --quiet --no-index --no-deps --target "$SITE" "$WHEELS"/sqlalchemy-*.whl || exit 2
fi
START=$(date +%s)
WORK=$(mktemp -d /tmp/history-first-bad.XXXXXX)
mkdir "$WORK/repo"
(cd "$SRC" && tar --exclude=.git --exclude=.tox --exclude=.conformance --exclude=conformance-results \
    --exclude=__pycache__ --exclude=.gpusnap --exclude=.whl --exclude=.hypothesis --exclude=.pytest_cache \
    --exclude=.ruff_cache -cf - .) | (cd "$WORK/repo" && tar -xf -)
cd "$WORK/repo" || exit 2
export GIT_CEILING_DIRECTORIES=$WORK PYTHONPATH=$PWD${SITE:+:$SITE}${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
git() { command git -c user.name=bench -c user.email=bench@localhost "$@"; }
git init -q && git add -A && git commit -qm "A: the checkout as it is"
A=$(git rev-parse HEAD)
record() {  # the run's name
    if [ "$DEVICE" = cuda ]; then
        $PY -m triton_conformance.cli nightly --gpus 0 -n 1 --cell add --fresh --seed 7 \
            --results "$WORK/$1.json" > "$WORK/$1.log" 2>&1
    else
        $PY -m triton_conformance.cli run --device interpreter --cell add --fresh \
            --results "$WORK/$1.json" > "$WORK/$1.log" 2>&1
    fi
    local rc=$?
    echo "== run $1 at $(git rev-parse --short HEAD): exit $rc"
    grep -E "^history:|passed|failed" "$WORK/$1.log" | tail -2
}
record run1
sed -i 's/tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=mask)/tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty))/' \
    kernels_under_test/vector_add.py
git diff --stat
git commit -qam "B: the store's mask dropped (a known bug)"
B=$(git rev-parse HEAD)
record run2
CELL=$($PY - "$WORK/run2.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
bad = [r for r in doc["results"] if r["outcome"] not in ("honoured", "rejected", "accepted", "skipped")]
print(f"{bad[0]['subject']}[{bad[0]['cell']}]" if bad else "")
PY
)
[ -n "$CELL" ] || { echo "run 2 found no failing cell: the bug was not caught"; exit 1; }
echo "== history trend add -n 2"
$PY -m triton_conformance.cli history trend add -n 2 | head -12
echo "== history first-bad $CELL"
OUTPUT=$($PY -m triton_conformance.cli history first-bad "$CELL")
echo "$OUTPUT"
echo "(A = $A, B = $B)"
echo "(took $(( $(date +%s) - START )) s)"
if echo "$OUTPUT" | grep -q "first bad commit $B"; then echo "FIRST-BAD OK: $B"; else echo "FIRST-BAD WRONG"; exit 1; fi
