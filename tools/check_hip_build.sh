#!/usr/bin/env bash
# check_hip_build.sh - compile and link the AMD build (-Dgpu=hip) of ds4rt for gfx1151 with a
# current hipcc, inside a Debian 13 (trixie) chroot, on any Debian machine without an AMD GPU.
# Nothing runs on a GPU: this checks that every kernel file under hip/ compiles for the target
# and that libds4rt and the C test programs link against libamdhip64 (docs/GPU.md).
#
#   sudo tools/check_hip_build.sh [CHROOT_DIR]          # default /work/trixie
#
# Idempotent: the chroot is made with debootstrap only when CHROOT_DIR has none, the packages
# are installed only when hipcc is missing there, and the build directory is set up afresh each
# run. Environment: MIRROR (Debian mirror, default http://deb.debian.org/debian), HIP_ARCH
# (default gfx1151, a comma-separated list for several), JOBS (ninja -j, default 2), CC/CXX for
# the host compiler inside the chroot (default clang-17/clang++-17, which hipcc itself needs).
#
# Why a chroot: Debian 12's hipcc (5.2, clang-15) rejects gfx1151; trixie's (5.7.1, clang-17)
# and its rocm-device-libs know it. Run from the repository root (or anywhere inside it); the
# repository is bind-mounted read-only at /src in the chroot and the build goes to
# /var/tmp/ds4rt-hip-build there. Output: the build log, then a summary (hipcc version, the
# warnings, the AMD code objects found in each kernel object and in libds4rt.so) on stdout.
set -euo pipefail

ROOT=${1:-/work/trixie}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
HIP_ARCH=${HIP_ARCH:-gfx1151}
JOBS=${JOBS:-2}
HOST_CC=${CC:-clang-17}
HOST_CXX=${CXX:-clang++-17}
SRC=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
PACKAGES="hipcc libamdhip64-dev rocm-device-libs-17 meson ninja-build pkgconf binutils"

if [ "$(id -u)" != 0 ]; then
    echo "check_hip_build.sh: needs root (debootstrap, chroot, mount)" >&2
    exit 2
fi

# 1. the chroot
if [ ! -x "$ROOT/usr/bin/apt-get" ]; then
    command -v debootstrap > /dev/null || apt-get install -y --no-install-recommends debootstrap
    mkdir -p "$ROOT"
    debootstrap --variant=minbase trixie "$ROOT" "$MIRROR"
fi

# mounts, undone on every exit
MOUNTED=()
cleanup() {
    local i
    for ((i = ${#MOUNTED[@]} - 1; i >= 0; i--)); do umount "${MOUNTED[$i]}" || true; done
}
trap cleanup EXIT
mount_once() { # mount_once <target> <mount args...>
    local target=$1
    shift
    mkdir -p "$target"
    if ! mountpoint -q "$target"; then
        mount "$@" "$target"
        MOUNTED+=("$target")
    fi
}
mount_once "$ROOT/proc" -t proc proc
mount_once "$ROOT/src" --bind "$SRC"
mount -o remount,bind,ro "$ROOT/src"

in_root() { chroot "$ROOT" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }

# 2. the toolchain
if ! in_root sh -c 'command -v hipcc && command -v meson && command -v "$0"' "$HOST_CC" > /dev/null; then
    in_root apt-get update
    in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $PACKAGES
fi

# 3. configure and build (HIP_PLATFORM=amd: meson.build passes it to hipcc too)
BUILD=/var/tmp/ds4rt-hip-build
rm -rf "$ROOT$BUILD"
LOG=$ROOT/var/tmp/ds4rt-hip-build.log
set +e
in_root env HIP_PLATFORM=amd CC="$HOST_CC" CXX="$HOST_CXX" sh -c "
    cd /src &&
    meson setup $BUILD -Dgpu=hip -Dhip_arch=$HIP_ARCH -Dpython=false -Dtest_programs=true \
        -Dwerror=true &&
    ninja -C $BUILD -j$JOBS" 2>&1 | tee "$LOG"
rc=${PIPESTATUS[0]}
set -e

# 4. summary
echo
echo "== check_hip_build summary (HIP_ARCH=$HIP_ARCH) =="
in_root sh -c 'hipcc --version 2>/dev/null | head -n 3; dpkg-query -W hipcc libamdhip64-dev rocm-device-libs-17'
echo "warnings in the build log: $(grep -c 'warning:' "$LOG" || true)"
grep 'warning:' "$LOG" | sort | uniq -c | sort -rn | head -n 40 || true
if [ "$rc" != 0 ]; then
    echo "RESULT: FAILED (rc=$rc); errors:"
    grep -E 'error:|Error' "$LOG" | head -n 40 || true
    exit "$rc"
fi
# Each kernel object carries its device code in a .hip_fatbin section: a clang offload bundle
# with one code object per arch. Per object and arch: the kernels, their wavefront sizes, the
# largest VGPR count, LDS and scratch (private segment; > 0 means spills or stack), from the
# code object's AMDHSA metadata notes.
cat > "$ROOT/var/tmp/ds4rt-hip-inspect.sh" <<'EOF'
cd "$1"
for o in *.o; do
    objcopy -O binary --only-section=.hip_fatbin "$o" /tmp/k.fatbin
    for t in $(clang-offload-bundler-17 --list --type=o --input=/tmp/k.fatbin | grep amdgcn); do
        clang-offload-bundler-17 --unbundle --type=o --input=/tmp/k.fatbin --targets="$t" --output=/tmp/k.co
        llvm-readelf-17 --notes /tmp/k.co | awk -v o="$o" -v t="$t" '
            /^ +\.name:/ { n++ }
            /\.wavefront_size:/ { w[$2]++ }
            /\.vgpr_count:/ { if ($2 > v) v = $2 }
            /\.group_segment_fixed_size:/ { if ($2 > l) l = $2 }
            /\.private_segment_fixed_size:/ { if ($2 > 0) p++ }
            /\.[sv]gpr_spill_count:/ { if ($2 > 0) sp++ }
            END { ws = ""; for (k in w) ws = ws k "x" w[k] " "
                  printf "%s %s: %d kernels, wavefront %s, max VGPRs %d, max LDS %d B, %d with scratch, %d with spills\n",
                         o, t, n, ws, v, l, p, sp }'
    done
done
echo "libds4rt.so.1 device code section: $(readelf -SW libds4rt.so.1 | grep -o '\.hip_fatbin' | sort -u)"
echo "kernel launch stubs in libds4rt.so.1: $(nm -C libds4rt.so.1 | grep -c '__device_stub__')"
echo "libamdhip64: $(ldd libds4rt.so.1 | grep amdhip64 | sed 's/ (0x.*//')"
echo "C test programs linked: $(find tests -maxdepth 1 -type f -executable -printf '%f ' | tr ' ' '\n' | sort | tr '\n' ' ')"
EOF
in_root sh /var/tmp/ds4rt-hip-inspect.sh "$BUILD"
echo "RESULT: OK"
