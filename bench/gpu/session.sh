#!/bin/bash
# The GPU checks of one device call, as named steps; logs under $OUT/logs (packed into
# $OUT/logs.tar.gz at the end, since only a few files come back) and a summary in
# $OUT/summary.txt.  Run from the checkout root:  bash bench/gpu/session.sh STEP...
#
#   nightly1      the nightly command on GPU 0 only (one xdist worker), results + HTML
#   nightlyw      the nightly command on GPU 0 with NW [3] xdist workers sharing it
#   profile       cProfile of `run --device cuda --profile nightly --isolation none` over PROFILE_CELLS, PROFILE_SEED [7]
#   nightly2      the nightly command on both GPUs (one worker each): the throughput ratio
#   side          on GPU 1: large-index cell, 200 flakiness runs of the stochastic cells, their cost
#   hazards       crash / hang / compile-failure subjects with and without (bench/gpu/nightly_hazards.py)
#   sanitizer     compute-sanitizer memcheck over a crashing and an unmasked-store subject
#   zoo           every zoo bug on CUDA, caught by its intended cell, twins passing
#   bugfinding    the bug-finding benchmark on CUDA
#   fleet         `fleet` on a local Ray cluster over this machine's GPU, then the serial nightly over the
#                 same subjects and seed, and the two matrices compared (carry .whl: docs/fleet.md)
#   canary        the main job on --device interpreter with this image's triton and numpy: exit 4, one line
#   nightlyseed   the nightly command on GPU 0 at seed SEED [23], WPG [auto] workers sharing it
#   reach         issue 23's zoo bugs and twins on CUDA (bench/gpu/reach.sh)
#   timeline      the nightly as splitnightly runs it, at each of TL_SEEDS [47], with bench/gpu/timeline.py: when each
#                 process started, configured, collected, got its cell worker, ran its first and last cell
#                 (bench/gpu/timeline_summary.py), then nightly_summary.py
#   phases        bench/gpu/cell_phases.py over PHASES_SUBJECTS in one process on CUDA, SEED [47]: each cell's set-up,
#                 examples, time between them and tear-down
#   startup       where a worker's start-up goes on CUDA (bench/gpu/startup.py: imports, collection, a CUDA
#                 context, a cell worker, STARTUP_WORKERS [12] at once)
#   splitnightly  the nightly on GPU 0 at each of SPLIT_SEEDS [47 1201 3307], each with an empty Triton cache and
#                 no example database, long subjects split by the seed-47 H200 durations
#                 (bench/results/h200-2026-12-03-session12/nightly_s47_results.json.gz), then nightly_summary.py's
#                 cost model
#   lice          the large-index cell of the cross-entropy subjects on CUDA (no harness error)
#   calib         torch's own operations as subjects on CUDA, fresh nightly seeds for CALIB_MINUTES [3]
#                 (bench/calibration.py)
#   torchprec     what torch's own CUDA cumsum, fp16 matmul and rms_norm do (bench/gpu/torch_cuda_precision.py)
#   fp8zoo        the fp8 casts, the fp8 zoo and twins, the fp8 dot's accumulator (bench/gpu/fp8_zoo.py)
#   firstbad      two recorded runs at two commits and `history first-bad` (bench/gpu/history_first_bad.sh;
#                 SQLAlchemy from .whl)
#   fp8calib      torch's fp8 operations as calibration subjects (_scaled_mm, fast and not; the e4m3 cast), FC_SEEDS [3]
#                 fresh nightly seeds within FC_MINUTES [1.5]
#   servingfp8    examples/serving_fp8 (vLLM's and SGLang's fp8 kernels; carry examples/serving_fp8/sources) on CUDA,
#                 nightly profile; servingli: its large_index_check.py (2^31 + 1024 elements per quantizer)
#   tutorials     examples/triton_tutorials (Triton's tutorials 01-09 at c147f098; carry
#                 examples/triton_tutorials/sources) on CUDA, nightly profile; TUT_K [all] a pytest -k selection
#   tutchecks     bench/gpu/tutorial_cuda_checks.py size1, ln-grad, ws-causal, assume-broadcast (one process each)
#   opdb          torch's float op_db ops declared generically (bench/opdb_calibration.py) on CUDA, OPDB_PROCS [14]
#                 shards side by side, fresh seeds for OPDB_MINUTES [3.2] each (bench/gpu/opdb_shards.sh);
#                 OPDB_OPS [all] comma-separated op names
#   falsealarms   the correct kernels at FA_SEEDS [20] fresh nightly seeds, FA_WORKERS [14] processes
#                 (bench/gpu/false_alarms_pool.py); FA_ROOT [.] another checkout's code (before/after)
set -u
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1  # wheels carried to /tmp/site stay visible
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
    LAST_RC=$rc
    note "   $name: rc=$rc in $(( $(date +%s) - start ))s"
    tail -n "${TAIL:-60}" "$L/$name.log" >> "$OUT/summary.txt"
}

