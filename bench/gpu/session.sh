#!/bin/bash
# The GPU checks of one device call, as named steps; logs under $OUT/logs (packed into
# $OUT/logs.tar.gz at the end, since only a few files come back) and a summary in
# $OUT/summary.txt.  Run from the checkout root:  bash bench/gpu/session.sh STEP...
#
#   nightly1      the nightly command on GPU 0 only (one xdist worker), results + HTML
#   nightly2      the nightly command on both GPUs (one worker each): the throughput ratio
#   side          on GPU 1: large-index cell, 200 flakiness runs of the stochastic cells, their cost
#   hazards       crash / hang / compile-failure subjects with and without (bench/gpu/nightly_hazards.py)
#   sanitizer     compute-sanitizer memcheck over a crashing and an unmasked-store subject
#   zoo           every zoo bug on CUDA, caught by its intended cell, twins passing
#   bugfinding    the bug-finding benchmark on CUDA
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
L=$OUT/logs
mkdir -p "$L"
T0=$(date +%s)

note() { echo "$*" | tee -a "$OUT/summary.txt"; }
run_step() {  # name limit command...  (SIGINT at the limit, so pytest still writes what it has)
    local name=$1 limit=$2; shift 2
    local start; start=$(date +%s)
    note "== $name (limit ${limit}s, at +$((start - T0))s): $*"
    timeout -s INT --kill-after=30 "$limit" "$@" > "$L/$name.log" 2>&1
    local rc=$?
    note "   $name: rc=$rc in $(( $(date +%s) - start ))s"
    tail -n "${TAIL:-60}" "$L/$name.log" >> "$OUT/summary.txt"
}

for step in "$@"; do
    case $step in
        nightly1) CUDA_VISIBLE_DEVICES=0 run_step nightly1 "${N1_LIMIT:-230}" python3 -m triton_conformance.cli \
                      nightly --gpus 1 --seed 7 --results "$L/nightly1/results.json" ;;
        nightly2) run_step nightly2 "${N2_LIMIT:-250}" python3 -m triton_conformance.cli nightly \
                      --seed 7 --results "$L/nightly2/results.json" ;;
        side) ( export CUDA_VISIBLE_DEVICES=1
                run_step large_index 150 python3 bench/gpu/large_index.py --devices cuda --out "$L/large_index"
                run_step flakiness 240 python3 bench/stochastic.py flakiness --runs 200 --jobs 8 --device cuda
                run_step stochastic_cost 90 python3 bench/stochastic.py cost --device cuda --repeats 3 ) ;;
        side2) ( export CUDA_VISIBLE_DEVICES=1
                 run_step flakiness 120 python3 bench/stochastic.py flakiness --runs 200 --jobs 8 --device cuda
                 run_step sanitizer 130 python3 bench/gpu/nightly_hazards.py --step sanitizer --out "$L"
                 run_step bugfinding 250 python3 bench/bug_finding.py --device cuda --runs 3 --workers 6 \
                     --budget 190 --timeout 100 --gpucheck-site .gpucheck-site --out "$L/bug_finding" ) ;;
        hazards_bg) ( export CUDA_VISIBLE_DEVICES=1
                      run_step hazards "${HZ_LIMIT:-200}" python3 bench/gpu/nightly_hazards.py --step isolation \
                          --cells "${HZ_CELLS:-layout:contiguous}" --timeout 45 --out "$L" ) & SIDE_PID=$! ;;
        side_bg) PACK=0 bash "$0" side & SIDE_PID=$! ;;
        side2_bg) PACK=0 bash "$0" side2 & SIDE_PID=$! ;;
        wait_side) wait "${SIDE_PID:-0}" 2>/dev/null ;;
        hazards) run_step hazards "${HZ_LIMIT:-200}" python3 bench/gpu/nightly_hazards.py --step isolation \
                      --cells "${HZ_CELLS:-layout:contiguous}" --timeout 20 --out "$L" ;;
        sanitizer) run_step sanitizer 240 python3 bench/gpu/nightly_hazards.py --step sanitizer --out "$L" ;;
        zoo) run_step zoo 300 python3 bench/zoo_check.py --device cuda ;;
        bugfinding) run_step bugfinding 400 python3 bench/bug_finding.py --device cuda --out "$L/bug_finding" ;;
        *) note "unknown step $step" ;;
    esac
done
if [ "${PACK:-1}" = 1 ]; then
    tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$L"
fi
note "total $(( $(date +%s) - T0 ))s"
