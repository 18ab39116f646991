#!/usr/bin/env bash
# Issue 23, sections 1 and 2, on the GPU: each zoo bug of tests/zoo/zoo_gradient_reach.py and
# tests/zoo/zoo_autotune_reach.py through its intended cell, and its correct twin through the same cell,
# on --device cuda (one device call; a few minutes, most of it compiling).
#
#   bash bench/gpu/reach.sh                    # from the repository root, on the GPU machine
#   bash bench/gpu/reach.sh --profile nightly  # any bench/zoo_check.py option after it
#
# Expected (the interpreter gives the same rows: python bench/zoo_check.py --bugs ... --device interpreter):
#   zoo_rms_norm_rows_partials_per_sm      grad:shape:beyond-block  wrong/mismatch    twin honoured
#   zoo_rms_norm_rows_partials_floor       grad:shape:beyond-block  unsafe/oob-write  twin honoured
#   zoo_cross_entropy_grad_exp_overflow    grad:values:extreme      wrong/nan-mismatch twin honoured
#   zoo_layer_norm_autotuned_bwd_block_sum autotune:config2         wrong/mismatch    twin honoured
#   zoo_matmul_split_k_key_omits_k         autotune:key             wrong/mismatch    twin honoured
#   caught as intended: 5/5; correct twins passing: 5/5
# On CUDA the tuners benchmark for real (quick_benchmarks), so the split-K's key cell must catch the bug
# through its priming at K's neighbours, whatever split the timing favours; the LayerNorm's grad cells
# may catch it too there (the tuner may pick BLOCK_M > 1), which is fine: the row above is its config cell.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec "${PYTHON:-python3}" bench/zoo_check.py --device cuda \
    --bugs zoo_rms_norm_rows_partials,zoo_cross_entropy_grad_exp,zoo_layer_norm_autotuned_bwd_block,zoo_matmul_split_k_key "$@"
