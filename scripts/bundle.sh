#!/usr/bin/env bash
# Packs podprof for machines that are not Debian 12: dist/podprof-<version>-linux-x86_64/
# (and a .tar.zst of it) holding the stripped binaries, the shared libraries they load beyond
# glibc, and wrappers that point the loader at them.
#
#   bash scripts/bundle.sh [BUILD_DIR]          (default build/; builds it first)
#
# The target needs x86-64 Linux with glibc at least as new as this machine's (printed below);
# nothing else. Run from anywhere: bin/podprof, bin/podprof-agent, bin/podprof-aggregator,
# bin/podprof-simhost. scripts/check-bundle.sh proves it with the system's libraries hidden.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[ -f "$build/build.ninja" ] || bash scripts/build.sh
cmake --build "$build" --target podprof podprof-agent podprof-aggregator podprof-simhost

version=$(grep -oP 'inline constexpr char kVersion\[\] = "\K[^"]+' "$build/podprof_version.h")
name="podprof-$version-linux-x86_64"
out="dist/$name"
rm -rf "$out" "dist/$name.tar.zst"
mkdir -p "$out/bin" "$out/libexec" "$out/lib"
programs=(podprof podprof-agent podprof-aggregator podprof-simhost)

for p in "${programs[@]}"; do
  strip --strip-all -o "$out/libexec/$p" "$build/bin/$p"
  # The wrapper: the bundle's libraries first, then the program, which finds its siblings
  # (podprof demo starts the daemons) next to itself in libexec/.
  cat > "$out/bin/$p" <<WRAPPER
#!/bin/sh
here=\$(cd "\$(dirname "\$0")/.." && pwd)
LD_LIBRARY_PATH="\$here/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "\$here/libexec/$p" "\$@"
WRAPPER
  chmod 755 "$out/bin/$p"
done

# Every library the programs load except glibc's own (the target's loader and libc must
# match each other, so they are the target's).
glibc='^(linux-vdso|ld-linux|libc|libm|libpthread|libdl|librt|libresolv)\.so'
for p in "${programs[@]}"; do
  ldd "$build/bin/$p" | awk '$3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r soname path; do
  if [[ "$soname" =~ $glibc ]]; then continue; fi
  strip --strip-unneeded -o "$out/lib/$soname" "$(readlink -f "$path")"
done

needs=$(for f in "$out"/libexec/* "$out"/lib/*; do objdump -T "$f"; done |
        grep -oP 'GLIBC_\K[0-9.]+' | sort -uV | tail -1)
cat > "$out/README" <<README
podprof $version for x86-64 Linux with glibc $needs or newer.
Run bin/podprof (or bin/podprof-agent, bin/podprof-aggregator, bin/podprof-simhost) from
anywhere; the libraries they load are in lib/. Start with: bin/podprof demo
README

tar -C dist -cf - "$name" | zstd -q -19 -T0 -o "dist/$name.tar.zst"
echo "bundle: $out ($(du -sh "$out" | cut -f1) unpacked, $(ls "$out/lib" | wc -l) libraries)"
echo "bundle: dist/$name.tar.zst ($(( $(stat -c %s "dist/$name.tar.zst") / 1024 / 1024 )) MiB), needs glibc $needs"
