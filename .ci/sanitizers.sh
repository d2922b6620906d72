#!/usr/bin/env bash
# ThreadSanitizer and AddressSanitizer over the concurrency tests (registry unit tests and
# stress, async queues, lifecycle with concurrent callers and close, concurrent simulated
# cores) and the C threads program linked against an instrumented libnrt.a. Under TSan
# everything, the standard library included (-Zbuild-std), is instrumented: an uninstrumented
# std would hide its synchronisation and report false races. ASan uses the prebuilt standard
# library (a minute less to build): its runtime intercepts malloc, free and the mem* functions,
# so every heap misuse and leak of ours is caught; only accesses std's own code makes are not
# checked.
#
#   .ci/sanitizers.sh [thread|address]...     (default: both)
#
# Exits non-zero on any failure or sanitizer report.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
host="$(rustc -vV | sed -n 's/^host: //p')"
sanitizers=("$@")
[ ${#sanitizers[@]} -gt 0 ] || sanitizers=(thread address)

# Installed only when missing: `rustup toolchain install` of an installed channel updates it,
# which would swap the toolchain under CI's background lane (Miri) in the middle of its run.
if rustup run nightly rustc --version > /dev/null 2>&1; then
  rustup component add --toolchain nightly rust-src > /dev/null
else
  rustup toolchain install nightly --profile minimal --component rust-src > /dev/null
fi
command -v cc > /dev/null || { echo "a C compiler is needed" >&2; exit 1; }

work="$root/target/sanitizers"
mkdir -p "$work"
# The MLP NEFFs the C threads program executes (built uninstrumented, once).
cargo run -q --release -p nrt-sim --example mlp_neff -- "$work/mlp" > /dev/null

# halt_on_error: the first report fails the run. TSan: fork tests exercise the child-side
# state only (no threads are started in a forked child).
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
export ASAN_OPTIONS="halt_on_error=1 detect_leaks=1 detect_stack_use_after_return=1"
export NEURON_RT_LOG_LEVEL=QUIET NEURON_RT_BACKEND=sim

for san in "${sanitizers[@]}"; do
  echo "== -Zsanitizer=$san"
  export RUSTFLAGS="-Zsanitizer=$san -Cdebuginfo=1 -Cforce-frame-pointers=yes"
  export RUSTDOCFLAGS="-Zsanitizer=$san"
  export CARGO_TARGET_DIR="$root/target/san-$san"
  build_std=()
  [ "$san" = thread ] && build_std=(-Zbuild-std)
  cargo_test=(cargo +nightly test -q "${build_std[@]}" --target "$host")
  "${cargo_test[@]}" -p nrt-core --lib registry
  # One invocation for both packages: two would resolve nrt-core's features apart and build
  # the instrumented simulator twice.
  "${cargo_test[@]}" -p nrt-tests -p nrt-sim --test registry --test registry_stress \
    --test async_exec --test lifecycle --test lnc2 --test engine_share

  echo "== C threads program, $san-instrumented, linked with the $san-instrumented libnrt.a"
  cargo +nightly build -q "${build_std[@]}" --target "$host" -p nrt-capi
  # gcc instruments the C file; the runtime linked is rustc's own (LLVM's, matching the Rust
  # side's instrumentation: gcc's libtsan/libasan lack entry points newer LLVM emits).
  runtime="$(rustc +nightly --print sysroot)/lib/rustlib/$host/lib/librustc-nightly_rt.${san:0:1}san.a"
  cc -std=c11 -D_GNU_SOURCE -g -fsanitize="$san" -fno-omit-frame-pointer \
    -Ibindings-c/include -Ibindings-c/tests/c -c bindings-c/tests/c/threads.c -o "$work/threads_$san.o"
  cc -g "$work/threads_$san.o" "$CARGO_TARGET_DIR/$host/debug/libnrt.a" \
    -Wl,--whole-archive "$runtime" -Wl,--no-whole-archive -lpthread -ldl -lm -lrt \
    -o "$work/threads_$san"
  "$work/threads_$san" "$work/mlp"
done
echo "sanitizers: clean (${sanitizers[*]})"
