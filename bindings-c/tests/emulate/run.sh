#!/usr/bin/env bash
# The Linux backend end to end against the device emulator (`nrt emulate`), compared byte for
# byte with the simulator backend:
#
#   1. libnrt is built and installed in a temporary prefix (bindings-c/install.sh), the
#      simulator MLP NEFF written (mlp_neff example), the `nrt` command built;
#   2. the developer guide's C flow (mlp_check.c, run_neff.c of bindings-c/tests/c, and
#      flow_dump.c here, which saves every output whole) runs with NEURON_RT_BACKEND=sim, then
#      under `nrt emulate` with NEURON_RT_BACKEND=linux: same stdout, same output bytes;
#   3. `nrt run --backend linux examples/mlp.toml -o DIR` under `nrt emulate` writes the same
#      .npy files as `nrt run --backend sim`;
#   4. `strace -f -y -e trace=ioctl` of the C flow under `nrt emulate`: the driver ioctls on
#      /dev/neuron* all return 0;
#   5. the emulator's accounting (--report) after each run: nothing held, no ioctl or launch
#      failed;
#   6. with an injected ioctl failure (--fail-ioctl N) the program fails cleanly (an exit
#      status, not a signal) or succeeds with the same outputs.
#
# Exits non-zero on any difference or failure, saying what happened. Work files in
# $NRT_EMU_TEST_DIR (default target/emulate-tests); PROFILE=debug for a debug build.
set -uo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
cd "$root"
work="${NRT_EMU_TEST_DIR:-$root/target/emulate-tests}"
profile="${PROFILE:-release}"
prefix="$work/prefix"
rm -rf "$work"
mkdir -p "$work"

fail=0
pass=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; shift; for f in "$@"; do [ -f "$f" ] && { echo "--- $f"; tail -n 40 "$f"; }; done; fail=$((fail + 1)); }
die() { echo "run.sh: $*" >&2; exit 1; }

echo "== build: libnrt ($profile), the MLP NEFF, nrt"
cargo_profile=()
[ "$profile" = release ] && cargo_profile=(--release)
PROFILE="$profile" bindings-c/install.sh "$prefix" > "$work/install.log" 2>&1 \
  || { tail -n 40 "$work/install.log"; die "bindings-c/install.sh failed"; }
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
cargo run -q "${cargo_profile[@]}" -p nrt-sim --example mlp_neff -- "$work/mlp" \
  || die "the mlp_neff example failed"
cargo build -q "${cargo_profile[@]}" -p nrt-cli || die "building nrt failed"
target_dir="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
nrt="$target_dir/$profile/nrt"
[ -x "$nrt" ] || die "$nrt was not built"

cflags=(-std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE -Ibindings-c/tests/c)
for src in bindings-c/tests/c/mlp_check.c bindings-c/tests/c/run_neff.c bindings-c/tests/emulate/flow_dump.c; do
  p="$(basename "$src" .c)"
  cc "${cflags[@]}" "$src" -o "$work/$p" $(pkg-config --cflags --libs nrt) -lpthread -Wl,-rpath,"$prefix/lib" \
    || die "compiling $src failed"
done

export NEURON_RT_LOG_LEVEL=ERROR
unset NEURON_RT_VISIBLE_CORES NEURON_RT_NUM_CORES NEURON_RT_SIM_INSTANCE NEURON_RT_SIM_DEVICES

echo "== nrt emulate itself"
if ! "$nrt" emulate -- /bin/sh -c 'test -f /dev/neuron0 && cat /sys/module/neuron/version' > "$work/probe.out" 2> "$work/probe.err"; then
  cat "$work/probe.err"
  die "nrt emulate cannot run here (the line above says why)"
fi
echo "emulated driver version: $(cat "$work/probe.out")"

# The emulator's report: nothing held after the program ended, nothing failed.
check_report() {
  local report="$1" name="$2"
  if ! grep -q 'held: 0 bytes in 0 allocations, 0 reserved cores, 0 attached processes' "$report"; then
    bad "$name: the emulator still holds something after the program ended" "$report"; return 1
  fi
  if ! grep -Eq 'ioctls served \(0 failed\), [1-9][0-9]* launches \(0 failed\)' "$report"; then
    bad "$name: an ioctl or a launch failed, or nothing was launched" "$report"; return 1
  fi
  return 0
}

# emulated NAME CMD…: CMD under nrt emulate with the linux backend; stdout in NAME.linux.out.
emulated() {
  local name="$1"; shift
  "$nrt" emulate --report "$work/$name.report" -- env NEURON_RT_BACKEND=linux "$@" \
    > "$work/$name.linux.out" 2> "$work/$name.linux.err"
}
# simulated NAME CMD…: CMD on the simulator backend; stdout in NAME.sim.out.
simulated() {
  local name="$1"; shift
  NEURON_RT_BACKEND=sim "$@" > "$work/$name.sim.out" 2> "$work/$name.sim.err"
}

echo "== the C flow: simulator vs linux backend under nrt emulate"
for p in mlp_check run_neff; do
  arg="$work/mlp"
  [ "$p" = run_neff ] && arg="$work/mlp/mlp.neff"
  if ! simulated "$p" "$work/$p" "$arg"; then
    bad "$p on the simulator" "$work/$p.sim.err"; continue
  fi
  if ! emulated "$p" "$work/$p" "$arg"; then
    bad "$p on the linux backend under nrt emulate (exit $?)" "$work/$p.linux.out" "$work/$p.linux.err"; continue
  fi
  if ! cmp -s "$work/$p.sim.out" "$work/$p.linux.out"; then
    diff "$work/$p.sim.out" "$work/$p.linux.out" | head -n 20
    bad "$p: stdout differs between the backends"; continue
  fi
  check_report "$work/$p.report" "$p" && ok "$p: identical stdout on both backends ($(wc -l < "$work/$p.sim.out") lines)"
