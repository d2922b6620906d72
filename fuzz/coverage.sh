#!/usr/bin/env bash
# Line coverage reached by fuzzing: each target (or the ones named) replays its committed
# seeds (seeds/<target>) in a coverage build (`cargo fuzz coverage`), the profiles are merged,
# and llvm-cov reports the lines of core/, backend-sim/, bindings-c/ and backend-linux/ that
# the union of the targets executes, per crate, per target, and the least-covered files.
#
#   fuzz/coverage.sh [TARGET...]
#
# REUSE_PROFILES=1 keeps a target's profile from an earlier run (coverage/<target>/) instead of
# replaying its seeds again, where the profile and the coverage build exist: to add a target to
# the union without replaying the others.
#
# Writes REPORT (default reports/coverage-<UTC date>.md) and keeps the llvm-cov JSON summary
# beside the profiles in coverage/ (git-ignored).
set -euo pipefail
cd "$(dirname "$0")"

rustup component add --toolchain nightly llvm-tools-preview > /dev/null 2>&1
host="$(rustc +nightly -vV | sed -n 's/^host: //p')"
llvm_bin="$(rustc +nightly --print sysroot)/lib/rustlib/$host/bin"
for tool in llvm-profdata llvm-cov; do
  test -x "$llvm_bin/$tool" || { echo "$tool is missing from $llvm_bin" >&2; exit 1; }
done

targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(cargo +nightly fuzz list)
stamp=$(date -u +%Y-%m-%dT%H%MZ)
report=${REPORT:-reports/coverage-$stamp.md}
mkdir -p reports coverage

objects=()
profiles=()
for t in "${targets[@]}"; do
  test -d "seeds/$t" || { echo "seeds/$t is missing" >&2; exit 1; }
  object="target/$host/coverage/$host/release/$t"
  profile="coverage/$t/coverage.profdata"
  if [ "${REUSE_PROFILES:-0}" = 1 ] && [ -f "$profile" ] && [ -x "$object" ]; then
    echo "== $t: reusing $profile"
  else
    echo "== $t: replaying $(find "seeds/$t" -type f | wc -l) seeds in a coverage build"
    cargo +nightly fuzz coverage "$t" "seeds/$t" -- -rss_limit_mb=2560 > "coverage/$t.log" 2>&1 \
      || { tail -n 30 "coverage/$t.log"; exit 1; }
  fi
  objects+=("$object")
  profiles+=("$profile")
done

"$llvm_bin/llvm-profdata" merge -sparse "${profiles[@]}" -o coverage/all.profdata
object_args=("${objects[0]}")
for o in "${objects[@]:1}"; do object_args+=(-object "$o"); done
ignore='(/\.cargo/|/rustc/|/fuzz/|/library/)'
"$llvm_bin/llvm-cov" export -summary-only -format=text -instr-profile coverage/all.profdata \
  -ignore-filename-regex="$ignore" "${object_args[@]}" > coverage/all.json 2> coverage/all.warnings
cat coverage/all.warnings >&2
for i in "${!targets[@]}"; do
  "$llvm_bin/llvm-cov" export -summary-only -format=text \
    -instr-profile "${profiles[$i]}" -ignore-filename-regex="$ignore" "${objects[$i]}" \
    > "coverage/${targets[$i]}.json"
done

python3 - "$report" "$stamp" "${targets[@]}" <<'PY'
import json, os, sys
report, stamp, targets = sys.argv[1], sys.argv[2], sys.argv[3:]
root = os.path.abspath("..") + "/"
crates = ["core/", "backend-sim/", "bindings-c/", "backend-linux/"]

def files(path):
    data = json.load(open(path))["data"][0]["files"]
    out = {}
    for f in data:
        name = f["filename"]
        if name.startswith(root):
            name = name[len(root):]
        s = f["summary"]["lines"]
        out[name] = (s["covered"], s["count"])
    return out

def per_crate(fs):
    rows = {}
    for c in crates:
        cov = sum(v[0] for k, v in fs.items() if k.startswith(c + "src/"))
        tot = sum(v[1] for k, v in fs.items() if k.startswith(c + "src/"))
        rows[c] = (cov, tot)
    return rows

def pct(c, t):
    return f"{100.0 * c / t:.1f} %" if t else "-"

union = files("coverage/all.json")
lines = [f"# Fuzzing coverage, {stamp}", "",
         "Lines of each crate's `src/` executed by replaying the committed seeds of "
         f"{len(targets)} target(s) in a coverage build (`fuzz/coverage.sh`); a crate's files "
         "that no target links count as uncovered only where some target links them.", "",
         "| crate | lines covered | lines | coverage |", "|---|---:|---:|---:|"]
for c, (cov, tot) in per_crate(union).items():
    lines.append(f"| {c} | {cov} | {tot} | {pct(cov, tot)} |")
warnings = open("coverage/all.warnings").read().strip()
if warnings:
    lines += ["", f"llvm-cov on the union: `{warnings}`. A function built differently in two "
              "targets' binaries (other inlining or generic instances) has two profiles, and "
              "llvm-cov drops the counts it cannot match, so the union figures are a lower bound "
              "(the per-target figures below are exact)."]
lines += ["", "Per target (each target's own lines of each crate):", "",
          "| target | " + " | ".join(crates) + " |", "|---|" + "---:|" * len(crates)]
for t in targets:
    rows = per_crate(files(f"coverage/{t}.json"))
    lines.append(f"| {t} | " + " | ".join(f"{pct(*rows[c])} of {rows[c][1]}" for c in crates) + " |")
lines += ["", "Least-covered files (at least 50 lines), union of the targets:", "",
          "| file | covered | lines | coverage |", "|---|---:|---:|---:|"]
ranked = sorted(((k, v) for k, v in union.items()
                 if any(k.startswith(c + "src/") for c in crates) and v[1] >= 50),
                key=lambda kv: kv[1][0] / kv[1][1])
for k, (cov, tot) in ranked[:25]:
    lines.append(f"| {k} | {cov} | {tot} | {pct(cov, tot)} |")
open(report, "w").write("\n".join(lines) + "\n")
print("\n".join(lines[:12]))
print(f"report: fuzz/{report}")
PY
