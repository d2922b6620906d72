#!/usr/bin/env bash
# Builds and installs libnrt: PREFIX/include/nrt/*.h (with nrt/nds/, and ndl/), PREFIX/lib/libnrt.so.1 (SONAME
# libnrt.so.1, symbols versioned NRT_2.0.0 / NRT_3.0.0 by nrt.map, nothing else exported),
# the libnrt.so link, libnrt.a and PREFIX/lib/pkgconfig/nrt.pc.
#
#   bindings-c/install.sh [PREFIX]        (default: /usr/local)
#   PROFILE=debug bindings-c/install.sh /tmp/nrt
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
prefix="${1:-/usr/local}"
profile="${PROFILE:-release}"
version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n 1)"

cargo_flags=(-p nrt-capi)
[ "$profile" = release ] && cargo_flags+=(--release)
(cd "$root" && cargo build "${cargo_flags[@]}")
target_dir="$(cd "$root" && cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
static="$target_dir/$profile/libnrt.a"

mkdir -p "$prefix/include/nrt/nds" "$prefix/include/ndl" "$prefix/lib/pkgconfig"
install -m 0644 "$here"/include/nrt/*.h "$prefix/include/nrt/"
install -m 0644 "$here"/include/nrt/nds/*.h "$prefix/include/nrt/nds/"
install -m 0644 "$here"/include/ndl/*.h "$prefix/include/ndl/"
install -m 0644 "$static" "$prefix/lib/libnrt.a"

# The shared library is linked from the static one so that the version script is the only
# one in force (rustc's cdylib export list would otherwise override the version nodes).
cc -shared -o "$prefix/lib/libnrt.so.1" \
  -Wl,--whole-archive "$static" -Wl,--no-whole-archive \
  -Wl,--version-script="$here/nrt.map" -Wl,-soname,libnrt.so.1 -Wl,--gc-sections \
  -lpthread -ldl -lm -lgcc_s -lc
ln -sf libnrt.so.1 "$prefix/lib/libnrt.so"

cat > "$prefix/lib/pkgconfig/nrt.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: nrt
Description: Neuron Runtime (libnrt 2.31 C API) — nrt-rs
Version: $version
Libs: -L\${libdir} -lnrt
Libs.private: -lpthread -ldl -lm
Cflags: -I\${includedir}
PC
echo "installed libnrt $version ($profile) to $prefix"
