#!/usr/bin/env bash
# Checks that every path the documentation quotes exists: each `...` span in
# the tracked Markdown files that names a file or directory of the
# repository (a top-level folder such as engine/ or docs/, a public header as
# idem/engine.h, or a build product under build/, which must have been built;
# a generated header may be in build/include/)
# must exist; `x.{h,cc}` stands for x.h and x.cc. Spans with placeholders
# (<name>, *) are skipped. Prints each missing path with where it is quoted,
# and exits 1 if there is one.
# Usage: scripts/check-doc-paths.sh   (after scripts/build.sh, for build/)
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "check-doc-paths: unknown argument '$1' (try --help)" >&2; exit 2 ;;
esac
roots='(\.ci|bench|brokers|build|c|cli|cmake|crash|docs|engine|examples|include|kafka|nats|python|rabbitmq|redis|scripts|servers|tests|tools|util|idem)/'
missing=0
while IFS=: read -r file line span; do
  path=${span//\`/}
  [[ $path =~ ^$roots ]] || continue
  [[ $path == *'<'* || $path == *'*'* ]] && continue
  [[ $path == idem/* ]] && path=include/$path
  candidates=("$path")
  if [[ $path =~ ^(.*)\{([^}]*)\}(.*)$ ]]; then
    candidates=()
    IFS=, read -ra parts <<<"${BASH_REMATCH[2]}"
    for p in "${parts[@]}"; do
      candidates+=("${BASH_REMATCH[1]}$p${BASH_REMATCH[3]}")
    done
  fi
  for c in "${candidates[@]}"; do
    # Generated headers (idem/version.h) live in the build tree.
    if [ ! -e "$c" ] && ! [[ $c == include/* && -e build/$c ]]; then
      echo "$file:$line: $c does not exist"
      missing=1
    fi
  done
done < <(git ls-files '*.md' | xargs grep -noE '`[^` ]+`' | sort -u)
if [ "$missing" -ne 0 ]; then
  echo "check-doc-paths: the documentation quotes paths that do not exist" >&2
  exit 1
fi
echo "check-doc-paths: every quoted path exists"
