#!/usr/bin/env bash
# tests/cli/layers.sh's rules fail on a planted violation of each, naming the
# file and the rule, and pass what stays within them. A copy of the source
# folders gets: a 501-line library file (and a 500-line one), a 21-field
# struct in trainer/ (and a 20-field one), an fprintf(stderr in ckpt/ (and
# one in a comment and a string), a callback type in ckpt.h; layers.sh must
# print the four FAIL lines and none for the controls.
set -euo pipefail
SRC=${BOOST_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/layers_rules.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
for d in kernels trainer ckpt tools; do
  (cd "$SRC" && find "$d" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -print0) |
    (cd "$SRC" && xargs -0 cp --parents -t "$tmp")
done

lines() { for ((i = 1; i <= $1; i++)); do echo "int planted_$2_$i;"; done; }
lines 501 long >"$tmp/trainer/model/planted_long.c"
lines 500 edge >"$tmp/trainer/model/planted_edge.c"
fields() { echo "struct $2 {"; for ((i = 0; i < $1; i++)); do echo "  int f$i;"; done; echo "};"; }
{ echo '#include "model.h"'; fields 21 planted_wide; fields 20 planted_fits; } >"$tmp/trainer/model/planted_struct.c"
cat >"$tmp/ckpt/read/planted_print.c" <<'C'
#include <stdio.h>
/* a comment that says fprintf(stderr, "x") is no print */
static const char *words = "printf(\"no\") in a string";
void planted_print(void) {
  (void)words;
  fprintf(stderr, "planted\n");
}
C
printf '%s\n' '#ifndef PLANTED' 'typedef void (*ckpt_planted_fn)(void *ctx);' '#endif' >>"$tmp/ckpt/ckpt.h"

out=$(bash "$SRC/tests/cli/layers.sh" "$tmp" 2>&1) && fail "layers.sh passed a tree with planted violations"
expect() { grep -qF -- "$1" <<<"$out" || fail "no line '$1' for the planted $2; layers.sh said:
$(grep -F planted <<<"$out")"; }
refuse() { if grep -qF -- "$1" <<<"$out"; then fail "layers.sh flags $2: $(grep -F -- "$1" <<<"$out")"; fi; }
expect "FAIL: trainer/model/planted_long.c: 501 lines (rule: a library file holds at most 500" "501-line file"
expect "FAIL: trainer/model/planted_struct.c: struct planted_wide has 21 fields, more than 20" "21-field struct"
expect "FAIL: ckpt/read/planted_print.c:6: prints (fprintf(stderr" "fprintf(stderr in ckpt/"
expect "FAIL: ckpt/ckpt.h:$(grep -n ckpt_planted_fn "$tmp/ckpt/ckpt.h" | cut -d: -f1): function pointer ckpt_planted_fn in a lower layer's header" "callback type in ckpt.h"
refuse "planted_edge.c" "a 500-line file"
refuse "struct planted_fits" "a 20-field struct"
refuse "planted_print.c:2" "a print in a comment"
refuse "planted_print.c:3" "a print in a string"
[ "$(grep -c planted <<<"$out")" -eq 4 ] || fail "expected 4 lines about the planted files, got: $(grep planted <<<"$out")"
echo "ok: layers.sh fails on each planted violation (file and rule named) and passes the controls"
