#!/usr/bin/env bash
# Prepares, on a CPU machine, the one self-contained payload a bare machine with an NVIDIA GPU runs for
# the GPU check (docs/gpu-check.md): tools/gpu-check/payload/ (ignored by git), at most 64 MiB.
#   bash tools/gpu-check/prepare.sh
# It holds the library and the native CUDA-domain programs (test_cuda, gpu_figures; built here with make,
# linking neither CUDA nor UCX), this machine's Node binary compressed with xz, the facade's vram probe
# bundled with esbuild (koffi beside it), and run.sh: the one command the GPU machine runs, which writes one
# results file. Needs make, a C compiler, xz and the workspace installed (pnpm install).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
payload="$here/payload"
limit=$((64 * 1024 * 1024))

rm -rf "$payload"
mkdir -p "$payload/bin" "$payload/lib" "$payload/node_modules/@koromix"
make -s -C "$root/native" gpu-check-binaries
cp "$root/native/build/libkvreuse_transport.so" "$payload/lib/"
# UCX (and libnuma, which it needs), for the ucx backend's run of test_cuda: a pull from another process.
mkdir -p "$payload/lib/ucx"
for soname in libucp.so.0 libucs.so.0 libuct.so.0 libucm.so.0 libnuma.so.1; do
  cp -L "$(ldconfig -p | awk -v name="$soname" '$1 == name && /x86-64/ { print $NF; exit }')" "$payload/lib/ucx/$soname"
done
cp "$root/native/build/gpu-check/test_cuda" "$root/native/build/gpu-check/gpu_figures" "$payload/bin/"
cp "$here/run.sh" "$here/results.mjs" "$payload/"

node "$here/bundle.mjs" "$root" "$payload/probe.mjs"
koffi=$(readlink -f "$root/packages/native-bindings/node_modules/koffi")
cp -rL "$koffi" "$payload/node_modules/koffi"
prebuilt=$(readlink -f "$koffi/../@koromix/koffi-linux-x64")
mkdir -p "$payload/node_modules/@koromix/koffi-linux-x64"
cp "$prebuilt/package.json" "$prebuilt/index.js" "$payload/node_modules/@koromix/koffi-linux-x64/"
cp -r "$prebuilt/linux_x64" "$payload/node_modules/@koromix/koffi-linux-x64/"

xz -T2 -6 -c "$(command -v node)" > "$payload/node.xz"

size=$(du -sb "$payload" | cut -f1)
if [ "$size" -gt "$limit" ]; then
  echo "gpu-check: the payload holds $size bytes, over the $limit a GPU machine takes" >&2
  exit 1
fi
echo "gpu-check: payload ready in $payload ($size bytes); on the GPU machine run: bash tools/gpu-check/payload/run.sh [results.json]"
