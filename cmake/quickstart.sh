#!/usr/bin/env bash
# The README's two Quick start commands:
#   bash cmake/quickstart.sh demo   installs what is missing, builds and runs the demo
#   bash cmake/quickstart.sh test   installs what is missing, builds and runs every test
# Works on a fresh Debian 12 machine as root (or with sudo).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ doctest-dev librange-v3-dev libtbb-dev libbenchmark-dev ccache)
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
    ;;
  *)
    echo "usage: bash cmake/quickstart.sh demo|test" >&2
    exit 2
    ;;
esac
