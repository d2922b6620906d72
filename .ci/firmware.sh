#!/usr/bin/env bash
# Issue 18: nrt-core on bare metal. Builds the firmware example (firmware/) for a Cortex-M4F
# (thumbv7em-none-eabihf, QEMU mps2-an386) and a RISC-V core (riscv32imac-unknown-none-elf,
# QEMU virt), runs both binaries of each under QEMU with semihosting, decodes their defmt logs
# with defmt-print, asserts the result lines and exit codes, and checks the measured figures
# (heap peaks, growth, smallest heap, flash and static RAM) against the budgets below, so a
# regression fails. Installs what it needs. Figures and their meaning: docs/FIRMWARE.md.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
FW="$ROOT/firmware"
TARGETS=(thumbv7em-none-eabihf riscv32imac-unknown-none-elf)

# Budgets (bytes). Measured values are printed; each must stay at or under its budget.
MAX_PEAK_INIT=512          # heap during init
MAX_PEAK_LOAD=12800        # heap during the load of the plain-tar NEFF
MAX_PEAK_LOAD_GZIP=56320   # ... of the gzipped NEFF (miniz_oxide's 43 KiB decoder state)
MAX_PEAK_EXECUTE=0         # heap during execute
MAX_SMALLEST_HEAP=16384    # smallest heap the whole flow passes in
MAX_RESERVE_PLAIN=4096     # reserve used when each allocation of a plain load is refused
MAX_CORE_FLASH_ALLOC=140000  # nrt-core + its dependencies, text + rodata, in the example
MAX_CORE_FLASH_LITE=24000    # ... in the init/close binary (no alloc)
MAX_CORE_RAM=1024            # nrt-core's own static RAM (.data + .bss) in either binary
MAX_STACK=40960              # stack high-water mark of the example (short-messages on)
MAX_STACK_LITE=24576         # ... of the init/close binary

step() { printf '\n-- %s\n' "$*"; }

step "tools: rustup targets, llvm-tools, defmt-print, QEMU"
rustup target add "${TARGETS[@]}"
rustup component add llvm-tools
command -v defmt-print > /dev/null || cargo install defmt-print --locked
if ! command -v qemu-system-arm > /dev/null || ! command -v qemu-system-riscv32 > /dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # One package at a time: asked together, apt's resolver has refused them on Debian 12.
  apt-get install -y -qq --no-install-recommends qemu-system-arm > /dev/null
  apt-get install -y -qq --no-install-recommends qemu-system-misc > /dev/null
fi
LLVM="$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin"

step "nrt-core's unit tests with the firmware's knobs (compact-registry, short-messages)"
cargo test -q -p nrt-core --target-dir "$ROOT/target/ci-core" --features compact-registry,short-messages --lib

step "fmt, clippy and build (release, both targets, both binaries)"
(cd "$FW" && cargo fmt -- --check)
(cd "$FW" && cargo clippy -q --release --target thumbv7em-none-eabihf --bin example -- -D warnings)
(cd "$FW" && cargo clippy -q --release --target thumbv7em-none-eabihf --no-default-features --features lite --bin init-close -- -D warnings)
for t in "${TARGETS[@]}"; do
  (cd "$FW" && cargo build -q --release --target "$t" --bin example)
  (cd "$FW" && cargo build -q --release --target "$t" --no-default-features --features lite --bin init-close)
done

