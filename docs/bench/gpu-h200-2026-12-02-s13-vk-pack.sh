#!/bin/bash
# vk helper, session 13: strips and xz-compresses what a device run carries into
# /work/main/.vk-helper (git-ignored there): the CLI built from this worktree as NAME (first
# argument: lowbit or lowbit_old), with `tests` the lowbit-vulkan test executable `matmul`,
# plus the run scripts given after the keywords.
set -e
W=/work/wt/vk; D=/work/main/.vk-helper; mkdir -p $D
pack() { cp "$1" "$D/$2"; strip "$D/$2"; xz -T2 -f "$D/$2"; }
name=$1; shift
pack $W/target/release/lowbit $name
for a in "$@"; do
  case $a in
    tests) pack "$(ls -t $W/target/release/deps/matmul-* | grep -v '\.d$' | head -1)" matmul ;;
    *) cp "$a" $D/ ;;
  esac
done
ls -la $D
