#!/usr/bin/env bash
# CI's background lane. .ci/run starts it after the toolchain step and waits for it at the end:
# the tool installs, the bare-metal builds, the firmware under QEMU, loom and Miri run here
# beside the foreground steps. Several of them spend long stretches on one CPU (fat-LTO links
# with one codegen unit, Miri's interpreter, QEMU), which the foreground's steps leave idle on
# a 2-CPU machine. Every cargo command here uses a target directory of its own, so the two lanes
# never wait for each other's build locks. Writes `$NRT_CI_BG/tools.done` once cargo-fuzz is
# installed (the foreground's fuzz step waits for it). Exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
marks="${NRT_CI_BG:-target/ci-bg}"
mkdir -p "$marks"
# shellcheck source=.ci/steps.sh
. .ci/steps.sh

step "tools: cargo-fuzz and defmt-print (cargo install, when missing)"
# Unoptimised builds (--debug): a third of the compile time, and neither tool does enough
# work here for its speed to matter (cargo-fuzz drives cargo; defmt-print decodes a few lines).
command -v cargo-fuzz > /dev/null || cargo install cargo-fuzz --locked --debug
touch "$marks/tools.done"
command -v defmt-print > /dev/null || cargo install defmt-print --locked --debug

step "no_std core builds for a bare-metal target"
nostd=(--target thumbv7em-none-eabihf --target-dir target/ci-core)
cargo build -p nrt-core "${nostd[@]}" --no-default-features
cargo build -p nrt-core "${nostd[@]}" --no-default-features --features defmt
cargo build -p nrt-core "${nostd[@]}" --no-default-features --features log
cargo build -p nrt-core "${nostd[@]}" --no-default-features --features alloc

step "features defmt and log together are refused"
if cargo check -q -p nrt-core --target-dir target/ci-core --no-default-features --features defmt,log 2> "$marks/both.txt"; then
  echo "nrt-core built with both defmt and log: the compile_error! is missing" >&2
  exit 1
fi
grep -q "mutually exclusive" "$marks/both.txt"

step "firmware: the core on bare metal under QEMU (Cortex-M4F, RISC-V), heap and size budgets"
bash .ci/firmware.sh

step "loom: model checks of the registry protocol, the lifecycle guard and transitions, the async queues (bounded preemptions)"
RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 CARGO_TARGET_DIR=target/loom \
  cargo test -p nrt-core --test loom_registry --test loom_lifecycle --release

step "miri: the registry's unsafe code, attached tensor buffers, the NEFF parser"
MIRIFLAGS="-Zmiri-strict-provenance" cargo +nightly miri test -p nrt-core --lib registry
MIRIFLAGS="-Zmiri-strict-provenance" cargo +nightly miri test -p nrt-core --test miri_units

step_summary
echo "background lane: all checks passed in $((SECONDS - ci_start)) s"
