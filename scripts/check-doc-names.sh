#!/usr/bin/env bash
# Checks that every function, type, option or constant the documentation and
# the source comments name still exists. Checked forms: a qualified name
# (Engine::WaitDurable, Options::dedupe_window: each part), a name called
# (WaitDurable(...)) and a constant (kBuffered), inside the `...` spans of
# the tracked Markdown files and anywhere in the // comments of the tracked
# C++ sources (there, only calls of names that begin with a capital, as the
# code's own functions do). A name exists if it is an identifier of a C++
# source outside its comments, or of a CMake or shell file (targets,
# functions, variables). Names in the namespaces of other projects (std::,
# absl::, rocksdb::, testing::) are not checked; other names of other
# projects that the text quotes (RocksDB's internals, say) are listed, each
# with its reason, in scripts/doc-names-allowed.txt. A name followed by *
# (a family of names) is skipped. Prints each name that exists nowhere with
# where it is quoted, and exits 1 if there is one.
# Usage: scripts/check-doc-names.sh              check the tree
#        scripts/check-doc-names.sh --self-test  show that stale names fail
#                                                the check and live ones pass
set -euo pipefail
cd "$(dirname "$0")/.."
self_test=0
case "${1:-}" in
  -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  --self-test) self_test=1 ;;
  "") ;;
  *) echo "check-doc-names: unknown argument '$1' (try --help)" >&2; exit 2 ;;
esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The names that exist: identifiers of the code (C and C++ with their //
# comments cut off; CMake, shell and Python with their # comments cut off,
# leaving out this script, whose self-test spells stale names), and the
# allowed.
{
  git ls-files '*.h' '*.cc' '*.c' '*.h.in' | xargs sed -e 's://.*$::'
  git ls-files '*CMakeLists.txt' '*.cmake' '*.sh' '*.py' '*.pyi' '.ci/*' \
    ':!scripts/check-doc-names.sh' | xargs sed -e 's:#.*$::'
} | grep -ohE '[A-Za-z_][A-Za-z0-9_]*' >"$work/names"
sed -e 's:#.*$::' scripts/doc-names-allowed.txt |
  { grep -oE '[A-Za-z_][A-Za-z0-9_]*' || true; } >>"$work/names"
sort -u -o "$work/names" "$work/names"

# check_names MODE FILE...: prints "file:line: name (missing part)" for each
# name quoted in FILEs (MODE doc: Markdown spans; MODE comment: // comments)
# that is not in $work/names.
check_names() {
  local mode=$1
  shift
  awk -v mode="$mode" '
    FNR == NR { known[$0] = 1; next }
    function ident_char(c) { return c ~ /[A-Za-z0-9_]/ }
    function report(name, part) {
      printf "%s:%d: %s (%s does not exist)\n", FILENAME, FNR, name, part
    }
    # Each part of each qualified name in `text`.
    function qualified(text,    rest, name, after, n, parts, i, part) {
      rest = text
      while (match(rest, /[A-Za-z_][A-Za-z0-9_]*(::~?[A-Za-z_][A-Za-z0-9_]*)+/)) {
        name = substr(rest, RSTART, RLENGTH)
        after = substr(rest, RSTART + RLENGTH, 1)
        rest = substr(rest, RSTART + RLENGTH)
        # Namespaces of other projects: not checked here.
        if (name ~ /^(std|absl|rocksdb|testing)::/) continue
        n = split(name, parts, "::")
        for (i = 1; i <= n; i++) {
          part = parts[i]
          sub(/^~/, "", part)
          if (i == n && after == "*") continue
          if (!(part in known)) report(name, part)
        }
      }
    }
    # Each whole identifier matching `re` (called names, constants).
    function whole(text, re,    rest, name, before, after) {
      rest = " " text
      while (match(rest, re)) {
        name = substr(rest, RSTART, RLENGTH)
        before = substr(rest, RSTART - 1, 1)
        after = substr(rest, RSTART + RLENGTH, 1)
        rest = substr(rest, RSTART + RLENGTH)
        if (sub(/\($/, "", name)) after = "("
        if (ident_char(before) || ident_char(after) || after == "*") continue
        if (!(name in known)) report(name, name)
      }
    }
    function check(text, call_re) {
      qualified(text)
      whole(text, call_re)
      whole(text, "k[A-Z][A-Za-z0-9]*")
    }
    mode == "doc" {
      line = $0
      while (match(line, /`[^`]+`/)) {
        span = substr(line, RSTART + 1, RLENGTH - 2)
        line = substr(line, RSTART + RLENGTH)
        check(span, "[A-Za-z_][A-Za-z0-9_]*\\(")
      }
    }
    mode == "comment" && (start = index($0, "//")) > 0 {
      check(substr($0, start + 2), "[A-Z][A-Za-z0-9_]*\\(")
    }
  ' "$work/names" "$@"
}

# Every name the tree quotes.
check_tree() {
  mapfile -t docs < <(git ls-files '*.md')
  mapfile -t sources < <(git ls-files '*.h' '*.cc' '*.h.in')
  check_names doc "${docs[@]}"
  check_names comment "${sources[@]}"
}

if [ "$self_test" -eq 1 ]; then
  # A doc and a header comment that name one stale option, function and
  # constant each, and live names: exactly the stale ones must be reported.
  printf '%s\n' 'Set `Options::durability` to `Durability::kBuffered`,' \
    'not `Options::commit_lock_timeout`; call `Engine::WaitDurable()`,' \
    'not `WaitForCommitLock(sequence)`; `kHoldCommitLock` is gone.' >"$work/stale.md"
  printf '%s\n' '// Engine::ProcessBatch() and Options::durability exist;' \
    '// Engine::CommitLocked and HoldCommitLock() do not, nor kCommitLockHeld.' \
    'int x;  // a trailing comment naming Options::no_such_knob' >"$work/stale.h"
  found=$( (check_names doc "$work/stale.md"; check_names comment "$work/stale.h") |
    sed -e 's:^.*/::' | sort)
  expected=$(sort <<'EOF'
stale.md:2: Options::commit_lock_timeout (commit_lock_timeout does not exist)
stale.md:3: WaitForCommitLock (WaitForCommitLock does not exist)
stale.md:3: kHoldCommitLock (kHoldCommitLock does not exist)
stale.h:2: Engine::CommitLocked (CommitLocked does not exist)
stale.h:2: HoldCommitLock (HoldCommitLock does not exist)
stale.h:2: kCommitLockHeld (kCommitLockHeld does not exist)
stale.h:3: Options::no_such_knob (no_such_knob does not exist)
EOF
  )
  if [ "$found" != "$expected" ]; then
    echo "check-doc-names: self-test FAILED; expected:" >&2
    echo "$expected" >&2
    echo "found:" >&2
    echo "$found" >&2
    exit 1
  fi
  echo "check-doc-names: self-test passed (stale names reported, live ones not)"
  exit 0
fi

missing=$(check_tree | sort -u)
if [ -n "$missing" ]; then
  echo "$missing"
  echo "check-doc-names: the documentation or comments name what does not exist" >&2
  exit 1
fi
echo "check-doc-names: every quoted name exists"
