#!/usr/bin/env bash
# Writes a calibration text for `lowbit imatrix` that shares no file with the evaluation text of
# tools/eval_text.sh (GPL-3, Apache-2.0, GPL-2): the other license texts Debian's base-files
# package installs under /usr/share/common-licenses (Artistic, BSD, CC0-1.0, GFDL-1.3, GPL-1,
# LGPL-2.1, MPL-2.0, MPL-1.1), concatenated in that order, to OUT (default
# target/ext/calib.txt); prints its path. 119,256 bytes, 36 chunks of 512 SmolLM2 tokens
# and more. Not committed: it comes from the installed package.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-target/ext/calib.txt}"
mkdir -p "$(dirname "$out")"
src=/usr/share/common-licenses
files=(Artistic BSD CC0-1.0 GFDL-1.3 GPL-1 LGPL-2.1 MPL-2.0 MPL-1.1)
if ! [ -f "$src/MPL-1.1" ]; then
    tmp="$(mktemp -d)"
    (cd "$tmp" && apt-get download base-files >/dev/null && dpkg-deb -x base-files_*.deb root)
    src="$tmp/root/usr/share/common-licenses"
fi
(cd "$src" && cat "${files[@]}") > "$out.tmp"
mv "$out.tmp" "$out"
echo "$out"