RUN="$FW/target/qemu-run"
mkdir -p "$RUN"
# run TARGET BIN: runs it under QEMU in $RUN/TARGET-BIN, decodes the log into log.txt, returns
# QEMU's exit status (the firmware's semihosting exit code).
run() {
  local t="$1" bin="$2" dir="$RUN/$1-$2" elf="$FW/target/$1/release/$2" rc=0 start end
  rm -rf "$dir"
  mkdir -p "$dir"
  start=$(date +%s.%N)
  case "$t" in
    thumbv7em-*) (cd "$dir" && timeout 120 qemu-system-arm -machine mps2-an386 -cpu cortex-m4 \
      -nographic -monitor none -serial none -semihosting-config enable=on,target=native \
      -kernel "$elf" > qemu.txt 2>&1) || rc=$? ;;
    riscv32*) (cd "$dir" && timeout 120 qemu-system-riscv32 -machine virt -bios none \
      -nographic -monitor none -serial none -semihosting-config enable=on,target=native \
      -kernel "$elf" > qemu.txt 2>&1) || rc=$? ;;
  esac
  end=$(date +%s.%N)
  # One space after the level (defmt-print pads it).
  defmt-print --log-format '{L} {s}' -e "$elf" < "$dir/defmt.out" 2>&1 | sed -E 's/^([A-Z]+) +/\1 /' > "$dir/log.txt" || true
  printf '%s %s: exit %s in %s s\n' "$t" "$bin" "$rc" "$(python3 -c "print(f'{$end - $start:.2f}')")"
  return "$rc"
}

expect() { # FILE LINE...: every LINE must be in FILE
  local f="$1"
  shift
  for l in "$@"; do
    grep -qxF -- "$l" "$f" || { echo "missing log line: $l" >&2; cat "$f" >&2; exit 1; }
  done
}

value() { # FILE PREFIX: the number after PREFIX on the line that starts with it
  sed -n "s/^$2\([0-9-]*\).*/\1/p" "$1" | head -1
}

within() { # NAME VALUE MAX
  if [ -z "$2" ] || [ "$2" -gt "$3" ]; then
    echo "$1 = ${2:-missing}: over its budget of $3" >&2
    exit 1
  fi
  printf '  %-34s %8s (budget %s)\n' "$1" "$2" "$3"
}

for t in "${TARGETS[@]}"; do
  step "run $t"
  run "$t" example || { cat "$RUN/$t-example/log.txt" "$RUN/$t-example/qemu.txt" >&2; exit 1; }
  run "$t" init-close || { cat "$RUN/$t-init-close/log.txt" "$RUN/$t-init-close/qemu.txt" >&2; exit 1; }
  L="$RUN/$t-example/log.txt"
  expect "$L" \
    "INFO fw: executions=1000 outputs match the host simulator" \
    "INFO fw: heap growth over 999 executions: 0" \
    "INFO fw: bad input truncated NEFF: NRT_INVALID" \
    "INFO fw: bad input truncated header: NRT_INVALID" \
    "INFO fw: bad input NEFF for 2 cores on 1: NRT_INVALID" \
    "INFO fw: bad input load on core 1 of 1: NRT_INVALID" \
    "INFO fw: bad input init 2 cores of 1: NRT_FAILURE" \
    "INFO fw: re-init: init/close/init/load/execute/unload/close ok" \
    "INFO fw: PASS"
  grep -qE '^INFO fw: refused each of [0-9]+ allocations of a plain load: NRT_RESOURCE, nothing leaked$' "$L"
  grep -qE '^INFO fw: refused each of [0-9]+ allocations of a gzip load: NRT_RESOURCE, nothing leaked$' "$L"
  grep -qE '^INFO fw: heap of [0-9]+ bytes: NRT_RESOURCE, cleanly$' "$L"
  expect "$RUN/$t-init-close/log.txt" "INFO fw-lite: init/close/re-init ok" "INFO fw-lite: PASS"
  if grep -q "fw: FAIL\|fw-lite: FAIL\|panic:" "$L" "$RUN/$t-init-close/log.txt"; then
    echo "a failure line in the logs" >&2
    exit 1
  fi
  echo "  heap and allocation figures:"
  within "peak heap, init" "$(value "$L" 'INFO fw: peak heap init=')" "$MAX_PEAK_INIT"
  within "peak heap, load" "$(sed -n 's/^INFO fw: peak heap init=[0-9]* load=\([0-9]*\).*/\1/p' "$L")" "$MAX_PEAK_LOAD"
  within "peak heap, execute" "$(sed -n 's/^INFO fw: peak heap .* execute=\([0-9]*\)$/\1/p' "$L")" "$MAX_PEAK_EXECUTE"
  within "peak heap, load (gzip NEFF)" "$(value "$L" 'INFO fw: gzip NEFF: outputs match; peak heap load=')" "$MAX_PEAK_LOAD_GZIP"
  within "smallest heap" "$(value "$L" 'INFO fw: smallest heap=')" "$MAX_SMALLEST_HEAP"
  within "reserve used, plain load refusals" "$(value "$L" 'INFO fw: reserve peak plain=')" "$MAX_RESERVE_PLAIN"
  within "stack peak" "$(value "$L" 'INFO fw: stack peak=')" "$MAX_STACK"
  within "stack peak, init/close" "$(value "$RUN/$t-init-close/log.txt" 'INFO fw-lite: stack peak=')" "$MAX_STACK_LITE"
  grep "^INFO fw: \(refused\|reserve\|heap of\|start\)" "$L" | sed 's/^/  /'

  step "sizes $t"
  for bin in example init-close; do
    python3 - "$LLVM" "$FW/target/$t/release/$bin" "$bin" "$MAX_CORE_FLASH_ALLOC" "$MAX_CORE_FLASH_LITE" "$MAX_CORE_RAM" <<'PY'
