#!/usr/bin/env bash
# Compiles every lowbit HIP kernel source (backends/hip/kernels/*.hip) to AMD code objects for
# the targets the HIP backend ships (gfx1100, gfx1151, gfx1201 = RDNA3/3.5/4 wave32; gfx942 =
# CDNA3 wave64) with a plain clang (no ROCm install: -nogpuinc -nogpulib, our own header).
# A compile error or a missing expected instruction fails the script. It also type-checks the
# NVIDIA branch of the header (clang -x cuda -fsyntax-only with tools/hip_nvrtc_stub.h standing
# in for NVRTC's built-ins), which catches most errors NVRTC would report.
#
# Usage: tools/hip_compile_check.sh [OUTDIR]   (CLANG=clang-19 by default)
# Needs: clang-19, lld-19 and llvm-19 (llvm-objdump-19, llvm-readelf-19): Debian/Ubuntu
# packages of the same names.
set -euo pipefail
CLANG=${CLANG:-clang-19}
root=$(cd "$(dirname "$0")/.." && pwd)
src="$root/backends/hip/kernels"
out=${1:-$(mktemp -d)}
mkdir -p "$out"
command -v "$CLANG" >/dev/null || { echo "hip_compile_check: $CLANG not found" >&2; exit 2; }
flags=(-x hip --cuda-device-only --no-gpu-bundle-output -nogpuinc -nogpulib -O3 -std=c++17 -Werror -Wall -I "$src")
status=0
for f in "$src"/*.hip; do
  base=$(basename "$f" .hip)
  for arch in gfx1100 gfx1151 gfx1201 gfx942; do
    obj="$out/$base.$arch.co"
    if ! "$CLANG" "${flags[@]}" --offload-arch="$arch" -c "$f" -o "$obj"; then
      echo "FAIL $base $arch" >&2; status=1; continue
    fi
    asm=$(llvm-objdump-19 -d "$obj"; llvm-readelf-19 --notes "$obj")
    case $arch in
      gfx942) want_dot='v_dot4c_i32_i8'; want_wave=64 ;;
      *) want_dot='v_dot4_i32_iu8'; want_wave=32 ;;
    esac
    grep -q "$want_dot" <<<"$asm" || { echo "FAIL $base $arch: no $want_dot" >&2; status=1; }
    grep -q "v_perm_b32" <<<"$asm" || { echo "FAIL $base $arch: no v_perm_b32" >&2; status=1; }
    grep -qi "wavefront_size: *$want_wave" <<<"$asm" || { echo "FAIL $base $arch: not wave$want_wave" >&2; status=1; }
    echo "ok $base $arch ($(stat -c %s "$obj") bytes, $want_dot, wave$want_wave)"
  done
  if "$CLANG" -x cuda --cuda-device-only --cuda-gpu-arch=sm_90 -nocudainc -nocudalib -std=c++17 \
      -fsyntax-only -Werror -Wall -include "$root/tools/hip_nvrtc_stub.h" -I "$src" "$f"; then
    echo "ok $base nvidia (syntax, sm_90)"
  else
    echo "FAIL $base nvidia (syntax)" >&2; status=1
  fi
done
exit $status
