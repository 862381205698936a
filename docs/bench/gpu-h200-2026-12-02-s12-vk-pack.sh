#!/bin/bash
# vk helper, session 12: strips and xz-compresses the binaries a device run carries into
# /work/main/.vk-helper (git-ignored there): the CLI built from this worktree (`lowbit`), and
# with `old` main's CLI (`lowbit_old`, built at main's HEAD) and with `tests` the
# lowbit-vulkan test executable `matmul`, plus the run scripts given after the keywords.
set -e
W=/work/wt/vk; D=/work/main/.vk-helper; mkdir -p $D
pack() { cp "$1" "$D/$2"; strip "$D/$2"; xz -T2 -f "$D/$2"; }
pack $W/target/release/lowbit lowbit
for a in "$@"; do
  case $a in
    old) pack /work/main/target/release/lowbit lowbit_old ;;
    tests) pack "$(ls -t $W/target/release/deps/matmul-* | grep -v '\.d$' | head -1)" matmul ;;
    *) cp "$a" $D/ ;;
  esac
done
ls -la $D
