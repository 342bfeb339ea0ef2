#!/usr/bin/env bash
# Prepare the kernel tree the project builds against:
#   extract  - unpack Debian's linux-source-6.12 into $KTREE (once)
#   overlay  - copy rust/ files over it, apply patches/ to existing files, write .config
# Files are only written when their content changes, so make rebuilds only what changed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"

extract() {
  [ -f "$KTREE/.rsiw-extracted" ] && return 0
  [ -f "$KSRC_TARBALL" ] || { echo "kernel-tree: $KSRC_TARBALL missing: run 'make setup'" >&2; exit 1; }
  echo "kernel-tree: extracting $KSRC_TARBALL into $KTREE"
  rm -rf "$KTREE.tmp" && mkdir -p "$KTREE.tmp"
  tar -xJf "$KSRC_TARBALL" -C "$KTREE.tmp" --strip-components=1
  rm -rf "$KTREE" "$RSIW_CACHE/pristine" && mv "$KTREE.tmp" "$KTREE"
  touch "$KTREE/.rsiw-extracted"
}

# install_if_changed SRC DST: copy only when the bytes differ (keeps mtimes stable).
install_if_changed() {
  if ! cmp -s "$1" "$2"; then
    mkdir -p "$(dirname "$2")"
    cp "$1" "$2"
    echo "  updated ${2#$KTREE/}"
  fi
}

overlay() {
  extract
  # 1. New files: everything under rust/ in the repo lands at the same path in the tree.
  (cd "$RSIW_TOP" && find rust -type f ! -name '*.md' -print 2>/dev/null || true) | while read -r f; do
    install_if_changed "$RSIW_TOP/$f" "$KTREE/$f"
  done

  # 2. Edits to existing kernel files: the patch series, applied to pristine copies in a
  #    staging area. A file's pristine copy is saved the first time any patch touches it.
  local pristine="$RSIW_CACHE/pristine" stage
  stage=$(mktemp -d)
  mkdir -p "$pristine"
  local files
  files=$(cat "$RSIW_TOP"/patches/*.patch 2>/dev/null | sed -n 's|^+++ b\/\([^\t ]*\).*|\1|p' | sort -u || true)
  for f in $files; do
    if [ ! -f "$pristine/$f" ]; then
      mkdir -p "$(dirname "$pristine/$f")"
      if [ -f "$KTREE/$f" ]; then cp "$KTREE/$f" "$pristine/$f"; else : >"$pristine/$f"; fi
    fi
    mkdir -p "$(dirname "$stage/$f")"
    cp "$pristine/$f" "$stage/$f"
  done
  for p in "$RSIW_TOP"/patches/*.patch; do
    [ -f "$p" ] || continue
    patch -s -p1 -d "$stage" --no-backup-if-mismatch <"$p" || { echo "kernel-tree: $p does not apply" >&2; exit 1; }
  done
  for f in $files; do install_if_changed "$stage/$f" "$KTREE/$f"; done
  rm -rf "$stage"
  # Files an earlier series touched and this one does not go back to their pristine copies
  # (an empty copy stands for a file a patch created: it goes).
  (cd "$pristine" && find . -type f | sed 's|^\./||') | while read -r f; do
    grep -qxF "$f" <<<"$files" && continue
    if [ -s "$pristine/$f" ]; then
      install_if_changed "$pristine/$f" "$KTREE/$f"
    elif [ -e "$KTREE/$f" ]; then
      rm -f "$KTREE/$f"
      echo "  removed ${f}"
    fi
  done

  # 3. Config: base + the project's fragment, resolved by Kconfig; rewritten only on change.
  local cfg="$RSIW_CACHE/config.new"
  KCONFIG_CONFIG="$cfg" "$KTREE/scripts/kconfig/merge_config.sh" -m -O "$RSIW_CACHE" \
    "$RSIW_TOP/kunit/config/base.config" "${fragments[@]}" >/dev/null
  cp "$cfg" "$RSIW_CACHE/config.merged"
  # olddefconfig on a scratch copy, so the tree's .config only changes if the result does.
  cp "$cfg" "$RSIW_CACHE/.config"
  make -s -C "$KTREE" LLVM=1 O= KCONFIG_CONFIG="$RSIW_CACHE/.config" olddefconfig >/dev/null
  install_if_changed "$RSIW_CACHE/.config" "$KTREE/.config"
  check_config
}

# Every option the fragments ask for must have survived Kconfig (a dependency can drop it); a
# later fragment overrides an earlier one, and `=n` means "not set".
check_config() {
  local bad=0 line opt want
  declare -A wanted=()
  while read -r line; do
    case "$line" in CONFIG_*=*) ;; *) continue ;; esac
    wanted[${line%%=*}]=${line#*=}
  done < <(cat "${fragments[@]}")
  for opt in "${!wanted[@]}"; do
    want=${wanted[$opt]}
    if [ "$want" = n ]; then
      grep -q "^$opt=" "$KTREE/.config" || continue
    elif grep -qx "$opt=$want" "$KTREE/.config"; then
      continue
    fi
    echo "kernel-tree: $opt=$want requested but .config has: $(grep "^$opt=" "$KTREE/.config" || echo unset)" >&2
    bad=1
  done
  [ "$bad" = 0 ] || exit 1
}

# The project's fragments onto base.config: rsiw.config, and for the bench flavour bench.config.
fragments=("$RSIW_TOP/kunit/config/rsiw.config")
[ "$RSIW_FLAVOUR" = bench ] && fragments+=("$RSIW_TOP/kunit/config/bench.config")

case "${1:-overlay}" in
  extract) extract ;;
  overlay) overlay ;;
  *) echo "usage: $0 [extract|overlay]" >&2; exit 2 ;;
esac
