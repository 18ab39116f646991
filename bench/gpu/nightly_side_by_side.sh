#!/bin/bash
# Call 2: the nightly on one H200, seed 7, side by side in one call, each run with a cold Triton cache.
#   old   69a2a54 (before session 5), one worker
#   new   HEAD, the default (several workers sharing the GPU)
#   new1  HEAD, --workers-per-gpu 1
ROOT=$PWD
export GIT_CEILING_DIRECTORIES=$ROOT/.gpusnap PYTHONUNBUFFERED=1
R=$OUT/r; mkdir -p $R
S=$OUT/summary.txt
nvidia-smi --query-gpu=name,memory.used,utilization.gpu,clocks.sm --format=csv > $R/smi.txt 2>&1
nightly() {  # name dir limit args...
    local name=$1 dir=$2 limit=$3; shift 3
    rm -rf /tmp/tcache-$name; export TRITON_CACHE_DIR=/tmp/tcache-$name
    ( cd $ROOT/.gpusnap/$dir && rm -rf .conformance conformance-results
      nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader -lms 500 > $R/util-$name.csv 2>&1 &
      SMI=$!
      t0=$(date +%s.%N)
      PYTHONPATH=$PWD timeout -s INT --kill-after=20 $limit python3 -m triton_conformance.cli nightly --gpus 1 --seed 7 "$@" \
          --results $R/$name.json > $R/$name.log 2>&1
      rc=$?
      t1=$(date +%s.%N)
      kill $SMI
      echo "== $name ($dir $*): rc=$rc wall=$(python3 -c "print(round($t1-$t0,1))")s" >> $S
      grep -E "^nightly:|passed|failed" $R/$name.log | tail -3 >> $S )
}
nightly old old 200
nightly new new 150
nightly new1 new 230 --workers-per-gpu 1
cd $ROOT/.gpusnap/new && python3 bench/gpu/nightly_summary.py $R/old.json $R/new.json $R/new1.json >> $S 2>&1
python3 - "$R" >> $S <<'PY'
import csv, statistics, sys
for name in ("old", "new", "new1"):
    try:
        u = [float(r[0].strip().rstrip(" %")) for r in csv.reader(open(f"{sys.argv[1]}/util-{name}.csv")) if r and r[0].strip()[0].isdigit()]
        m = [float(r[1].strip().split()[0]) for r in csv.reader(open(f"{sys.argv[1]}/util-{name}.csv")) if len(r) > 1 and r[0].strip()[0].isdigit()]
        print(f"{name}: GPU utilisation median {statistics.median(u)}%, mean {statistics.mean(u):.1f}%, memory max {max(m):.0f} MiB over {len(u)} samples")
    except Exception as exc:
        print(name, "no utilisation samples", exc)
PY
cd $OUT && tar -czf results.tar.gz r && rm -rf r