# The fleet step (docs/fleet.md, "Ray on the GPU machine"): Ray is not on the GPU machine, so the call
# carries .whl (ray 2.60.0 without its Java jar, and jsonschema's four wheels) and, where python3 has no
# ray, they are installed to /tmp/site.  A local Ray instance (the command's ray.init()) over the GPU: one task per shard, each
# asking num_gpus=1 and accelerator_type=H200 (or the custom resource, if Ray finds no such label), so
# the shards take the one GPU in turn.  Then `nightly --gpus 1` over the same subjects, profile and seed,
# and the matrices compared cell by cell (outcome, finding, counterexample dims) into the summary.
#   FLEET_SUBJECTS  [add gemv_textbook softmax_block1024: one a shard of 3, as the battery splits]
#   FLEET_SHARDS [3]  FLEET_DEVICES [H200]  FLEET_PROFILE [nightly]  FLEET_SEED [7]  FLEET_CPUS [shards]
#   FLEET_THREADS [8]: OMP_NUM_THREADS of both runs (Ray would give its workers 1, nightly 16)
#   FLEET_LIMIT [240]  FLEET_SERIAL_LIMIT [180]
# FLEET_DEVICES=interpreter runs both on the CPU (the serial run is then `run --device interpreter`).
# The subjects reach the shards as PYTEST_ADDOPTS=--conformance-cell=...: fleet's own `-- PYTEST_ARGS`
# would put each shard's --device/--shard/--results after its `--` too.
fleet_step() {
    local dir=$L/fleet subjects=${FLEET_SUBJECTS:-add gemv_textbook softmax_block1024}
    local shards=${FLEET_SHARDS:-3} devices=${FLEET_DEVICES:-H200} profile=${FLEET_PROFILE:-nightly}
    local seed=${FLEET_SEED:-7} s d mode=accelerator stash=""
    mkdir -p "$dir"
    if ls .whl/*.whl > /dev/null 2>&1 && ! python3 -c 'import ray' 2> /dev/null; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
            .whl/*.whl > "$L/fleet_pip.log" 2>&1 || { note "fleet: pip install .whl failed"; tail -n 20 "$L/fleet_pip.log" \
            >> "$OUT/summary.txt"; return; }
        export PYTHONPATH=$PWD:/tmp/site
    fi
    # No token auth on a one-machine cluster, no usage report (no network), no Ray OOM killer (a GPU
    # cell's host peak, MemTotal read low); the same CPU threads for both runs.
    export RAY_AUTH_MODE=${RAY_AUTH_MODE:-disabled} RAY_USAGE_STATS_ENABLED=0 RAY_memory_monitor_refresh_ms=0 \
        OMP_NUM_THREADS=${FLEET_THREADS:-8}
    run_step fleet_ray 120 python3 -c 'import json, ray; print("ray", ray.__version__, ray.__file__, flush=True)
ray.init(include_dashboard=False, log_to_driver=False); r = ray.cluster_resources(); ray.shutdown()
print("RESOURCES", json.dumps(r, sort_keys=True))'
    local resources; resources=$(grep '^RESOURCES' "$L/fleet_ray.log")
    [ "$LAST_RC" = 0 ] && [ -n "$resources" ] || { note "fleet: Ray did not start (fleet_ray.log); no fleet run"; return; }
    for d in ${devices//,/ }; do
        [ "$d" = interpreter ] && continue
        case $resources in *'"GPU"'*) ;; *) note "fleet: Ray sees no GPU; no fleet run"; return ;; esac
        case $resources in *"\"accelerator_type:$d\""*) ;; *) mode=custom
            note "fleet: Ray labels no node accelerator_type:$d: the shards are placed by device:$d instead" ;; esac
    done
    local sel="" cells=()
    for s in $subjects; do sel+=" --conformance-cell=$s"; cells+=(--cell "$s"); done
    # Hypothesis's example database (nightly profile) would let the second run replay the first's failures.
    if [ -d .conformance/examples ]; then stash=.conformance/examples.before-fleet; rm -rf "$stash"
        mv .conformance/examples "$stash"; fi
    PYTEST_ADDOPTS="${sel# }" run_step fleet "${FLEET_LIMIT:-240}" python3 -m triton_conformance.cli fleet \
        --devices "$devices" --shards "$shards" --resources "$mode" --local-cpus "${FLEET_CPUS:-$shards}" \
        --profile "$profile" --seed "$seed" -o "$dir/matrix.json" --workdir "$dir/shards"
    rm -rf .conformance/examples
    local serial=(nightly --gpus 1 --workers-per-gpu 1)
    [ "$devices" = interpreter ] && serial=(run --device interpreter)
    run_step fleet_serial "${FLEET_SERIAL_LIMIT:-180}" python3 -m triton_conformance.cli "${serial[@]}" \
        --profile "$profile" --seed "$seed" "${cells[@]}" --fresh --results "$dir/serial.json"
    rm -rf .conformance/examples
    [ -n "$stash" ] && mv "$stash" .conformance/examples
    note "$(python3 - "$dir/matrix.json" "$dir/serial.json" <<'EOF'
import json, sys
try:
    fleet, serial = (json.load(open(p)) for p in sys.argv[1:3])
except (OSError, ValueError) as exc:
    sys.exit(print(f"fleet vs serial: no comparison: {exc}"))
label = serial["environment"].get("device_label")
def matrix(doc, device=None):
    return {(r["subject"], r["cell"]): (r["outcome"], r.get("finding"), json.dumps((r.get("counterexample") or {}).get("dims")))
            for r in doc["results"] if device is None or r.get("device") == device}
a, b = matrix(fleet, label if "devices" in fleet else None), matrix(serial)
differ = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
counts = {(r["subject"], r["cell"]): r.get("examples") for r in serial["results"]}
examples = sum(r.get("device") in (None, label) and (r["subject"], r["cell"]) in counts
               and r.get("examples") != counts[(r["subject"], r["cell"])] for r in fleet["results"])
f, e = fleet.get("fleet") or {}, fleet["environment"]
print(f"fleet vs serial on {label} (profile {e.get('profile')}/{serial['environment'].get('profile')}, seed "
      f"{e.get('seed')}/{serial['environment'].get('seed')}): {len(a)} and {len(b)} cells, "
      f"{sum(a[k] == b[k] for k in set(a) & set(b))} identical, {len(differ)} differ"
      f" (performance cells among them: {sum(k[1] == 'performance' for k in differ)}); example counts differ in"
      f" {examples}; fleet: {len(f.get('tasks') or ())} tasks, {sum(map(len, (f.get('attempts') or {}).values()))}"
      f" attempts, lost {f.get('lost')}; divergences {len(fleet.get('divergences') or ())}")
for k in differ[:15]:
    print(f"  {k[0]}[{k[1]}]: fleet {a.get(k)} serial {b.get(k)}")
EOF
)"
    TAIL=30 run_step fleet_diff 60 python3 -m triton_conformance.cli diff "$dir/serial.json" "$dir/matrix.json"
}

for step in "$@"; do
    case $step in
        nightly1) rm -rf .conformance/examples
                  CUDA_VISIBLE_DEVICES=0 run_step nightly1 "${N1_LIMIT:-230}" python3 -m triton_conformance.cli \
                      nightly --gpus 1 --workers-per-gpu 1 --seed 7 --results "$L/nightly1/results.json" ;;
        nightlyw) rm -rf .conformance/examples  # the nightly profile's database would replay an earlier run's failures
                  CUDA_VISIBLE_DEVICES=0 run_step "nightlyw${NW:-3}" "${NW_LIMIT:-200}" python3 -m triton_conformance.cli \
                      nightly --gpus 1 -n "${NW:-3}" --seed 7 --results "$L/nightlyw${NW:-3}/results.json" ;;
        profile) rm -rf .conformance/examples
                 CUDA_VISIBLE_DEVICES=0 run_step profile "${PROFILE_LIMIT:-200}" python3 -m cProfile -o "$L/profile.pstats" \
                     -m triton_conformance.cli run --device cuda --profile nightly --seed "${PROFILE_SEED:-7}" --isolation none --fresh \
                     ${PROFILE_CELLS:---cell softmax --cell layer_norm --cell add} --results "$L/profile/results.json"
                 python3 -c 'import pstats, sys; s = pstats.Stats(sys.argv[1]); s.sort_stats("cumulative").print_stats(70)
s.sort_stats("tottime").print_stats(50)' "$L/profile.pstats" > "$L/profile_top.txt" 2>&1 ;;
        nightly2) run_step nightly2 "${N2_LIMIT:-250}" python3 -m triton_conformance.cli nightly \
                      --workers-per-gpu 1 --seed 7 --results "$L/nightly2/results.json" ;;
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
        fleet) ( fleet_step ) ;;
        canary) run_step canary 180 python3 -m triton_conformance.cli run --device interpreter --profile ci \
                    --cell add --results "$L/canary/results.json" ;;
        nightlyseed) rm -rf .conformance/examples
                     CUDA_VISIBLE_DEVICES=0 run_step "nightly_s${SEED:-23}_w${WPG:-auto}" "${NS_LIMIT:-200}" \
                         python3 -m triton_conformance.cli nightly --gpus 1 --workers-per-gpu "${WPG:-auto}" \
                         --seed "${SEED:-23}" --fresh --results "$L/nightly_s${SEED:-23}_w${WPG:-auto}/results.json"
                     python3 bench/gpu/nightly_summary.py "$L/nightly_s${SEED:-23}_w${WPG:-auto}/results.json" \
                         >> "$OUT/summary.txt" 2>&1 ;;
        timeline) gunzip -c bench/results/h200-2026-12-03-session12/nightly_s47_results.json.gz > "$L/s47_durations.json"
                  for seed in ${TL_SEEDS:-47}; do
                      rm -rf .conformance/examples
                      TRITON_CACHE_DIR=$(mktemp -d) CONFORMANCE_TIMELINE_DIR="$L/timeline_s$seed" \
                          PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" CUDA_VISIBLE_DEVICES=0 \
                          run_step "timeline_s$seed" "${NS_LIMIT:-120}" python3 -m triton_conformance.cli nightly --gpus 1 \
                          --seed "$seed" --fresh --shard-durations "$L/s47_durations.json" \
                          --results "$L/timeline_s$seed/results.json" -- -p bench.gpu.timeline
                      python3 bench/gpu/timeline_summary.py "$L/timeline_s$seed" "$L/timeline_s$seed/results.json" \
                          >> "$OUT/summary.txt" 2>&1
                      python3 bench/gpu/nightly_summary.py --workers 12 "$L/timeline_s$seed/results.json" \
                          >> "$OUT/summary.txt" 2>&1
                  done ;;
        phases) rm -rf .conformance/examples
                TRITON_CACHE_DIR=$(mktemp -d) CUDA_VISIBLE_DEVICES=0 run_step phases "${PHASES_LIMIT:-200}" \
                    python3 bench/gpu/cell_phases.py --device cuda --profile nightly --seed "${SEED:-47}" \
                    ${PHASES_SUBJECTS:-add adamw tma_matmul static_quant_e5m2 matmul rms_norm} ;;
        startup) run_step startup 90 python3 bench/gpu/startup.py --device cuda --workers "${STARTUP_WORKERS:-12}" \
                     --repeats 2 ;;
        splitnightly) gunzip -c bench/results/h200-2026-12-03-session12/nightly_s47_results.json.gz > "$L/s47_durations.json"
                      for seed in ${SPLIT_SEEDS:-47 1201 3307}; do
                          rm -rf .conformance/examples
                          TRITON_CACHE_DIR=$(mktemp -d) CUDA_VISIBLE_DEVICES=0 run_step "split_s$seed" "${NS_LIMIT:-100}" \
                              python3 -m triton_conformance.cli nightly --gpus 1 --seed "$seed" --fresh \
                              --shard-durations "$L/s47_durations.json" \
                              --results "$L/split_s$seed/results.json"
                          python3 bench/gpu/nightly_summary.py --workers 12 --log "$L/split_s$seed.log" \
                              "$L/split_s$seed/results.json" >> "$OUT/summary.txt" 2>&1
                      done ;;
        fp8zoo) run_step fp8zoo "${FP8_LIMIT:-240}" python3 bench/gpu/fp8_zoo.py --device cuda ;;
        firstbad) run_step firstbad "${FB_LIMIT:-240}" bash bench/gpu/history_first_bad.sh cuda .whl ;;
        reach) run_step reach "${REACH_LIMIT:-300}" bash bench/gpu/reach.sh ;;
        lice) run_step lice 200 python3 bench/gpu/large_index_cross_entropy.py --devices cuda --out "$L/lice" ;;
        torchprec) run_step torchprec 120 python3 bench/gpu/torch_cuda_precision.py ;;
        calib) run_step calib "${CALIB_LIMIT:-240}" python3 bench/calibration.py --device cuda \
                   --seeds "${CALIB_SEEDS:-200}" --minutes "${CALIB_MINUTES:-3}" ;;
        opdb) run_step opdb "${OPDB_LIMIT:-240}" bash bench/gpu/opdb_shards.sh cuda "${OPDB_PROCS:-14}" \
                  "${OPDB_MINUTES:-3.2}" "${OPDB_SEEDS:-50}" "$L/opdb" "${OPDB_OPS:-}" ;;
        falsealarms) rm -rf .conformance/examples
                     run_step "falsealarms_${FA_NAME:-new}" "${FA_LIMIT:-420}" python3 bench/gpu/false_alarms_pool.py \
                         --seeds "${FA_SEEDS:-20}" --workers "${FA_WORKERS:-14}" --profile nightly --device cuda \
                         --root "${FA_ROOT:-.}" --out "$L/fa_${FA_NAME:-new}.jsonl" ;;
        fp8calib) run_step fp8calib "${FC_LIMIT:-120}" python3 bench/calibration.py --device cuda \
                      --subjects torch_scaled_mm,torch_to_float8 --seeds "${FC_SEEDS:-3}" --minutes "${FC_MINUTES:-1.5}" ;;
        servingfp8) ( cd examples/serving_fp8 && run_step servingfp8 "${SF_LIMIT:-150}" python3 -m triton_conformance.cli \
                        run --device cuda --profile nightly -n 4 --fresh --results "$L/serving_fp8/results.json" ) ;;
        tutorials) ( cd examples/triton_tutorials && run_step tutorials "${TUT_LIMIT:-420}" python3 -m triton_conformance.cli \
                       run --device cuda --profile nightly -n "${TUT_N:-8}" --fresh --results "$L/triton_tutorials/results.json" \
                       ${TUT_K:+-- -k "$TUT_K"} ) ;;
        tutchecks) for check in size1 ln-grad ws-causal assume-broadcast; do
                       ( cd examples/triton_tutorials && run_step "tutcheck_$check" 120 python3 \
                             ../../bench/gpu/tutorial_cuda_checks.py "$check" )
                   done ;;
        servingli) ( cd examples/serving_fp8 && run_step servingli "${SL_LIMIT:-90}" python3 large_index_check.py ) ;;
        bugfinding) run_step bugfinding 400 python3 bench/bug_finding.py --device cuda --out "$L/bug_finding" ;;
        *) note "unknown step $step" ;;
    esac
done
if [ "${PACK:-1}" = 1 ]; then
    tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$L"
fi
note "total $(( $(date +%s) - T0 ))s"
