#!/usr/bin/env bash
# run_fuzzer.sh FUZZER SEED_DIR WORK_DIR SECONDS [LIBFUZZER FLAGS...]: fuzzes from a copy of
# the seed corpus and prints libFuzzer's final statistics (executions, corpus size) for the docs.
set -euo pipefail
fuzzer=$1 seeds=$2 work=$3 seconds=$4
shift 4
rm -rf "$work" "$work-crashes" && mkdir -p "$work" "$work-crashes" && cp "$seeds"/* "$work"/
# Crash files go to an absolute path: a fuzzer may change directory while it runs.
"$fuzzer" -max_total_time="$seconds" -print_final_stats=1 -rss_limit_mb=4096 -timeout=30 \
  -artifact_prefix="$work-crashes/" "$@" "$work" 2>&1 |
  grep -E "^(stat::|#[0-9]+ *DONE|==[0-9]+==|SUMMARY|INFO: seed corpus|.*_fuzzer: )" || true
exit "${PIPESTATUS[0]}"
