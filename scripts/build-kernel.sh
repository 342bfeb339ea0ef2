#!/usr/bin/env bash
# Build the Rust-enabled kernel (bzImage + in-tree modules) and then the project's out-of-tree
# modules (Kbuild at the top of the repo) against it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"

"$here/kernel-tree.sh" overlay
export CCACHE_DIR
start=$(date +%s)
kmake bzImage modules >"$RSIW_CACHE/kernel-build.log" 2>&1 || {
  tail -40 "$RSIW_CACHE/kernel-build.log" >&2
  echo "build-kernel: kernel build failed (full log: $RSIW_CACHE/kernel-build.log)" >&2
  exit 1
}
echo "build-kernel: kernel ready in $(( $(date +%s) - start )) s ($(make -s -C "$KTREE" kernelrelease))"

# Our modules, out of tree. Kbuild writes objects next to the sources, so build a copy kept in
# the cache (synced by content) and leave the clone clean.
mod="$RSIW_CACHE/modules-src"
mkdir -p "$mod"
rsync -rc --delete --exclude .git --exclude host --exclude target "$RSIW_TOP/" "$mod/" \
  --filter='P *.o' --filter='P *.ko' --filter='P .*.cmd' --filter='P *.mod*' \
  --filter='P Module.symvers' --filter='P modules.order' --filter='P *.rmeta' --filter='P *.d'
kmake M="$mod" modules ${RSIW_DELIBERATE_FAIL:+RSIW_DELIBERATE_FAIL=1} \
  >"$RSIW_CACHE/modules-build.log" 2>&1 || {
  cat "$RSIW_CACHE/modules-build.log" >&2
  echo "build-kernel: module build failed" >&2
  exit 1
}
echo "build-kernel: modules: $(sed -e 's/\.o$/.ko/' -e 's|.*/||' "$mod/modules.order" | tr '\n' ' ')"
