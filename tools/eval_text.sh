#!/usr/bin/env bash
# Writes the evaluation text for perplexity and KL divergence to OUT (default
# target/ext/licenses.txt) and prints its path: the GPL-3, Apache-2.0 and GPL-2 texts that
# Debian's base-files package installs under /usr/share/common-licenses, concatenated in that
# order, byte for byte (the same text llama.cpp's reference figures in issue 5 were measured on).
# The text is not committed: it comes from the installed package (or, when a file is missing,
# from `apt-get download base-files`, unpacked with dpkg-deb).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-target/ext/licenses.txt}"
mkdir -p "$(dirname "$out")"
src=/usr/share/common-licenses
if ! [ -f "$src/GPL-3" ] || ! [ -f "$src/Apache-2.0" ] || ! [ -f "$src/GPL-2" ]; then
    tmp="$(mktemp -d)"
    (cd "$tmp" && apt-get download base-files >/dev/null && dpkg-deb -x base-files_*.deb root)
    src="$tmp/root/usr/share/common-licenses"
fi
cat "$src/GPL-3" "$src/Apache-2.0" "$src/GPL-2" > "$out.tmp"
mv "$out.tmp" "$out"
echo "$out"
