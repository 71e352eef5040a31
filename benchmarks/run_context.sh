# What every benchmark report records beside its figures: the machine, the compiler and build
# type of a build folder, and the commit it was built from. Sourced by run_benchmarks.sh and
# cpu_kind_checks.sh, so both reports say these in the same words.

# The CPU's model name, its core count and memory: "AMD EPYC, 2 cores, 23 GiB".
machine_summary() {
  echo "$(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB"
}

# The compiler and build type of the CMake build folder $1: "c++ (Debian 12.2.0-14) 12.2.0, Release".
build_compiler() {
  local cache="$1/CMakeCache.txt"
  echo "$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$cache" | xargs -r -I{} sh -c '{} --version | head -1'), $(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$cache")"
}

# The short commit of the checkout $1, marked where the tracked files differ from it.
source_commit() {
  echo "$(git -C "$1" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$1" diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
}
