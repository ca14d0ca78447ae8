#!/usr/bin/env bash
# tools/demo.sh: the README's main command. Installs what is missing, builds eddy (release: the
# library, the examples and the benchmarks, not the test programs), runs the examples, then the
# benchmark table beside the Tokio and Asio anchors (`eddy-bench --quick`: every benchmark twice
# per runtime and worker count, the servers loaded for 1 s a run).
# Ends with the wall time of each step. The build goes through ccache where it is installed
# (tools/install-deps.sh installs it; meson uses it by itself): after tools/test.sh, or in
# another clone of the same tree, it takes its objects from the cache.
set -euo pipefail
cd "$(dirname "$0")/.."
step_names=()
step_secs=()
step_start=$SECONDS
step_done() {  # step_done LABEL: the step since the last one took until now
    step_names+=("$1")
    step_secs+=($((SECONDS - step_start)))
    step_start=$SECONDS
}
bash tools/install-deps.sh --anchors
step_done "install what is missing"
# The test programs are left out (-Dtests=disabled -Ddoc_tests=disabled): the demo runs none of
# them, and they are four fifths of a full build. tools/test.sh turns them on again.
demo_options=(-Dtests=disabled -Ddoc_tests=disabled)
if [[ -f build/build.ninja ]]; then
    meson setup --reconfigure build "${demo_options[@]}" >/dev/null
else
    meson setup build --buildtype=release "${demo_options[@]}" >/dev/null
fi
ninja -C build >/dev/null
step_done "build (library, examples, benchmarks)"

echo "== examples/issue_program (expects 1053)"
./build/examples/issue_program
echo "== examples/which_worker"
./build/examples/which_worker
echo "== examples/basic_async (a local TCP server and a 100 ms sleep under when_all)"
./build/examples/basic_async
echo "== examples/fizzbuzz (pipes and a 100 ms timer; about 2 s)"
./build/examples/fizzbuzz
echo "== examples/service (configured from EDDY_*/SERVICE_*; PING and a line over TCP, SIGUSR1, SIGTERM)"
svc_out=$(mktemp)
EDDY_WORKERS=2 EDDY_THREAD_NAME=svc ./build/examples/service >"$svc_out" &
svc_pid=$!
wait_for() {  # wait_for PATTERN: up to 10 s for a line of its output, while it runs
    for _ in $(seq 100); do
        grep -q "$1" "$svc_out" && return 0
        kill -0 "$svc_pid" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}
if wait_for ' listening='; then
    head -n 1 "$svc_out"
    port=$(sed -n 's/.* listening=[^ ]*:\([0-9]*\) .*/\1/p' "$svc_out")
    exec 3<>"/dev/tcp/127.0.0.1/$port"
    printf 'PING\nhello, service\n' >&3
    timeout 10 head -n 2 <&3 | sed 's/^/  reply: /' || true
    kill -USR1 "$svc_pid"
    wait_for '^reactor:' || true
    kill -TERM "$svc_pid"
else
    kill -TERM "$svc_pid" 2>/dev/null || true
fi
wait "$svc_pid" || echo "(service exited with status $?)"
exec 3>&-
tail -n +2 "$svc_out"
rm -f "$svc_out"
step_done "examples: issue_program to service"

# A server started in the background: start_server NAME, then $srv_pid, $srv_out and $port.
start_server() {
    srv_out=$(mktemp)
    "./build/examples/$1" --port 0 --workers 2 >"$srv_out" &
    srv_pid=$!
    for _ in $(seq 100); do
        grep -q ' listening=' "$srv_out" && break
        sleep 0.1
    done
    head -n 1 "$srv_out"
    port=$(sed -n 's/.* listening=[^ ]*:\([0-9]*\).*/\1/p' "$srv_out")
}
stop_server() {
    kill -TERM "$srv_pid"
    wait "$srv_pid" || echo "(exited with status $?)"
    tail -n +2 "$srv_out"
    rm -f "$srv_out"
}
echo "== examples/http_hello (HTTP/1.1 keep-alive on BufReader/BufWriter; two pipelined requests, then wrk for 2 s)"
start_server http_hello
exec 3<>"/dev/tcp/127.0.0.1/$port"
printf 'GET / HTTP/1.1\r\nHost: demo\r\n\r\nGET /missing HTTP/1.1\r\nConnection: close\r\n\r\n' >&3
timeout 10 cat <&3 | sed 's/^/  /' || true
echo
exec 3>&-
wrk -t1 -c16 -d2s "http://127.0.0.1:$port/" | sed 's/^/  wrk: /'
stop_server
echo "== examples/kv_server (the Redis protocol: redis-cli, then redis-benchmark for SET and GET)"
start_server kv_server
redis-cli -p "$port" SET greeting "hello from eddy" | sed 's/^/  redis-cli: /'
redis-cli -p "$port" GET greeting | sed 's/^/  redis-cli: /'
redis-benchmark -p "$port" -c 16 -n 20000 -t set,get -q | tr '\r' '\n' | grep 'per second' | sed 's/^/  redis-benchmark: /'
stop_server
step_done "examples: http_hello and kv_server under load"

# The Tokio anchor needs cargo >= 1.65 (it uses let-else): Debian 12's own (installed above) is
# 1.65; a newer one first on PATH (rustup) works too.
anchors=../shared/anchors/tokio-bench
if [[ -d "$anchors" ]] && command -v cargo >/dev/null; then
    cargo_minor=$(cargo --version | sed -E 's/^cargo 1\.([0-9]+).*/\1/')
    if ((cargo_minor >= 65)); then
        echo "== building the Tokio anchor (cargo, offline, Debian crate sources)"
        (cd "$anchors" && cargo build --release --offline --quiet) || echo "(Tokio anchor did not build; eddy only)"
        echo "== building the Tokio servers (benchmarks/tokio-servers: http_hello, kv_server, chat_server, file_server, fork_join, task_memory)"
        (cd benchmarks/tokio-servers && cargo build --release --offline --quiet) ||
            echo "(Tokio servers did not build; their rows show eddy only)"
    else
        echo "(cargo $(cargo --version | cut -d' ' -f2) is too old for the Tokio anchor: eddy only)"
    fi
fi
shared=../shared/anchors
if [[ -d "$shared" ]]; then
    echo "== building the Asio anchor and the TCP load generator"
    make -s -C "$shared/asio-bench" asio-bench >/dev/null || echo "(Asio anchor did not build; left out)"
    g++ -std=c++20 -O2 -pthread -o "$shared/loadgen/loadgen" "$shared/loadgen/loadgen.cpp" ||
        echo "(loadgen did not build: echo_server is left out)"
fi
step_done "anchors: Tokio, Asio, loadgen"
echo "== benchmarks (medians; shared/bench/SPEC.md)"
./tools/eddy-bench --quick
step_done "benchmark table"
echo "== wall time per step"
for i in "${!step_names[@]}"; do
    printf '  %-40s %5d s\n' "${step_names[$i]}" "${step_secs[$i]}"
done
printf '  %-40s %5d s\n' "all" "$SECONDS"
