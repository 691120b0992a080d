#!/usr/bin/env bash
# Prepares, on a CPU machine, the one self-contained payload a bare machine with an NVIDIA GPU runs for
# the GPU check (docs/gpu-check.md): tools/gpu-check/payload/ (ignored by git), at most 64 MiB.
#   bash tools/gpu-check/prepare.sh
# It holds the library and the native CUDA-domain programs (test_cuda, gpu_figures; built here with make,
# linking neither CUDA nor UCX), this machine's UCX, its Node binary compressed with xz, the facade's vram
# probe and the kvreuse binary bundled with esbuild (the packages with native addons beside them: koffi,
# better-sqlite3, zeromq), and run.sh: the one command the GPU machine runs, which writes one results file.
# Needs make, a C compiler, xz and the workspace installed (pnpm install).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
payload="$here/payload"
limit=$((64 * 1024 * 1024))

rm -rf "$payload"
mkdir -p "$payload/bin" "$payload/lib" "$payload/node_modules"
make -s -C "$root/native" gpu-check-binaries
cp "$root/native/build/libkvreuse_transport.so" "$payload/lib/"
# UCX (and libnuma, which it needs), for the ucx backend's run of test_cuda: a pull from another process.
mkdir -p "$payload/lib/ucx"
for soname in libucp.so.0 libucs.so.0 libuct.so.0 libucm.so.0 libnuma.so.1; do
  cp -L "$(ldconfig -p | awk -v name="$soname" '$1 == name && /x86-64/ { print $NF; exit }')" "$payload/lib/ucx/$soname"
done
cp "$root/native/build/gpu-check/test_cuda" "$root/native/build/gpu-check/test_vram_import" \
  "$root/native/build/gpu-check/test_vram_routes" "$root/native/build/gpu-check/test_staged_in_place" \
  "$root/native/build/gpu-check/test_vram_withdrawn" "$root/native/build/gpu-check/gpu_figures" "$payload/bin/"
cp "$here/run.sh" "$here/results.mjs" "$payload/"

node "$here/bundle.mjs" "$root" "$payload"
# Around the bundled binary, the files it finds by relative URLs: as in packages/cli and profile-admission.
cp "$root/packages/cli/package.json" "$payload/cli/"
cp -r "$root/packages/profile-admission/profiles" "$payload/cli/profiles"
mkdir -p "$payload/examples"
cp "$root/packages/cli/examples/kvreuse.yaml" "$payload/examples/"

# The packages the bundles leave outside, with only what Node loads of them (this machine's linux-x64 addons).
modules="$payload/node_modules"
# copy_module <package folder> <paths inside it...>
copy_module() {
  local from=$1 name
  name=$(basename "$from")
  shift
  mkdir -p "$modules/$name"
  for path in "$@"; do
    mkdir -p "$modules/$name/$(dirname "$path")"
    cp -rL "$from/$path" "$modules/$name/$path"
  done
}
koffi=$(readlink -f "$root/packages/native-bindings/node_modules/koffi")
cp -rL "$koffi" "$modules/koffi"
prebuilt=$(readlink -f "$koffi/../@koromix/koffi-linux-x64")
mkdir -p "$modules/@koromix"
copy_module "$prebuilt" package.json index.js linux_x64
mv "$modules/koffi-linux-x64" "$modules/@koromix/"
sqlite=$(readlink -f "$root/packages/discovery/node_modules/better-sqlite3")
bindings=$(readlink -f "$sqlite/../bindings")
copy_module "$sqlite" package.json lib build/Release/better_sqlite3.node
copy_module "$bindings" package.json bindings.js
copy_module "$(readlink -f "$bindings/../file-uri-to-path")" package.json index.js
zeromq=$(readlink -f "$root/packages/engine-events/node_modules/zeromq")
copy_module "$zeromq" package.json lib build/manifest.json build/linux/x64
copy_module "$(readlink -f "$zeromq/../cmake-ts")" package.json build/loader.js

xz -T2 -6 -c "$(command -v node)" > "$payload/node.xz"

size=$(du -sb "$payload" | cut -f1)
if [ "$size" -gt "$limit" ]; then
  echo "gpu-check: the payload holds $size bytes, over the $limit a GPU machine takes" >&2
  exit 1
fi
echo "gpu-check: payload ready in $payload ($size bytes); on the GPU machine run: bash tools/gpu-check/payload/run.sh [results.json]"
