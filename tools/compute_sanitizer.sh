#!/usr/bin/env bash
# `make compute-sanitizer` (needs a GPU): run the GPU test modules that launch our kernels under
# compute-sanitizer's memcheck, racecheck and synccheck. Exit status 0 only if no tool reported
# an error and every test passed. Logs: build/compute-sanitizer/<tool>[.<shard>].log (SHARDS=n splits
# the tests over n sanitizer processes run at once: racecheck is slow); extra arguments go
# to pytest (e.g. -x). A -k EXPR of yours selects within what the script keeps: it is joined
# to the script's own -k as "(EXPR) and not (left out)" (pytest would keep only the last -k).
# Under a tool, loading the module and running a few flash_wgmma tests takes about three minutes.
#
# What runs, and what is left out:
#   tests/kernels/test_attention_gpu.py   the attention kernels (naive, flash in both its versions,
#                                         flash_tc), every dtype, head_dim and edge shape
#   tests/kernels/test_harness_kernels_gpu.py  every harness kernel once: spin, empty, probe,
#                                         copy/ffma/mma/chase workloads, read/L2 flush/gate (through
#                                         benchmark in each mode), the SM clock probe
#   tests/kernels/test_attention_pool_gpu.py  pooled results read on other streams
#   tests/kernels/test_attention_wgmma_gpu.py  the sm_90a kernel (TMA, mbarriers, wgmma), on Hopper
#   tests/regions/test_regions_gpu.py     regions on events and streams
#   tests/bench/test_bench_gpu.py         benchmark's own kernels under load
# Left out: tests that fault on purpose (sticky errors: memcheck would report the fault they
# cause), fork, torch/cupy interop (not our kernels), and tests that need CUPTI (CUPTI cannot
# attach while compute-sanitizer does: tracing and counters modules, clock='cupti'), and timing
# assertions (a spin's duration under instrumentation). CUDA API errors are not reported: the
# tests cause some on purpose (an allocation too large, an event polled before it completed) and
# check that they are raised; memcheck's subject here is the kernels' memory accesses. racecheck
# and synccheck are slow on shared-memory kernels: they skip the 4097-long sequences.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
SANITIZER=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")}
OUT=build/compute-sanitizer
mkdir -p "$OUT"
MODULES="tests/kernels/test_attention_gpu.py tests/kernels/test_attention_pool_gpu.py
         tests/kernels/test_attention_wgmma_gpu.py
         tests/kernels/test_harness_kernels_gpu.py
         tests/regions/test_regions_gpu.py tests/bench/test_bench_gpu.py"
# timing assertions: durations and noise under instrumentation are not the kernels' own
TIMING="reads_requested_time or times_that_stream or handles_agree or event_clock_still_available
        or cold_is_slower or graph_mode_on_a_launch_bound or releases_the_gate
        or timed_without_the_gate or nested_gpu_times_are_ordered or exit_does_not_wait_for_the_gpu
        or noise_target"
# need CUPTI (which kernel impl="auto" launched, through profile(); a refusal that only the CUPTI
# clock gives: under the tool clock="auto" falls back to events and times the empty interval)
CUPTI_TESTS="auto_runs_flash_wgmma or without_gpu_work_is_refused"
SKIP="sticky or fork or torch or cupy or cupti or $CUPTI_TESTS or ground_truth or $(echo $TIMING)"
TOOLS=${TOOLS:-memcheck racecheck synccheck}    # e.g. TOOLS=memcheck
TOOL_TIMEOUT=${TOOL_TIMEOUT:-0}                 # seconds per tool; 0: no limit
SHARDS=${SHARDS:-1}     # tests split round-robin over this many sanitizer processes run at once
if ! [[ "$SHARDS" =~ ^[1-9][0-9]*$ ]]; then
    echo "compute_sanitizer.sh: SHARDS must be a positive integer, got '$SHARDS'" >&2
    exit 2
fi

# run_one TOOL LOG pytest-args...: one compute-sanitizer process; prints its exit status meaning
run_one() {
    local tool=$1 log=$2; shift 2
    timeout "$TOOL_TIMEOUT" "$SANITIZER" --tool "$tool" --error-exitcode 86 --target-processes all \
        --report-api-errors no --log-file "$log" --print-limit 100 \
        "$PYTHON" -m pytest -q -p no:cacheprovider "$@"
}

# a -k of the caller's, taken out of the arguments and joined to the script's own below
user_k=""
rest=()
while [ $# -gt 0 ]; do
    case $1 in
        -k) [ $# -ge 2 ] || { echo "compute_sanitizer.sh: -k needs an expression" >&2; exit 2; }
            user_k=$2; shift 2 ;;
        -k*) user_k=${1#-k}; shift ;;
        *) rest+=("$1"); shift ;;
    esac
done
set -- ${rest[@]+"${rest[@]}"}

status=0
for tool in $TOOLS; do
    skip=$SKIP
    [ "$tool" != memcheck ] && skip="$skip or 4097"
    echo "== compute-sanitizer --tool $tool ($SHARDS process(es))"
    # shellcheck disable=SC2086
    keep="not ($skip)"
    [ -n "$user_k" ] && keep="($user_k) and $keep"
    select=(-m gpu $MODULES -k "$keep")
    if [ "$SHARDS" -le 1 ]; then
        run_one "$tool" "$OUT/$tool.log" "${select[@]}" "$@"
        codes=($?)
        logs=("$OUT/$tool.log")
    else
        # node ids, then shard k takes every SHARDS-th one starting at k
        "$PYTHON" -m pytest -q -p no:cacheprovider --collect-only "${select[@]}" "$@" \
            | grep '::' > "$OUT/$tool.ids"
        pids=(); logs=()
        for ((k = 0; k < SHARDS; k++)); do
            awk -v n="$SHARDS" -v k="$k" '(NR - 1) % n == k' "$OUT/$tool.ids" > "$OUT/$tool.$k.ids"
            mapfile -t ids < "$OUT/$tool.$k.ids"
            [ ${#ids[@]} -eq 0 ] && continue
            run_one "$tool" "$OUT/$tool.$k.log" "${ids[@]}" "$@" > "$OUT/$tool.$k.out" 2>&1 &
            pids+=($!); logs+=("$OUT/$tool.$k.log")
        done
        codes=()
        for pid in "${pids[@]}"; do wait "$pid"; codes+=($?); done
        for ((k = 0; k < SHARDS; k++)); do tail -n 3 "$OUT/$tool.$k.out" 2>/dev/null; done
    fi
    for rc in "${codes[@]}"; do
        case $rc in
            0) echo "$tool: no errors" ;;
            86) echo "$tool: ERRORS (see $OUT/$tool*.log)"; status=1 ;;
            124) echo "$tool: stopped after TOOL_TIMEOUT=${TOOL_TIMEOUT}s (see $OUT/$tool*.log)"; status=1 ;;
            *) echo "$tool: tests failed (exit $rc; see above and $OUT/$tool*.log)"; status=1 ;;
        esac
    done
    grep -sh "ERROR SUMMARY\|RACECHECK SUMMARY" "${logs[@]}" || true
done
exit $status
