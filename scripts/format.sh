#!/usr/bin/env bash
# clang-format (style: .clang-format) over every C++ source in the repository.
# Usage: scripts/format.sh          rewrite the files in place
#        scripts/format.sh --check  change nothing; exit 1 and name each file
#                                   that is not formatted (what CI runs)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null ||
  { echo "format: clang-format is missing (scripts/install-deps.sh clang-format)" >&2; exit 1; }
mapfile -t files < <(git ls-files '*.cc' '*.h' '*.h.in')
case "${1:-}" in
  --check) clang-format --dry-run -Werror "${files[@]}" ;;
  "") clang-format -i "${files[@]}" ;;
  -h|--help) sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "format: unknown argument '$1' (try --help)" >&2; exit 2 ;;
esac
