#!/bin/bash
# bench/opdb_calibration.py in PROCS processes side by side, shard k/PROCS each, then the totals.
#   bash bench/gpu/opdb_shards.sh DEVICE PROCS MINUTES SEEDS LOGDIR [OPS]
# Each shard runs fresh seeds (its own) over its ops until MINUTES; its log is LOGDIR/opdb_K.log.  Prints
# every cell no precision verdict explains (with its replay line), then ops, cells, failing, explained
# and unexplained summed over the shards.  OPS: comma-separated op names (default: every declared op).
set -u
device=$1 procs=$2 minutes=$3 seeds=$4 dir=$5 ops=${6:-}
mkdir -p "$dir"
pids=()
for k in $(seq 1 "$procs"); do
    OMP_NUM_THREADS=1 python3 bench/opdb_calibration.py --device "$device" --seeds "$seeds" --minutes "$minutes" \
        --shard "$k/$procs" --ops "$ops" > "$dir/opdb_$k.log" 2>&1 &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
grep -h -B1 -A1 "NOT explained" "$dir"/opdb_*.log | grep -v '^--$' | head -n 120
grep -h "^seed " "$dir"/opdb_*.log | awk '{n++} END {print n " shard-seeds run (complete or stopped)"}'
grep -h " operations, .* cells, " "$dir"/opdb_*.log | awk '{ops+=$1; cells+=$3; failing+=$5; unexpl+=$7}
    END {print ops " operations, " cells " cells, " failing " failing, " failing - unexpl " explained, " unexpl \
         " not explained by a precision verdict"}'
