#!/usr/bin/env bash
# Lists every C++ and CUDA source of the project that does not follow .clang-format and
# fails if there is one. Usage: cmake/format_check.sh SOURCE_DIR [CLANG_FORMAT]
# Exits 77 (reported as skipped by CTest) when clang-format is not installed.
set -euo pipefail
source_dir=${1:?source directory}
clang_format=${2:-clang-format}
if ! command -v "$clang_format" > /dev/null; then
  echo "skipped: $clang_format is not installed (apt-get install clang-format)"
  exit 77
fi
cd "$source_dir"
unformatted=()
while IFS= read -r -d '' file; do
  if ! "$clang_format" --dry-run -Werror "$file" > /dev/null 2>&1; then unformatted+=("$file"); fi
done < <(find include backends tests tools examples benchmarks \
              \( -name '*.hpp' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) -not -path '*/corpus/*' -print0)
if ((${#unformatted[@]})); then
  printf 'not formatted (run clang-format -i on it):\n'
  printf '  %s\n' "${unformatted[@]}"
  exit 1
fi
echo "every source follows .clang-format ($($clang_format --version))"