import subprocess, sys
llvm, elf, name, max_alloc, max_lite, max_ram = sys.argv[1], sys.argv[2], sys.argv[3], *map(int, sys.argv[4:])
# Sections: flash = code and read-only data (+ the vector table, init code, unwind tables);
# static RAM = .data + .bss.
sections = {}
for line in subprocess.run([f"{llvm}/llvm-size", "-A", elf], capture_output=True, text=True, check=True).stdout.splitlines():
    parts = line.split()
    if len(parts) == 3 and parts[1].isdigit():
        sections[parts[0]] = int(parts[1])
flash = sum(v for k, v in sections.items() if k in (".vector_table", ".text", ".rodata", ".init.rust", ".eh_frame"))
ram = sections.get(".data", 0) + sections.get(".bss", 0)
# Symbols by crate: nrt-core (any symbol naming it, generic instantiations included), its
# dependencies, the firmware, the rest (core/alloc/compiler_builtins/defmt/runtime crates).
deps = ("heapless::", "spin::", "miniz_oxide::", "serde_json::", "serde::", "serde_core::", "hashbrown::",
        "smallvec::", "crc32fast::", "md5::", "sha2::", "digest::", "bitflags::", "block_buffer::")
out = subprocess.run([f"{llvm}/llvm-nm", "--print-size", "--demangle", elf], capture_output=True, text=True, check=True).stdout
sums = {}
for line in out.splitlines():
    p = line.split(None, 3)
    if len(p) < 4:
        continue
    size, kind, sym = int(p[1], 16), p[2].lower(), p[3]
    region = "flash" if kind in "tr" else "ram" if kind in "bd" else None
    if region is None:
        continue
    if "nrt_core" in sym:
        who = "nrt-core"
    elif any(d in sym for d in deps):
        who = "core deps"
    elif "nrt_firmware" in sym or sym.startswith(("example::", "init_close::")):
        who = "firmware"
    else:
        who = "other"
    sums[(who, region)] = sums.get((who, region), 0) + size
g = lambda w, r: sums.get((w, r), 0)
print(f"  {name}: image flash {flash} B, static RAM {ram} B (.data {sections.get('.data', 0)}, .bss {sections.get('.bss', 0)})")
for who in ("nrt-core", "core deps", "firmware", "other"):
    print(f"    {who:10} flash {g(who, 'flash'):7} B  RAM {g(who, 'ram'):7} B")
core_flash = g("nrt-core", "flash") + g("core deps", "flash")
budget = max_alloc if name == "example" else max_lite
print(f"    core total flash (nrt-core + deps) {core_flash} B (budget {budget}); nrt-core RAM {g('nrt-core', 'ram')} B (budget {max_ram})")
print("    (named symbols only: anonymous constants such as string literals count under 'flash' of the image, not per crate)")
if core_flash > budget or g("nrt-core", "ram") > max_ram:
    sys.exit(f"{name}: the core's size is over its budget")
PY
  done
done

echo
echo "firmware: both targets passed"
