#!/usr/bin/env bash
# tools/install-deps.sh [--anchors]: installs the Debian 12 packages eddy needs, only the
# missing ones: the toolchain and libraries, OpenSSL (libssl-dev for eddy's TLS, the openssl
# command for the TLS tests' throwaway certificates and peers), and the real clients that the
# examples' tests and the benchmarks drive (wrk, redis-benchmark from redis-tools, nc from
# netcat-openbsd); cmake for the install/cmake test (a CMake project taking the installed eddy
# with find_package; it runs the Ninja generator, so no make). --anchors adds what the benchmark anchors of ../shared/anchors
# need: Debian's cargo and Tokio crate sources (Tokio anchor, built offline) and standalone Asio
# (Asio anchor; loadgen needs only g++). ccache: a second build of the same sources (another
# clone, a build directory configured again) takes its objects from the cache.
set -euo pipefail
pkgs=(g++ clang libclang-rt-14-dev meson ninja-build pkg-config
      ccache  # meson compiles through it when present; tools/test.sh sets it up to be shared by clones
      lld     # tools/test.sh links the sanitizer builds' programs with it (the release build with gold)
      cmake   # tests/install/cmake_test.sh: find_package(eddy) from a CMake project
      liburing-dev libconcurrentqueue-dev doctest-dev python3
      libssl-dev openssl wrk redis-tools
      curl              # service_test scrapes examples/service's /metrics as a Prometheus server would
      netcat-openbsd    # nc (with -N, which other netcats lack): chat_server_test's independent client
      doxygen           # tools/api-docs.sh: the API reference, and its check (meson test api-docs)
      clang-format-14)  # tools/format.sh --check (meson test tools/format): the layout of .clang-format
if [[ "${1:-}" == --anchors ]]; then pkgs+=(cargo librust-tokio-dev libasio-dev make); fi
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} > 0)); then
    echo "eddy: installing ${missing[*]}"
    sudo=()
    if ((EUID != 0)); then sudo=(sudo); fi
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