done

mkdir -p "$work/dump.sim" "$work/dump.linux"
if ! simulated flow_dump "$work/flow_dump" "$work/mlp" "$work/dump.sim"; then
  bad "flow_dump on the simulator" "$work/flow_dump.sim.err"
elif ! emulated flow_dump "$work/flow_dump" "$work/mlp" "$work/dump.linux"; then
  bad "flow_dump on the linux backend under nrt emulate" "$work/flow_dump.linux.out" "$work/flow_dump.linux.err"
else
  n=0 diffs=0
  for f in "$work"/dump.sim/*.out; do
    n=$((n + 1))
    if ! cmp "$f" "$work/dump.linux/$(basename "$f")"; then diffs=$((diffs + 1)); fi
  done
  if [ "$n" -eq 0 ]; then
    bad "flow_dump wrote no output"
  elif [ "$diffs" -ne 0 ]; then
    bad "flow_dump: $diffs of $n outputs differ between the backends"
  elif check_report "$work/flow_dump.report" flow_dump; then
    ok "flow_dump: $n outputs, $(cat "$work"/dump.sim/*.out | wc -c) bytes, identical on both backends"
  fi
fi

echo "== nrt run examples/mlp.toml: simulator vs linux backend under nrt emulate"
if ! "$nrt" run --backend sim examples/mlp.toml -o "$work/run.sim" > "$work/run.sim.out" 2> "$work/run.sim.err"; then
  bad "nrt run --backend sim" "$work/run.sim.err"
elif ! "$nrt" emulate --report "$work/run.report" -- "$nrt" run --backend linux examples/mlp.toml -o "$work/run.linux" \
  > "$work/run.linux.out" 2> "$work/run.linux.err"; then
  bad "nrt run --backend linux under nrt emulate" "$work/run.linux.out" "$work/run.linux.err"
else
  n=0 diffs=0
  for f in "$work"/run.sim/*.npy; do
    n=$((n + 1))
    if ! cmp "$f" "$work/run.linux/$(basename "$f")"; then diffs=$((diffs + 1)); fi
  done
  if [ "$n" -eq 0 ]; then
    bad "nrt run wrote no .npy output"
  elif [ "$diffs" -ne 0 ]; then
    bad "nrt run: $diffs of $n .npy outputs differ between the backends"
  elif check_report "$work/run.report" "nrt run"; then
    ok "nrt run: $n .npy outputs identical on both backends"
  fi
fi

echo "== strace: the driver ioctls of the C flow return 0"
if ! command -v strace > /dev/null; then
  bad "strace is not installed"
else
  mkdir -p "$work/strace" "$work/dump.strace"
  if ! "$nrt" emulate -- strace -f -ff -y -qq -e trace=ioctl -o "$work/strace/t" \
    env NEURON_RT_BACKEND=linux "$work/flow_dump" "$work/mlp" "$work/dump.strace" \
    > "$work/strace.out" 2> "$work/strace.err"; then
    bad "flow_dump under strace under nrt emulate" "$work/strace.out" "$work/strace.err"
  else
    cat "$work"/strace/t.* | grep '</dev/neuron' > "$work/strace.neuron" || true
    total=$(wc -l < "$work/strace.neuron")
    nonzero=$(grep -cv ') = 0$' "$work/strace.neuron" || true)
    if [ "$total" -eq 0 ]; then
      bad "strace saw no ioctl on /dev/neuron*" "$work/strace.err"
    elif [ "$nonzero" -ne 0 ]; then
      grep -v ') = 0$' "$work/strace.neuron" | head -n 20
      bad "strace: $nonzero of $total driver ioctls did not return 0"
    else
      ok "strace: $total driver ioctls on /dev/neuron*, all returned 0"
      sed -E 's/^ioctl\([0-9]+<[^>]*>, (_IOC\([^)]*\)|[^,]+).*/\1/' "$work/strace.neuron" | sort | uniq -c | sort -rn | head -n 30
    fi
  fi
fi

echo "== injected ioctl failures: a clean failure or the same outputs, never a crash"
for nth in 1 2 3 5 8 13 21; do
  rm -rf "$work/dump.fault"; mkdir -p "$work/dump.fault"
  "$nrt" emulate --fail-ioctl "$nth:EIO" --report "$work/fault.$nth.report" -- env NEURON_RT_BACKEND=linux "$work/flow_dump" "$work/mlp" "$work/dump.fault" \
    > "$work/fault.$nth.out" 2> "$work/fault.$nth.err"
  rc=$?
  if [ "$rc" -lt 125 ] && grep -q 'ioctls served (0 failed)' "$work/fault.$nth.report"; then
    echo "note: --fail-ioctl $nth: the program made fewer than $nth driver ioctls (exit $rc)"
  elif [ "$rc" -ge 125 ]; then
    bad "--fail-ioctl $nth: exit status $rc (a crash or a failure of nrt emulate)" "$work/fault.$nth.err"
  elif [ "$rc" -eq 0 ]; then
    same=1
    for f in "$work"/dump.sim/*.out; do cmp -s "$f" "$work/dump.fault/$(basename "$f")" || same=0; done
    if [ "$same" -eq 1 ]; then ok "--fail-ioctl $nth: tolerated, same outputs"; else bad "--fail-ioctl $nth: succeeded with other outputs"; fi
  else
    ok "--fail-ioctl $nth: failed cleanly (exit $rc): $(grep -m1 -v '^nrt emulate:\|^nrt-emu:\|^  ' "$work/fault.$nth.err" | cut -c1-150)"
  fi
done

echo "emulate: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
