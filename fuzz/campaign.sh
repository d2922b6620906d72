#!/usr/bin/env bash
# A fuzzing campaign: every cargo-fuzz target (or the ones named) for MINUTES each, then the
# corpora merged and minimized into the committed seeds, and a report.
#
#   fuzz/campaign.sh MINUTES [TARGET...]
#
# Each target runs from its working corpus (corpus/<target>, git-ignored, seeded by
# `examples/fuzz_corpus.rs` of nrt-sim) plus the committed seeds (seeds/<target>), with
# AddressSanitizer (cargo-fuzz's default), PARALLEL targets at a time (default 2, this
# machine's cores). Afterwards libFuzzer's merge keeps, from the seeds and everything found, the
# smallest set of inputs that reaches every feature reached, and that set becomes
# seeds/<target> (inputs past SEED_CAP_KB, default 1024 KiB per target, are left out, largest
# first, and the report says how many; inputs holding bytes of a file under ../shared/, grown
# from the compiler fixture seed, are never kept: no_shared.py). Crashes land in
# artifacts/<target>/ as usual; a target that crashed (a new file there) fails the campaign.
#
# The report (REPORT, default reports/campaign-<UTC date>.md) has, per target: executions,
# executions per second, coverage (libFuzzer's `cov` edges and `ft` features), corpus sizes,
# crashes. Logs are kept under reports/logs/.
set -euo pipefail
cd "$(dirname "$0")"

if [[ $# -lt 1 || ! "$1" =~ ^[0-9]+$ || "$1" -lt 1 ]]; then
  echo "usage: fuzz/campaign.sh MINUTES [TARGET...]   (MINUTES: a whole number, at least 1)" >&2
  exit 2
fi
minutes=$1
shift
parallel=${PARALLEL:-2}
cap_kb=${SEED_CAP_KB:-1024}
stamp=$(date -u +%Y-%m-%dT%H%MZ)
report=${REPORT:-reports/campaign-$stamp.md}
mkdir -p reports/logs seeds corpus
logs=reports/logs/$stamp
mkdir -p "$logs"
touch "$logs/start"

cargo +nightly fuzz build
all_targets=$(cargo +nightly fuzz list)
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  read -r -a targets <<< "$(echo "$all_targets" | tr '\n' ' ')"
fi
for t in "${targets[@]}"; do
  grep -qx "$t" <<< "$all_targets" || { echo "no target named $t" >&2; exit 2; }
done
cargo run -q --manifest-path ../Cargo.toml -p nrt-sim --example fuzz_corpus
bin=target/x86_64-unknown-linux-gnu/release

run_one() {
  local t=$1
  mkdir -p "corpus/$t" "seeds/$t"
  local before
  before=$(find "seeds/$t" -type f | wc -l)
  # The working corpus first: libFuzzer writes what it finds there.
  set +e
  "$bin/$t" "corpus/$t" "seeds/$t" -max_total_time=$((minutes * 60)) -rss_limit_mb=2560 \
    -print_final_stats=1 -artifact_prefix="artifacts/$t/" > "$logs/$t.log" 2>&1
  local rc=$?
  set -e
  echo "$t $rc $before" > "$logs/$t.rc"
}

mkdir -p artifacts
for t in "${targets[@]}"; do mkdir -p "artifacts/$t"; done
running=0
for t in "${targets[@]}"; do
  run_one "$t" &
  running=$((running + 1))
  if [[ $running -ge $parallel ]]; then
    wait -n
    running=$((running - 1))
  fi
done
wait

failed=0
{
  echo "# Fuzzing campaign $stamp"
  echo
  echo "$minutes min per target, $parallel targets at a time, on $(nproc) CPUs ($(uname -m));"
  echo "$(cargo +nightly --version); AddressSanitizer. Seeds capped at $cap_kb KiB per target."
  echo
  echo "| target | executions | exec/s | cov (edges) | ft (features) | corpus after run | seeds before → after | seeds left out (cap) | crashes |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
} > "$report"
for t in "${targets[@]}"; do
  read -r _ rc before < "$logs/$t.rc"
  log=$logs/$t.log
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  eps=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1 || true)
  cov=$(grep -o 'cov: [0-9]*' <<< "$last" | grep -o '[0-9]*' || echo "?")
  ft=$(grep -o 'ft: [0-9]*' <<< "$last" | grep -o '[0-9]*' || echo "?")
  corpus_n=$(find "corpus/$t" -type f | wc -l)
  crashes=$(find "artifacts/$t" -type f -newer "$logs/start" | wc -l)
  # Merge seeds and working corpus into a fresh, minimized set.
  fresh=$(mktemp -d)
  "$bin/$t" -merge=1 -rss_limit_mb=2560 "$fresh" "seeds/$t" "corpus/$t" > "$logs/$t.merge.log" 2>&1 || true
  # Nothing copied from ../shared/ is committed: inputs grown from the compiler fixture go.
  python3 no_shared.py "$fresh" > "$logs/$t.no_shared.log"
  left_out=0
  if [[ -n "$(ls -A "$fresh")" ]]; then
    # Keep the smallest inputs up to the cap.
    total=0
    while read -r size file; do
      if [[ $((total + size)) -gt $((cap_kb * 1024)) ]]; then
        rm -f "$file"
        left_out=$((left_out + 1))
      else
        total=$((total + size))
      fi
    done < <(find "$fresh" -type f -printf '%s %p\n' | sort -n)
    rm -rf "seeds/$t"
    mkdir -p "seeds/$t"
    cp "$fresh"/* "seeds/$t/"
  fi
  rm -rf "$fresh"
  after=$(find "seeds/$t" -type f | wc -l)
  status="none"
  if [[ $rc -ne 0 || $crashes -gt 0 ]]; then
    status="**exit $rc, $crashes in artifacts/$t/**"
    failed=1
  fi
  echo "| \`$t\` | $execs | $eps | $cov | $ft | $corpus_n | $before → $after | $left_out | $status |" >> "$report"
done
echo >> "$report"
seed_bytes=$(find seeds -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
echo "Seeds: $(find seeds -type f | wc -l) files, $((seed_bytes / 1024)) KiB of inputs in all. Logs: fuzz/$logs/." >> "$report"
cat "$report"
exit $failed
