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
# WHEEL_DIR: where SQLAlchemy's wheel is, for a machine without network (pip install --no-index from it).
# Prints the two runs' summary lines, the first-bad answer, and "FIRST-BAD OK: <commit B>" if it names B.
set -u
DEVICE=${1:-cuda}
WHEELS=${2:-}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PYTHON:-python3}
if ! $PY -c "import sqlalchemy" 2>/dev/null; then
    [ -n "$WHEELS" ] || { echo "SQLAlchemy is not installed: give a wheel directory"; exit 2; }
    $PY -m pip install --quiet --no-index --find-links "$WHEELS" SQLAlchemy || exit 2
fi
WORK=$(mktemp -d /tmp/history-first-bad.XXXXXX)
mkdir "$WORK/repo"
(cd "$SRC" && tar --exclude=.git --exclude=.tox --exclude=.conformance --exclude=conformance-results \
    --exclude=__pycache__ --exclude=.gpusnap -cf - .) | (cd "$WORK/repo" && tar -xf -)
cd "$WORK/repo" || exit 2
export GIT_CEILING_DIRECTORIES=$WORK PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
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
if echo "$OUTPUT" | grep -q "first bad commit $B"; then echo "FIRST-BAD OK: $B"; else echo "FIRST-BAD WRONG"; exit 1; fi
