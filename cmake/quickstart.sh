#!/usr/bin/env bash
# The README's two Quick start commands:
#   bash cmake/quickstart.sh demo   installs what is missing, builds and runs the demo
#   bash cmake/quickstart.sh test   installs what is missing, builds and runs every test:
#                                   the suite (g++), then under ASan+UBSan and TSan (clang),
#                                   then each libFuzzer target for MOE_ROUTING_FUZZ_SECONDS
#                                   (default 60). MOE_ROUTING_QUICK=1 runs the suite only.
# Works on a fresh Debian 12 machine as root (or with sudo).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ doctest-dev librange-v3-dev libtbb-dev libbenchmark-dev ccache)
[ "${1:-}" = test ] && packages+=(clang clang-format libclang-rt-14-dev python3)
# The Python module and its tests (tests/python), for Debian's /usr/bin/python3: CMake uses
# that interpreter explicitly, since a python3 earlier on PATH (pyenv, conda) lacks these.
# libtorch-dev (which brings python3-dev) is named because --no-install-recommends skips it.
[ "${1:-}" = test ] && packages+=(python3-torch python3-numpy python3-pytest pybind11-dev python3-dev libtorch-dev)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "quickstart: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The CUDA backend's tests and benchmarks compile wherever the CUDA Toolkit is (no GPU needed).
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ] && [ -z "${CUDACXX:-}" ]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi

build=${MOE_ROUTING_BUILD_DIR:-build}
jobs=$(nproc)
configure() { cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"; }

case "${1:-}" in
  demo)
    configure
    cmake --build "$build" --target moe_routing_demo
    "$build/examples/moe-routing-demo"
    ;;
  test)
    configure
    cmake --build "$build" -j "$jobs"
    ctest --test-dir "$build" --output-on-failure -j "$jobs"
    [ "${MOE_ROUTING_QUICK:-0}" = 1 ] && exit 0

    sanitized() {  # sanitized DIR SANITIZERS [cmake options...]
      local dir=$1 sanitizers=$2
      shift 2
      CXX=clang++ cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DMOE_ROUTING_SANITIZE="$sanitizers" -DMOE_ROUTING_BUILD_BENCHMARKS=OFF \
        -DMOE_ROUTING_BUILD_EXAMPLES=OFF -DMOE_ROUTING_BUILD_CUDA=OFF -DMOE_ROUTING_BUILD_PYTHON=OFF "$@" >/dev/null
    }
    echo "== AddressSanitizer + UndefinedBehaviorSanitizer: the whole suite"
    sanitized "$build-asan" address,undefined
    cmake --build "$build-asan" -j "$jobs"
    ctest --test-dir "$build-asan" --output-on-failure -j "$jobs" -LE "soak|build"

    echo "== ThreadSanitizer: the threaded CPU paths (routing and the executor)"
    sanitized "$build-tsan" thread -DMOE_ROUTING_BUILD_TOOLS=OFF
    cmake --build "$build-tsan" -j "$jobs" --target moe_routing_tests
    TSAN_OPTIONS="suppressions=$PWD/tests/sanitizers/tsan.supp halt_on_error=1" \
      ctest --test-dir "$build-tsan" --output-on-failure -j "$jobs" -R "plans are identical|concurrent routing|executor equals"

    echo "== libFuzzer: ${MOE_ROUTING_FUZZ_SECONDS:-60} s per target"
    sanitized "$build-fuzz" "" -DMOE_ROUTING_BUILD_TOOLS=OFF -DMOE_ROUTING_BUILD_FUZZERS=ON \
      -DMOE_ROUTING_FUZZ_SECONDS="${MOE_ROUTING_FUZZ_SECONDS:-60}"
    cmake --build "$build-fuzz" -j "$jobs" --target route_fuzzer npy_fuzzer policy_fuzzer tool_fuzzer trace_fuzzer api_fuzzer
    ctest --test-dir "$build-fuzz" --output-on-failure -j "$jobs" -L fuzz -V | grep -E "stat::number_of_executed_units|stat::new_units_added|Test +#|tests passed|fuzzer: "
    ;;
  *)
    echo "usage: bash cmake/quickstart.sh demo|test" >&2
    exit 2
    ;;
esac
