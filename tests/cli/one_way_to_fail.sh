#!/usr/bin/env bash
# One way to fail (docs/LAYOUT.md, "Errors"): library code reports a failure
# through a boost_status (kernels/status.h) and never ends the process.
#
#   1. No library header (kernels/, ckpt/, trainer/, tools/) declares the old
#      message-buffer pair `char *err, size_t errlen`.
#   2. No exit(), _exit(), _Exit(), quick_exit(), abort() or MPI_Abort() in
#      library code: every .c/.cu/.cuh/.h file of those folders except
#      kernels/job_abort.c (the one module that ends a job) and programs (a
#      file that defines main). Comments and string literals do not count.
#
#   bash tests/cli/one_way_to_fail.sh [SOURCE_DIR]   exit 0 clean, 1 with one line per violation
set -euo pipefail
SRC=${1:-${BOOST_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}}
/usr/bin/python3 - "$SRC" <<'PY'
import os, re, sys
src = sys.argv[1]
JOB_END_MODULE = "kernels/job_abort.c"
pair = re.compile(r"char\s*\*\s*err\s*,\s*size_t\s+errlen\b")
ends = re.compile(r"(?<![\w.>])(exit|_exit|_Exit|quick_exit|abort|MPI_Abort)\s*\(")
defines_main = re.compile(r"^\s*int\s+main\s*\(", re.M)
# Comments and literals out, newlines kept (line numbers stay right).
token = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)

def code_of(text):
    return token.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)

bad = []
for top in ("kernels", "ckpt", "trainer", "tools"):
    for root, _, names in os.walk(os.path.join(src, top)):
        for n in sorted(names):
            if not n.endswith((".c", ".h", ".cu", ".cuh")):
                continue
            path = os.path.join(root, n)
            rel = os.path.relpath(path, src)
            with open(path, errors="replace") as f:
                code = code_of(f.read())
            if n.endswith((".h", ".cuh")):
                for m in pair.finditer(code):
                    line = code.count("\n", 0, m.start()) + 1
                    bad.append(f"{rel}:{line}: a `char *err, size_t errlen` parameter: take a boost_status *err")
            if rel == JOB_END_MODULE or defines_main.search(code):
                continue
            for m in ends.finditer(code):
                line = code.count("\n", 0, m.start()) + 1
                bad.append(f"{rel}:{line}: {m.group(1)}() in library code: return a boost_status "
                           f"(or end the job through job_abort.h)")
for b in bad:
    print("FAIL: " + b)
if bad:
    sys.exit(1)
print("one way to fail: no exit in library code, no old error pair in a library header")
PY
