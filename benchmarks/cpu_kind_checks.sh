#!/usr/bin/env bash
# The executor's per-CPU choices, measured on the CPU this runs on, in one command: each choice
# that a CPU kind has not measured yet is one binary under two environments, interleaved
# (benchmarks/ab_compare.py), so a session that lands on a new kind spends its time reading
# figures rather than building scratch copies.
#   bash benchmarks/cpu_kind_checks.sh [--build DIR] [--out FILE] [--rounds N] [--fast-read GBPS] [--checks "stream_cache sweep_order run_ahead no_march peaks"]
# - stream_cache: the first pass streaming into L1 (prefetcht0, 1 KiB ahead along each row)
#   against L2 (prefetcht1, 8 KiB over the block); MOE_ROUTING_STREAM_CACHE=l1 / l2.
# - sweep_order: every token group over all blocks before the next (groups) against every
#   group over one block before the next (blocks); MOE_ROUTING_SWEEP_ORDER=groups / blocks.
# - run_ahead: the second pass asking for the whole block the core takes next (block) against
#   each later pass asking for one row of it (row); MOE_ROUTING_RUN_AHEAD=block / row.
# - no_march: the executor built as a consumer builds it (no -march) against the native build
#   (issue #20 asks for within 10%).
# - peaks: one core's FMA and vdpbf16ps peaks and the read reference, 5 repetitions.
# Each check runs executor/qwen3 (memory-bound, with the paired read) and executor/qwen3-compute
# at n = 1, 4, 16, 64 (run_ahead also executor/active:8: 16 tokens on each of 8 experts, four
# passes each with 4-token tiles). With the defaults (8 rounds x 3 repetitions) the five take about 25 min on
# 2 cores; the machine must be otherwise idle. --fast-read sorts paired fractions by the memory's
# state (over GBPS counts as fast) where the read flips between two (docs/benchmarks/executor_zen4.md).
# Writes FILE (default BUILD/cpu_kind_checks.md) with the machine, compiler and commit.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build" out="" rounds=8 fast_read="" checks="stream_cache sweep_order run_ahead no_march peaks"
while (($#)); do
  case "$1" in
    --build) build=$2; shift ;;
    --out) out=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --fast-read) fast_read=$2; shift ;;
    --checks) checks=$2; shift ;;
    *) echo "cpu_kind_checks.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "cpu_kind_checks.sh: --rounds $rounds: must be a whole number from 1" >&2; exit 2; }
for check in $checks; do
  case $check in stream_cache | sweep_order | run_ahead | no_march | peaks) ;;
    *) echo "cpu_kind_checks.sh: --checks names $check: must be among stream_cache sweep_order run_ahead no_march peaks" >&2; exit 2 ;;
  esac
done
out=${out:-$build/cpu_kind_checks.md}
source "$root/benchmarks/run_context.sh"
[ -f "$build/CMakeCache.txt" ] || cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
build_log="$build/cpu_kind_checks_build.log"
cmake --build "$build" --target moe_routing_executor_benchmark moe_routing_executor_benchmark_no_march >"$build_log" 2>&1 ||
  { tail -40 "$build_log" >&2; echo "cpu_kind_checks.sh: the build failed (all of it in $build_log)" >&2; exit 1; }
native="$build/benchmarks/moe_routing_executor_benchmark"
no_march="$build/benchmarks/moe_routing_executor_benchmark_no_march"

layers='^executor/qwen3(-compute)?/n:(1|4|16|64)/'
compare=(python3 "$root/benchmarks/ab_compare.py" --rounds "$rounds" --repetitions 3 --min-time 0.3)
[ -z "$fast_read" ] || compare+=(--fast-read "$fast_read")

{
  echo "# The executor's per-CPU choices on $(lscpu | sed -n 's/^Model name: *//p' | head -1)"
  echo
  echo "- **Machine**: $(machine_summary); CPU family $(sed -n 's/^cpu family\s*: //p' /proc/cpuinfo | head -1)" \
       "model $(sed -n 's/^model\s*: //p' /proc/cpuinfo | head -1); AMX: $(grep -q amx_tile /proc/cpuinfo && echo yes || echo no)," \
       "AVX512_BF16: $(grep -q avx512_bf16 /proc/cpuinfo && echo yes || echo no)"
  echo "- **Compiler**: $(build_compiler "$build")"
  echo "- **Commit**: $(source_commit "$root"), $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "- **How**: \`benchmarks/cpu_kind_checks.sh --rounds $rounds${fast_read:+ --fast-read $fast_read} --checks \"$checks\"\`; time of the second setting over the first"
  echo
} >"$out"

# A check that fails stops the script (set -e, pipefail); the report then says where.
trap 'echo "**cpu_kind_checks.sh stopped with an error in the section above: its tables are missing or incomplete.**" >>"$out"' ERR
section() {  # section TITLE: a heading and the comparison's tables, appended to the report
  echo "== $1" >&2
  { echo "## $1"; echo; cat; echo; } >>"$out"
}
for check in $checks; do
  case $check in
    stream_cache)
      "${compare[@]}" "$native" "$native" --before-env MOE_ROUTING_STREAM_CACHE=l1 \
        --after-env MOE_ROUTING_STREAM_CACHE=l2 --filter "$layers" | section "Stream cache: l2 over l1" ;;
    sweep_order)
      "${compare[@]}" "$native" "$native" --before-env MOE_ROUTING_SWEEP_ORDER=groups \
        --after-env MOE_ROUTING_SWEEP_ORDER=blocks --filter "$layers" | section "Sweep order: blocks over groups" ;;
    run_ahead)
      "${compare[@]}" "$native" "$native" --before-env MOE_ROUTING_RUN_AHEAD=block \
        --after-env MOE_ROUTING_RUN_AHEAD=row --filter "$layers|^executor/active:8/" |
        section "Run-ahead: one row per later pass over the whole block" ;;
    no_march)
      "${compare[@]}" "$native" "$no_march" --filter "$layers|^bandwidth/read" |
        section "A consumer's build (no -march) over the native build" ;;
    peaks)
      "$native" --benchmark_filter='^(compute/(fma|fma512|bf16_dot)_peak_one_core|bandwidth/read)' --benchmark_repetitions=5 \
        --benchmark_report_aggregates_only=true --benchmark_counters_tabular=true 2>&1 |
        grep -E '^Benchmark|median|kernels|cpu_' | sed 's/^/    /' | section "Peaks and the read (medians of 5)" ;;
  esac
done
echo "cpu_kind_checks.sh: wrote $out" >&2
