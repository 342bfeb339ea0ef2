#!/usr/bin/env bash
# Regenerates the committed seed corpus of the rpcrdma2-proto fuzz targets,
# host/rpcrdma2-proto/fuzz/seeds/<target>/, from the hand-made fixtures
# (tests/fixtures/*.hex|*.bin) and a deterministic sample of ~20 messages
# captured from the C xprtrdma over the C siw (tests/fixtures/c-xprtrdma-siw).
# Seeds are capped at 4 KiB (headers sit at the front). scripts/fuzz.sh passes
# the directory to `cargo fuzz run <target> <corpus> <seeds>`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
crate="$here/../host/rpcrdma2-proto"
fix="$crate/tests/fixtures"
out="$crate/fuzz/seeds"
max=4096

hex2bin() { sed 's/#.*//' "$1" | tr -cd '0-9a-fA-F' | xxd -r -p; }

rm -rf "$out"
for t in decode_any decode_v1 decode_v2 decode_side reassembly wire; do mkdir -p "$out/$t"; done

# Whole transport messages: the hand-made fixtures and the capture sample.
msgs=$(mktemp -d)
trap 'rm -rf "$msgs"' EXIT
for f in "$fix"/*.hex; do hex2bin "$f" >"$msgs/$(basename "$f" .hex)"; done
for f in "$fix"/*.bin; do [ -e "$f" ] && head -c $max "$f" >"$msgs/$(basename "$f" .bin)"; done
sample() { (cd "$fix/c-xprtrdma-siw" && ls -- *"$1" | LC_ALL=C sort | awk -v n="$2" 'NR % n == 1'); }
for f in $(sample -call.bin 12) $(sample -reply.bin 12); do
  head -c $max "$fix/c-xprtrdma-siw/$f" >"$msgs/siw-${f%.bin}"
done
for f in "$msgs"/*; do
  for t in decode_any decode_v1 decode_v2 wire; do cp "$f" "$out/$t/"; done
done

# decode_side: CM private data, ERR_VERS layouts, and bare property sets.
for kind in call reply; do
  f=$(cd "$fix/c-xprtrdma-siw" && ls -- *"mpa-$kind-private-data.bin" | LC_ALL=C sort | head -1)
  cp "$fix/c-xprtrdma-siw/$f" "$out/decode_side/siw-${f%.bin}"
done
for f in "$msgs"/*err-vers* "$msgs"/*connprop*; do cp "$f" "$out/decode_side/"; done
for f in "$msgs"/*connprop*; do tail -c +21 "$f" >"$out/decode_side/$(basename "$f")-propset"; done

# reassembly: messages cut by a leading length byte; all v2 fixtures in one
# stream, and each one alone.
stream="$out/reassembly/v2-fixtures"
: >"$stream"
for f in "$msgs"/v2-*; do
  n=$(wc -c <"$f")
  [ "$n" -le 255 ] || continue
  printf "\\$(printf '%03o' "$n")" >"$out/reassembly/$(basename "$f")"
  cat "$f" >>"$out/reassembly/$(basename "$f")"
  cat "$out/reassembly/$(basename "$f")" >>"$stream"
done
for t in "$out"/*; do echo "fuzz-seeds: $(basename "$t"): $(ls "$t" | wc -l) seeds"; done
