#!/usr/bin/env bash
# Builds and installs libnrt into a temporary prefix, then compiles the C programs of
# bindings-c/tests/c against the installed headers and library (pkg-config) and runs them on
# the simulator: natively, under valgrind (no invalid access, no definite leak) and with
# AddressSanitizer. Exits non-zero on any failure.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
work="${NRT_C_TEST_DIR:-$root/target/c-tests}"
prefix="$work/prefix"
rm -rf "$work"
mkdir -p "$work"

PROFILE="${PROFILE:-release}" bindings-c/install.sh "$prefix"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
export NEURON_RT_BACKEND=sim NEURON_RT_LOG_LEVEL=QUIET

echo "== exported symbols: only nrt_*, nec_*, nds_* (NRT_2.0.0) and nrta_* (NRT_3.0.0)"
readelf -d "$prefix/lib/libnrt.so.1" | grep -q 'SONAME.*libnrt.so.1'
syms="$(objdump -T "$prefix/lib/libnrt.so.1" | awk '$2 == "g" && $4 == ".text" {print $6, $7}')"
echo "$syms" | awk '{print $1}' | sort | uniq -c
if echo "$syms" | grep -vE '^(NRT_2\.0\.0 (nrt|nec|nds)_|NRT_3\.0\.0 nrta_)'; then
  echo "unexpected exports above" >&2
  exit 1
fi
echo "$syms" | grep -q 'NRT_3.0.0 nrta_execute_schedule'
echo "$syms" | grep -q 'NRT_2.0.0 nrt_init'
for s in 'NRT_3.0.0 nrta_error_tracker_create' 'NRT_3.0.0 nrta_get_completion_handle' \
  'NRT_2.0.0 nrt_debug_client_connect' 'NRT_2.0.0 nrt_async_sendrecv_init' \
  'NRT_2.0.0 nec_get_version_info' 'NRT_2.0.0 nds_open'; do
  echo "$syms" | grep -qx "$s" || { echo "missing export: $s" >&2; exit 1; }
done

echo "== header truth (C11 and C++17)"
cc -std=c11 -Wall -Wextra -Werror $(pkg-config --cflags nrt) bindings-c/tests/c/header_truth.c -o "$work/header_truth"
"$work/header_truth"
g++ -x c++ -std=c++17 -Wall -Werror $(pkg-config --cflags nrt) bindings-c/tests/c/header_truth.c -o "$work/header_truth_cxx"
"$work/header_truth_cxx"

echo "== every header and every declared function (C11 and C++17, linked)"
# The program must name every function the installed headers declare.
python3 - "$prefix/include" bindings-c/tests/c/all_headers.c <<'PY'
import glob, re, sys
inc, prog = sys.argv[1], sys.argv[2]
def declared(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"^\s*#.*$", "", text, flags=re.M)
    return set(re.findall(r"\b((?:nrt|nrta|nec|nds)_[a-z0-9_]+)\s*\(", text))
names = set()
for h in glob.glob(inc + "/nrt/**/*.h", recursive=True):
    names |= declared(open(h).read())
listed = set(re.findall(r"FN\((\w+)\)", open(prog).read()))
missing = sorted(names - listed)
if missing:
    sys.exit("all_headers.c does not list: " + ", ".join(missing))
print(f"{len(names)} functions declared by the installed headers, all listed")
PY
cc -std=c11 -Wall -Wextra -Werror $(pkg-config --cflags nrt) bindings-c/tests/c/all_headers.c \
  -o "$work/all_headers" $(pkg-config --libs nrt) -Wl,-rpath,"$prefix/lib"
"$work/all_headers"
g++ -x c++ -std=c++17 -Wall -Werror $(pkg-config --cflags nrt) bindings-c/tests/c/all_headers.c \
  -o "$work/all_headers_cxx" $(pkg-config --libs nrt) -Wl,-rpath,"$prefix/lib"
"$work/all_headers_cxx"
# And against the static library.
cc -std=c11 -Wall -Wextra -Werror $(pkg-config --cflags nrt) bindings-c/tests/c/all_headers.c \
  -o "$work/all_headers_static" "$prefix/lib/libnrt.a" -lpthread -ldl -lm
"$work/all_headers_static"

echo "== nrt_profile.h and nrt_sys_trace.h: every function, exact types, linked (C11 and C++17)"
cc -std=c11 -Wall -Wextra -Werror $(pkg-config --cflags nrt) bindings-c/tests/c/profile_headers.c \
  -o "$work/profile_headers" $(pkg-config --libs nrt) -Wl,-rpath,"$prefix/lib"
"$work/profile_headers"
g++ -x c++ -std=c++17 -Wall -Werror $(pkg-config --cflags nrt) bindings-c/tests/c/profile_headers.c \
  -o "$work/profile_headers_cxx" $(pkg-config --libs nrt) -Wl,-rpath,"$prefix/lib"
"$work/profile_headers_cxx"

