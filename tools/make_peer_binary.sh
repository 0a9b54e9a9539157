#!/usr/bin/env bash
# make_peer_binary.sh - llama.cpp's CUDA llama-bench built HERE (no GPU needed: nvcc compiles for
# sm_90 without one) from the tarball of tools/make_peer_tarball.sh, so that the GPU machine
# spends no device time building the peer (docs/GPU.md, "On the GPU machine"). Static
# (BUILD_SHARED_LIBS=OFF); it links cuBLAS from PyPI's nvidia-cublas 13.0 wheel and a stub
# libcuda.so made from cuda.h's entry points (this machine's CUDA has neither; the device's
# driver and toolkit provide the real ones). About 30 minutes on 2 cores.
#
#   tools/make_peer_binary.sh [OUT_DIR]   # default .peer: OUT_DIR/pA/lb.a and OUT_DIR/pB/lb.b
#
# The xz-compressed binary (~41 MB) is split in two because a device call carries at most 64 MiB
# with the working tree (~40 MB): carry .peer/pA in one call (with .trainwhl and .big), .peer/pB
# in the next, back to back while the machine is warm, copying each part to /tmp; then
#   cat /tmp/lb.a /tmp/lb.b | xz -dc > /tmp/lb && chmod +x /tmp/lb
set -euo pipefail
OUT=${1:-.peer}
CUDA=${CUDA:-/usr/local/cuda}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tarball=$(ls "$OUT"/llama.cpp-*-cpu-cuda.tar.xz | head -n 1)

# cuBLAS headers and libraries into the toolkit (once)
if [ ! -f "$CUDA/include/cublas_v2.h" ]; then
  python3 -m pip download -q --no-deps "nvidia-cublas==13.0.*" -d "$work/cublas"
  (cd "$work/cublas" && unzip -q ./*.whl)
  cp "$work"/cublas/nvidia/cu13/include/*.h "$CUDA/include/"
  cp "$work"/cublas/nvidia/cu13/lib/libcublas.so.13 "$work"/cublas/nvidia/cu13/lib/libcublasLt.so.13 "$CUDA/lib64/"
  ln -sf libcublas.so.13 "$CUDA/lib64/libcublas.so"
  ln -sf libcublasLt.so.13 "$CUDA/lib64/libcublasLt.so"
fi

# a stub libcuda.so.1 exporting every driver entry point cuda.h declares (versioned names too)
python3 - "$CUDA/include/cuda.h" "$work/stub.c" <<'EOF'
import re, subprocess, sys
src = open(sys.argv[1]).read()
names = set(re.findall(r"CUresult\s+CUDAAPI\s+(cu[A-Za-z0-9_]+)\s*\(", src))
macros = subprocess.run(["gcc", "-E", "-dM", sys.argv[1]], capture_output=True, text=True).stdout
alias = {p[1]: p[2] for p in (l.split() for l in macros.splitlines())
         if len(p) == 3 and p[0] == "#define" and p[1].startswith("cu") and p[2].startswith("cu")}
out = names | {alias[n] for n in names if n in alias}
open(sys.argv[2], "w").write("".join(f"int {n}(void) {{ return 999; }}\n" for n in sorted(out)))
EOF
gcc -shared -fPIC -o "$work/libcuda.so" "$work/stub.c" -Wl,-soname,libcuda.so.1

tar -C "$work" -xJf "$tarball"
cmake -S "$work/llama.cpp" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=OFF -DGGML_CUDA_NCCL=OFF -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF \
  -DBUILD_SHARED_LIBS=OFF -DGGML_BACKEND_DL=OFF -DGGML_CCACHE=OFF \
  -DCUDA_cuda_driver_LIBRARY="$work/libcuda.so" >"$work/cmake.log"
ninja -C "$work/build" llama-bench
strip -o "$work/llama-bench" "$work/build/bin/llama-bench"
xz -T0 -6 -c "$work/llama-bench" >"$work/lb.xz"
mkdir -p "$OUT/pA" "$OUT/pB"
head -c 15500000 "$work/lb.xz" >"$OUT/pA/lb.a"
tail -c +15500001 "$work/lb.xz" >"$OUT/pB/lb.b"
sha256sum "$work/lb.xz"
ls -la "$OUT/pA" "$OUT/pB"
