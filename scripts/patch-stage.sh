#!/usr/bin/env bash
# Developer tool for the patch series (patches/*.patch, edits to existing kernel files).
#   patch-stage.sh start FILE...      stage FILEs (kernel-tree paths) as the current series
#                                     leaves them, in $RSIW_CACHE/patch-stage/{a,b}
#   (edit the copies under b/)
#   patch-stage.sh finish NAME "Subject" ["Body"]   write patches/NAME.patch from a/ -> b/
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
stage="$RSIW_CACHE/patch-stage"
case "${1:-}" in
  start)
    shift
    rm -rf "$stage" && mkdir -p "$stage/a" "$stage/b"
    # Every file the series touches is staged too, so the series applies as a whole.
    series=$(cat "$RSIW_TOP"/patches/*.patch 2>/dev/null | sed -n 's|^+++ b\/\([^\t ]*\).*|\1|p' || true)
    for f in $(printf '%s\n' "$@" $series | sort -u); do
      mkdir -p "$(dirname "$stage/a/$f")"
      if [ -f "$RSIW_CACHE/pristine/$f" ]; then cp "$RSIW_CACHE/pristine/$f" "$stage/a/$f"
      else cp "$KTREE/$f" "$stage/a/$f"; fi
    done
    # Bring the staged files to where the existing series leaves them.
    for p in "$RSIW_TOP"/patches/*.patch; do
      [ -f "$p" ] || continue
      patch -s -p1 -d "$stage/a" --no-backup-if-mismatch <"$p" || { echo "$p does not apply" >&2; exit 1; }
    done
    cp -r "$stage/a/." "$stage/b/"
    echo "edit the files under $stage/b, then: $0 finish NAME \"Subject\" \"Body\""
    ;;
  finish)
    name=$2; subject=$3; body=${4:-}
    out="$RSIW_TOP/patches/$name.patch"
    { printf 'From: rsiw project\nSubject: [PATCH] %s\n\n' "$subject"
      [ -n "$body" ] && printf '%s\n\n' "$body"
      printf -- '---\n'
      (cd "$stage" && diff -ruN a b) || true; } >"$out"
    echo "wrote $out"
    ;;
  *) echo "usage: $0 start FILE... | finish NAME SUBJECT [BODY]" >&2; exit 2 ;;
esac
