#!/usr/bin/env bash
# The GPU check, on a machine with an NVIDIA GPU (bare: no network, no toolchain), from the payload
# tools/gpu-check/prepare.sh made: writes one results file (JSON), by default $OUT/gpu-check-results.json
# (or beside this script when OUT is unset), with pass or fail for each check and figure of issue 31.
# Exits 0 only when every one passed; 2 when there is no GPU (the driver or a device is missing: nothing
# else runs, and the file says why); 1 otherwise.
#   bash tools/gpu-check/payload/run.sh [results file]
# Parts, each under its own timeout (290 s in all, so that the results file is written within a 5-minute
# call; well under one minute expected on an H200; over the fake driver of a dry run about 55 s):
# - preflight: gpu_figures preflight, whether the library loads the driver and sees a GPU;
# - the native tests of the CUDA domain on the machine's driver (test_cuda, KVT_TEST_CUDA_REAL=1, on the
#   loopback and ucx backends: vram allocation, registration, pulls within a process and from another
#   process through CUDA IPC and host-staged; the kernels), test_vram_import on ucx (an
#   engine's vram opened by a sidecar process through its IPC handle, served and pulled by a third process)
#   test_vram_routes on ucx (template posts expanded on the GPU, routes of every shape; large descriptors
#   cut there), test_staged_in_place on ucx (host-staged chunks written in place into the reader's bounce
#   buffer) and test_vram_withdrawn on ucx (an owner's free of its vram waits for the reader processes that
#   have it open; two regions of one allocation share the reader's one mapping);
# - the figures (gpu_figures: the library's pull of another process's vram, and the driver's own IPC copy
#   and gather, against one device-to-device copy; a pinned host-to-device copy; the checksum kernel's rate);
# - the facade's vram probe under the shipped Node;
# - the whole fetch between vram banks through the endpoints of two processes (fetch.mjs);
# - the main job (`kvreuse demo`, bundled) with the Qwen3 profile declared: GPU reuse, its vram pull.
set -u
here=$(cd "$(dirname "$0")" && pwd)
results=${1:-${OUT:-$here}/gpu-check-results.json}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LD_LIBRARY_PATH="$here/lib/ucx${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" UCX_WARN_UNUSED_ENV_VARS=n \
  KVREUSE_TRANSPORT_LIBRARY="$here/lib/libkvreuse_transport.so"

# part <name> <seconds> <command...>: stdout to <name>.log (or .json), its status to <name>.rc.
part() {
  local name=$1 seconds=$2 output=$1.log
  shift 2
  case $name in preflight | figures | probe | fetch | demo) output=$name.json ;; esac
  timeout "$seconds" "$@" > "$work/$output" 2> "$work/$name.err"
  echo $? > "$work/$name.rc"
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$work/gpus.txt" 2>&1
echo $? > "$work/gpus.rc"
part preflight 10 "$here/bin/gpu_figures" preflight

node="$work/node"
if ! { xz -dc "$here/node.xz" > "$node" 2> "$work/node.err" ||
  python3 -c 'import lzma, sys; sys.stdout.buffer.write(lzma.open(sys.argv[1]).read())' "$here/node.xz" > "$node" 2>> "$work/node.err"; }; then
  # Without Node, what the preflight found is still reported, unparsed.
  printf '{"pass": false, "error": "the shipped Node could not be unpacked (xz or python3 lzma needed)", "preflight_rc": %s, "preflight": %s}\n' \
    "$(cat "$work/preflight.rc")" "$(cat "$work/preflight.json" 2> /dev/null || echo null)" > "$results"
  echo "gpu-check: the shipped Node could not be unpacked; results in $results"
  exit 1
fi
chmod +x "$node"

if [ "$(cat "$work/preflight.rc")" = 0 ]; then
  # Both backends: the ucx one (UCX shipped in lib/ucx) adds the pulls from another process's vram.
  for backend in loopback ucx; do
    KVT_TEST_CUDA_REAL=1 KVT_TEST_BACKEND=$backend part "native-$backend" 35 "$here/bin/test_cuda"
  done
  KVT_TEST_CUDA_REAL=1 KVT_TEST_BACKEND=ucx part vram_import-ucx 20 "$here/bin/test_vram_import"
  KVT_TEST_CUDA_REAL=1 KVT_TEST_BACKEND=ucx part vram_routes-ucx 15 "$here/bin/test_vram_routes"
  KVT_TEST_CUDA_REAL=1 KVT_TEST_BACKEND=ucx part staged_in_place-ucx 10 "$here/bin/test_staged_in_place"
  KVT_TEST_CUDA_REAL=1 KVT_TEST_BACKEND=ucx part vram_withdrawn-ucx 10 "$here/bin/test_vram_withdrawn"
  part figures 60 "$here/bin/gpu_figures"
  KVREUSE_PROBE_GPU=0 part probe 15 "$node" "$here/probe.mjs"
  part fetch 25 "$node" "$here/fetch.mjs"
  (cd "$work" && part demo 55 "$node" "$here/cli/dist/bin.js" demo -o json \
    --profile-name qwen3-0.6b-bf16-b64 --router-enable-decode-to-prefill-gpu-reuse)
fi
"$node" "$here/results.mjs" "$work" "$results"
