#!/usr/bin/env bash
# The GPU check, on a machine with an NVIDIA GPU (bare: no network, no toolchain), from the payload
# tools/gpu-check/prepare.sh made: writes one results file (JSON), by default $OUT/gpu-check-results.json
# (or beside this script when OUT is unset), and exits 0 only when every part passed.
#   bash tools/gpu-check/payload/run.sh [results file]
# Parts: the native tests of the CUDA domain on the machine's driver (test_cuda, KVT_TEST_CUDA_REAL=1, on
# the loopback and ucx backends: vram allocation, registration, pulls within a process and from another
# process through CUDA IPC, the kernels),
# the figures (gpu_figures: the library's pull of another process's vram, and the driver's own IPC copy and
# gather, against one device-to-device copy; the checksum kernel's rate), and the facade's vram probe under
# the shipped Node.
set -u
here=$(cd "$(dirname "$0")" && pwd)
results=${1:-${OUT:-$here}/gpu-check-results.json}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$work/gpus.txt" 2>&1
echo $? > "$work/gpus.rc"

# Both backends: the ucx one (UCX shipped in lib/ucx) adds the pull from another process's vram.
for backend in loopback ucx; do
  LD_LIBRARY_PATH="$here/lib/ucx${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" UCX_WARN_UNUSED_ENV_VARS=n \
    KVT_TEST_CUDA_REAL=1 KVT_TEST_BACKEND=$backend timeout 120 "$here/bin/test_cuda" > "$work/native-$backend.log" 2>&1
  echo $? > "$work/native-$backend.rc"
done

LD_LIBRARY_PATH="$here/lib/ucx${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" UCX_WARN_UNUSED_ENV_VARS=n \
  timeout 120 "$here/bin/gpu_figures" > "$work/figures.json" 2> "$work/figures.err"
echo $? > "$work/figures.rc"

node="$work/node"
if xz -dc "$here/node.xz" > "$node" 2> "$work/node.err" ||
  python3 -c 'import lzma, sys; sys.stdout.buffer.write(lzma.open(sys.argv[1]).read())' "$here/node.xz" > "$node" 2>> "$work/node.err"; then
  chmod +x "$node"
  KVREUSE_TRANSPORT_LIBRARY="$here/lib/libkvreuse_transport.so" KVREUSE_PROBE_GPU=0 NODE_PATH="$here/node_modules" \
    timeout 60 "$node" "$here/probe.mjs" > "$work/probe.json" 2> "$work/probe.err"
  echo $? > "$work/probe.rc"
  "$node" "$here/results.mjs" "$work" "$results"
  exit $?
fi
# Without Node, the parts that ran are still reported, unparsed.
{
  printf '{"pass": false, "error": "the shipped Node could not be unpacked (xz or python3 lzma needed)",\n'
  printf ' "native_rc": [%s, %s], "figures_rc": %s, "figures": %s}\n' "$(cat "$work/native-loopback.rc")" \
    "$(cat "$work/native-ucx.rc")" "$(cat "$work/figures.rc")" \
    "$(cat "$work/figures.json" 2> /dev/null || echo null)"
} > "$results"
exit 1
