#!/usr/bin/env bash
# make_peer_tarball.sh - the llama.cpp source that tools/gpu_detached.sh builds on the GPU
# machine (which has no network) as the peer of ds4rt: the PyPI sdist of llama-cpp-python
# 0.3.36, whose vendor/llama.cpp is llama.cpp 0c1e570 (deepseek4 with CUDA kernels), stripped to
# the CPU and CUDA backends and llama-bench so that it travels in a few MB (docs/GPU.md, "On the
# GPU machine").
#
#   tools/make_peer_tarball.sh [OUT_DIR]    # default .peer (ignored); writes llama.cpp-0c1e570-cpu-cuda.tar.xz
set -euo pipefail
OUT=${1:-.peer}
VERSION=0.3.36
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# --no-build-isolation: reading the sdist's metadata must not build its build tools (cmake) from source
python3 -m pip download -q "llama-cpp-python==$VERSION" --no-deps --no-binary :all: --no-build-isolation -d "$tmp"
tar -C "$tmp" -xzf "$tmp/llama_cpp_python-$VERSION.tar.gz"
src="$tmp/llama_cpp_python-$VERSION/vendor/llama.cpp"
# what llama-bench on the CPU and CUDA backends does not need
rm -rf "$src"/{models,docs,tests,examples,pocs,benches,media,gguf-py,conversion,scripts,skills,ci,app}
for d in "$src"/ggml/src/ggml-*/; do
  case "$d" in */ggml-cpu/ | */ggml-cuda/) ;; *) rm -rf "$d" ;; esac
done
for d in "$src"/tools/*/; do
  [ "$(basename "$d")" = llama-bench ] || rm -rf "$d"
done
printf 'find_package(Threads REQUIRED)\nllama_add_compile_flags()\nadd_subdirectory(llama-bench)\n' \
  >"$src/tools/CMakeLists.txt"
mkdir -p "$OUT"
tar -C "$(dirname "$src")" -cf - llama.cpp | xz -T0 -6 >"$OUT/llama.cpp-0c1e570-cpu-cuda.tar.xz"
ls -la "$OUT/llama.cpp-0c1e570-cpu-cuda.tar.xz"
