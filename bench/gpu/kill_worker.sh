#!/bin/bash
# One xdist worker of the nightly killed with kill -9 mid-run, on a GPU shared by 4 workers: its
# replacement claims the freed slot of the same GPU, and no other worker's results are lost.
# Usage: bash kill_worker.sh OUTDIR BASELINE.json   (from a checkout root)
out=$1 base=$2; mkdir -p "$out"
rm -rf .conformance; export TRITON_CACHE_DIR=/tmp/tcache-kill; rm -rf $TRITON_CACHE_DIR
PYTHONPATH=$PWD python3 -m triton_conformance.cli nightly --gpus 1 --workers-per-gpu 4 --seed 7 \
    --results "$out/kill.json" > "$out/kill.log" 2>&1 &
main=$!
sleep 25
locks=$(ls -d /tmp/triton-conformance-gpus-$(id -u)/*/ 2>/dev/null | tail -1)
echo "lock dir $locks" > "$out/kill.txt"
for f in "$locks"slot*.lock; do echo "before: $(basename $f): $(cat $f)" >> "$out/kill.txt"; done
victim=$(awk '{print $1}' "${locks}slot1.lock")
echo "killing worker pid $victim (slot1) at +25 s; it was running:" >> "$out/kill.txt"
ps -o pid,etimes,args --ppid "$victim" 2>/dev/null | head -5 >> "$out/kill.txt"
kill -9 "$victim"
wait $main; echo "nightly rc=$?" >> "$out/kill.txt"
for f in "$locks"slot*.lock; do echo "after: $(basename $f): $(cat $f)" >> "$out/kill.txt"; done
grep -E "passed|failed|crashed|replacing|worker" "$out/kill.log" | tail -8 >> "$out/kill.txt"
python3 - "$out/kill.json" "$base" >> "$out/kill.txt" <<'PY'
import json, sys
k = {(r["subject"], r["cell"]): r for r in json.load(open(sys.argv[1]))["results"]}
b = {(r["subject"], r["cell"]): r for r in json.load(open(sys.argv[2]))["results"]}
crash = [f"{s}[{c}]: {r['finding']}" for (s, c), r in k.items() if r["outcome"] == "crash"]
key = lambda r: (r["outcome"], r.get("finding"), json.dumps((r.get("counterexample") or {}).get("dims")))
differ = sorted(f"{s}[{c}]" for (s, c) in set(k) | set(b) if (s, c) not in k or (s, c) not in b or key(k[(s, c)]) != key(b[(s, c)]))
print(f"killed run: {len(k)} cells (baseline {len(b)}); crash cells {crash}; cells differing from the baseline "
      f"(same seed, no kill): {len(differ)} {differ[:10]}")
PY
