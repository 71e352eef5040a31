#!/usr/bin/env bash
# Runs the benchmark suites with --benchmark_out JSON and turns the JSON into the Markdown
# tables and SVG plots of docs/benchmarks/ (benchmarks/*_report.py).
#   bash benchmarks/run_benchmarks.sh [--smoke] [--build DIR] [--out DIR] [--suites "routing executor layer cuda_routing"]
# Full mode: medians of 5 repetitions (3 for cuda_routing), interleaved in random order.
# On a 2-core machine the routing grid (2,520 benchmarks) and its target run take 23-30 min, the executor and layer suites
# about 9 min together. cuda_routing (not in the default list) needs a GPU: without one the binary says it
# skipped and no report is written. --smoke: a tiny grid, one iteration each, written
# to build/benchmark-smoke (CI runs it so the suites and reports keep working; it asserts
# nothing about time).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
smoke=0 build="$root/build" out="" suites="routing executor layer"
while (($#)); do
  case "$1" in
    --smoke) smoke=1 ;;
    --build) build=$2; shift ;;
    --out) out=$2; shift ;;
    --suites) suites=$2; shift ;;
    *) echo "run_benchmarks.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
[ -n "$out" ] || { ((smoke)) && out="$build/benchmark-smoke" || out="$root/docs/benchmarks"; }
mkdir -p "$out"

targets=()
for suite in $suites; do targets+=("moe_routing_${suite}_benchmark"); done
[ -f "$build/CMakeCache.txt" ] || cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target "${targets[@]}" >/dev/null

source "$root/benchmarks/run_context.sh"
machine=$(machine_summary) compiler=$(build_compiler "$build") commit=$(source_commit "$root")

run() {  # run SUITE FULL_FILTER SMOKE_FILTER MIN_TIME [REPETITIONS [INTERLEAVE [BINARY]]]; false when the suite skipped (no GPU)
  local suite=$1 filter=$2 smoke_filter=$3 min_time=$4 repetitions=${5:-3} interleave=${6:-true} binary=${7:-$1} options=()
  if ((smoke)); then
    options=(--benchmark_filter="$smoke_filter" --benchmark_min_time=0.001)
  else
    # Repetitions interleaved in random order: a slow spell of the machine spreads over every
    # benchmark's repetitions instead of landing on all of whichever ran during it (run in
    # order, one routing cell's five back-to-back repetitions once came out 1.4x slow together).
    options=(--benchmark_filter="$filter" --benchmark_min_time="$min_time" --benchmark_repetitions="$repetitions"
             --benchmark_enable_random_interleaving="$interleave" --benchmark_report_aggregates_only=true)
  fi
  echo "== $suite: ${options[*]}"
  rm -f "$out/$suite.json"
  local said
  said=$("$build/benchmarks/moe_routing_${binary}_benchmark" "${options[@]}" --benchmark_out="$out/$suite.json" --benchmark_out_format=json)
  if grep -q "skipped" <<<"$said" && [ ! -s "$out/$suite.json" ]; then
    echo "$said"
    return 1
  fi
  grep -q '"run_name"' "$out/$suite.json" || { echo "run_benchmarks.sh: $suite ran no benchmark" >&2; exit 1; }
}

for suite in $suites; do
  case $suite in
    routing)
      run routing . "/(topk|oea|xshare)/(f32|bf16)/n:(1|16)/E:(64|128)/k:(2|8)$|partial_sort/(f32|bf16)/n:(1|16)/E:(64|128)/k:(2|8)$" 0.05 5
      python3 "$root/benchmarks/routing_report.py" "$out/routing.json" "$out" "$machine" "$compiler" "$commit"
      # The cells the targets name once more, 15 repetitions each (about 7 min): one grid cell's
      # ratio moves by +-20% between runs here, so the verdict takes more samples.
      run routing_targets "^(route/(seq|par)/(topk|oea|xshare)|baseline/partial_sort)/(f32|bf16)/n:(1|4|16|64)/E:(64|128|256)/k:8\$" \
        "^(route/seq/(topk|oea|xshare)|baseline/partial_sort)/f32/n:(1|16)/E:64/k:8\$" 0.1 15 true routing
      python3 "$root/benchmarks/routing_targets_report.py" "$out/routing_targets.json" "$out" "$machine" "$compiler" "$commit" ;;
    executor)
      run executor . "bandwidth/read|compute/(fma|fma512|bf16_dot)_peak_one_core|executor/qwen3(-compute|-huge-pages)?/n:1/|executor/active:(8|32|56)/" 0.5 5
      python3 "$root/benchmarks/executor_report.py" "$out/executor.json" "$out" "$machine" "$compiler" "$commit" ;;
    layer)
      run layer . "layer/(qwen3-30b-a3b|deepseek-r1)/(n:1|spec:4x4)/(vanilla|oea|xshare_spec)/" 0.5 5
      python3 "$root/benchmarks/layer_report.py" "$out/layer.json" "$out" "$machine" "$compiler" "$commit" ;;
    cuda_routing)
      if run cuda_routing . "/f32/n:(1|16)/E:128/k:8/" 0.2; then
        python3 "$root/benchmarks/cuda_routing_report.py" "$out/cuda_routing.json" "$out" "$machine" "$compiler" "$commit"
      fi ;;
    *) echo "run_benchmarks.sh: unknown suite $suite" >&2; exit 2 ;;
  esac
done
echo "wrote $out"