echo "== the simulator MLP as a NEFF"
cargo run -q --release -p nrt-sim --example mlp_neff -- "$work/mlp"
echo "== a tiny NEFF without a program (many_models loads 10,000 of it)"
cargo run -q --release -p nrt-tests --example hot_path_support -- neff "$work/mlp/empty.neff"

# profile_mlp renders its trace with `nrt trace render`.
echo "== the nrt command (trace render)"
cargo build -q --release -p nrt-cli
target_dir="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
export NRT_BIN="$target_dir/release/nrt"

cflags=(-std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE -Ibindings-c/tests/c)
programs="run_neff mlp_check threads errors guards free_while_queued async_ext many_models profile_mlp sys_trace_events inspect_mlp"
for p in $programs; do
  cc "${cflags[@]}" bindings-c/tests/c/$p.c -o "$work/$p" $(pkg-config --cflags --libs nrt) -lpthread -Wl,-rpath,"$prefix/lib"
  cc "${cflags[@]}" -g -fsanitize=address,undefined -fno-omit-frame-pointer bindings-c/tests/c/$p.c \
    -o "$work/${p}_asan" $(pkg-config --cflags --libs nrt) -lpthread -Wl,-rpath,"$prefix/lib"
done

# run_neff (the developer guide's sample) runs the compiler fixture from the `shared/` folder beside
# the repository when there is one; a fresh clone has none, and then it runs the MLP NEFF (saying
# so), unless NRT_REQUIRE_SHARED=1 makes the absence a failure.
fixture="$root/../shared/fixtures/neff/matmul_small.neff"
if [ -f "$fixture" ]; then
  run_neff_arg="$fixture"
  # 2 subgraphs: it needs a logical core of 2 physical cores (trn2).
  run_neff_instance=NEURON_RT_SIM_INSTANCE=trn2
elif [ "${NRT_REQUIRE_SHARED:-}" = 1 ]; then
  echo "$fixture is absent, and NRT_REQUIRE_SHARED=1 requires it" >&2
  exit 1
else
  echo "SKIPPED: $fixture is absent (no shared/ folder beside the repository): run_neff runs the MLP NEFF instead" >&2
  run_neff_arg="$work/mlp/mlp.neff"
  run_neff_instance=-uNEURON_RT_SIM_INSTANCE
fi
arg_for() { if [ "$1" = run_neff ]; then echo "$run_neff_arg"; else echo "$work/mlp"; fi; }
# The simulated instance of each program (an `env` argument): the others run on the default
# instance (trn1).
instance_for() {
  if [ "$1" = run_neff ]; then printf '%s\n' "$run_neff_instance"; else printf '%s\n' -uNEURON_RT_SIM_INSTANCE; fi
}

pass=0
fail=0
run() {
  local name="$1"; shift
  if "$@" > "$work/$name.log" 2>&1; then
    echo "ok   $name"; pass=$((pass + 1))
  else
    echo "FAIL $name"; tail -n 30 "$work/$name.log"; fail=$((fail + 1))
  fi
}

for p in $programs; do
  run "$p" env "$(instance_for $p)" "$work/$p" "$(arg_for $p)"
done
if command -v valgrind > /dev/null; then
  # Valgrind runs a program's threads one at a time: two programs at once use both CPUs. Each
  # run's exit status is collected afterwards and reported in order.
  valgrind_one() {
    local p=$1 rc=0
    env "$(instance_for "$p")" NRT_MANY_MODELS=1000 valgrind --error-exitcode=99 --leak-check=full \
      --errors-for-leak-kinds=definite --child-silent-after-fork=yes --quiet "$work/$p" "$(arg_for "$p")" \
      > "$work/vg-$p.out" 2>&1 || rc=$?
    echo "$rc" > "$work/vg-$p.rc"
  }
  jobs_max=$(nproc 2> /dev/null || echo 2)
  for p in $programs; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
    valgrind_one "$p" &
  done
  wait
  for p in $programs; do
    run "valgrind-$p" sh -c 'cat "$1"; exit "$(cat "$2")"' - "$work/vg-$p.out" "$work/vg-$p.rc"
  done
else
  echo "valgrind not installed: valgrind runs skipped" >&2
  fail=$((fail + 1))
fi
for p in $programs; do
  run "asan-$p" env "$(instance_for $p)" ASAN_OPTIONS=detect_leaks=1 "$work/${p}_asan" "$(arg_for $p)"
done

# Without a backend (auto, no /dev/neuron0), nrt_init reports the missing device for what it is.
if [ ! -e /dev/neuron0 ]; then
  cc "${cflags[@]}" bindings-c/tests/c/no_device.c -o "$work/no_device" $(pkg-config --cflags --libs nrt) -Wl,-rpath,"$prefix/lib"
  check_no_device() {
    env -u NEURON_RT_BACKEND NEURON_RT_LOG_LEVEL=ERROR "$work/no_device" 2> "$work/no_device.stderr" \
      && grep -q 'NRT:nrt_init Cannot find Neuron devices' "$work/no_device.stderr" \
      && ! grep -q 'soft_incompat' "$work/no_device.stderr"
  }
  run no_device check_no_device
fi

echo "C programs: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
