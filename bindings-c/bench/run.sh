#!/usr/bin/env bash
# The C ABI hot-path benchmark (issue 13): builds libnrt (release) into a temporary prefix, the
# libnrt-design baseline (baseline.cpp, with g++) and the C driver (hot_path.c) against each,
# then measures, interleaved, each scenario ROUNDS times on each library and keeps each side's
# best round:
#
#   count1        nrt_get_model_nc_count, 1 thread            target: ours ≥ 3× the baseline
#   count2        the same, 2 threads on distinct models      target: ≥ 8×
#   count2shared  the same, 2 threads on one shared model     target: ≥ 3×
#   execute       nrt_execute of a model without a program through the C ABI, against the
#                 Rust-level Runtime::execute of the same model   target: C ≤ 1.5× Rust's time
#                 (both loops timed in thread CPU time, so descheduling on a shared machine
#                 does not count; the count scenarios use wall time: they measure scaling)
#
# Prints the figures and the load average, and exits non-zero when a target is missed.
#   bindings-c/bench/run.sh            (ITERS=5000000 ROUNDS=3 by default)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
work="${NRT_BENCH_DIR:-$root/target/capi-bench}"
prefix="$work/prefix"
iters="${ITERS:-5000000}"
exec_iters="${EXEC_ITERS:-500000}"
rounds="${ROUNDS:-3}"
mkdir -p "$work"

bindings-c/install.sh "$prefix" > "$work/install.log"
cargo build -q --release -p nrt-tests --example hot_path_support
target_dir="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
support="$target_dir/release/examples/hot_path_support"
"$support" neff "$work/empty.neff"

g++ -std=c++17 -O2 -fPIC -shared -I"$prefix/include" bindings-c/bench/baseline.cpp \
  -o "$work/libnrt_baseline.so" -lpthread
cflags=(-std=c11 -O2 -Wall -Wextra -Werror -I"$prefix/include")
cc "${cflags[@]}" -DWITH_EXECUTE bindings-c/bench/hot_path.c -o "$work/hot_path_nrt" \
  -L"$prefix/lib" -lnrt -lpthread -Wl,-rpath,"$prefix/lib"
cc "${cflags[@]}" bindings-c/bench/hot_path.c -o "$work/hot_path_baseline" \
  -L"$work" -lnrt_baseline -lpthread -Wl,-rpath,"$work"

export NEURON_RT_BACKEND=sim NEURON_RT_LOG_LEVEL=QUIET
rate() { "$@" | awk '{print $2}'; }
best() { printf '%s\n' "$@" | sort -g | tail -n 1; }

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
fail=0
check() { # name ours baseline target
  local r
  r="$(awk -v a="$2" -v b="$3" 'BEGIN{printf "%.2f", a/b}')"
  local ok=met
  awk -v r="$r" -v t="$4" 'BEGIN{exit !(r >= t)}' || { ok=MISSED; fail=1; }
  printf '%-13s ours %12.0f calls/s  baseline %12.0f calls/s  ratio %6s×  target ≥ %s×  %s\n' \
    "$1" "$2" "$3" "$r" "$4" "$ok"
}
for scenario in count1 count2 count2shared; do
  ours=() base=()
  for _ in $(seq "$rounds"); do
    ours+=("$(rate "$work/hot_path_nrt" "$work/empty.neff" "$scenario" "$iters")")
    base+=("$(rate "$work/hot_path_baseline" "$work/empty.neff" "$scenario" "$iters")")
  done
  case "$scenario" in count2) target=8 ;; *) target=3 ;; esac
  check "$scenario" "$(best "${ours[@]}")" "$(best "${base[@]}")" "$target"
done
c=() r=()
for _ in $(seq "$rounds"); do
  c+=("$(rate "$work/hot_path_nrt" "$work/empty.neff" execute "$exec_iters")")
  r+=("$(rate "$support" execute "$exec_iters")")
done
cb="$(best "${c[@]}")" rb="$(best "${r[@]}")"
ratio="$(awk -v c="$cb" -v r="$rb" 'BEGIN{printf "%.2f", r/c}')"
ok=met
awk -v x="$ratio" 'BEGIN{exit !(x <= 1.5)}' || { ok=MISSED; fail=1; }
awk -v c="$cb" -v r="$rb" -v x="$ratio" -v ok="$ok" 'BEGIN{printf "execute       C ABI %9.0f ns/call  Rust %9.0f ns/call  C/Rust time %s×  target ≤ 1.5×  %s\n", 1e9/c, 1e9/r, x, ok}'
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$fail"
