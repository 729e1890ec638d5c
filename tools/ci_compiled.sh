#!/usr/bin/env bash
# The compiled parts proven in CI (issue 35), a few minutes on top of the test suite:
#   1. the compiled modules in use were built from the sources beside them (a stale
#      module refuses to load: cvdiag.contract.compiled);
#   2. the CLI's tests on the Python path (CVDIAG_COMPILED=0), which every machine without
#      a C compiler runs;
#   3. both modules built with AddressSanitizer and UndefinedBehaviorSanitizer, running the
#      tests that exercise them and the fuzzer of both paths (tools/fuzz_compiled.py) for
#      CVDIAG_FUZZ_SECONDS (60);
#   4. the fold built without its SSE2 paths (-DCVDIAG_NO_SSE2: what ARM machines run),
#      running the compiled fold's tests.
# The builds of 3 and 4 are made in scratch copies of the tree: the tree's own modules
# stay as they are. Run from anywhere; PYTHON names the interpreter (.venv/bin/python).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
py=${PYTHON:-$root/.venv/bin/python}
fuzz_seconds=${CVDIAG_FUZZ_SECONDS:-60}
# The tests that exercise the C: the fold, the report's event encoder, the scan's helpers,
# the envelope writer, and the cases a fuzzing found.
compiled_tests=(tests/test_compiled_fold.py tests/test_compiled_events.py tests/test_compiled_proven.py
                tests/test_compiled_layout.py tests/test_emit_compiled.py tests/test_fast_scan.py)
fold_tests=(tests/test_compiled_fold.py tests/test_compiled_events.py tests/test_compiled_proven.py
            tests/test_compiled_layout.py)
# What glibc's allocator does with the blocks a pass reads (page faults, resident memory):
# under AddressSanitizer another allocator runs, so these measure nothing there.
allocator_tests=(--deselect "tests/test_compiled_fold.py::test_the_cli_recycles_the_blocks_it_reads_instead_of_faulting_in_fresh_pages"
                 --deselect "tests/test_compiled_fold.py::test_reading_a_file_keeps_memory_to_a_few_blocks")
pytest_args=(-q -p no:randomly -p no:cacheprovider -o addopts="")

step() { printf '\n== ci_compiled: %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }

step "1. the compiled modules are built from the sources beside them"
"$py" - <<'EOF'
import importlib, sys
from cvdiag.contract.compiled import stale
for name in ("cvdiag.read._cfold", "cvdiag.write._cemit"):
    module = importlib.import_module(name)  # not built: an ImportError, and CI fails
    why = stale(module)
    if why:
        sys.exit(why)
    print(f"{name}: built from its source ({module.SOURCE_HASH})")
EOF

step "2. the CLI's tests on the Python path (CVDIAG_COMPILED=0)"
CVDIAG_COMPILED=0 "$py" -m pytest "${pytest_args[@]}" tests/test_cli_*.py

scratch=$(mktemp -d /tmp/cvdiag-ci-compiled.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
copy_tree() {  # $1: a scratch directory holding what a build and its tests need
  mkdir -p "$1"
  cp -r "$root/cvdiag" "$root/tests" "$root/tools" "$root/setup.py" "$root/pyproject.toml" "$root/README.md" "$1/"
  find "$1" \( -name '*.so' -o -name __pycache__ \) -prune -exec rm -rf {} +
}

step "3. ASan and UBSan: both modules, their tests and the fuzzer"
asan="$scratch/asan"
copy_tree "$asan"
(cd "$asan" && CVDIAG_CFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1" \
  "$py" setup.py -q build_ext --inplace 2>&1 | grep -v -i "beta\|warnings.warn" || true)
libasan=$(gcc -print-file-name=libasan.so)
(cd "$asan" && export LD_PRELOAD="$libasan" ASAN_OPTIONS="detect_leaks=0:abort_on_error=1" \
   UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" PYTHONPATH="$asan" &&
 "$py" -c "import cvdiag.read._cfold, cvdiag.write._cemit, sys; from cvdiag.read import fold; from cvdiag.write import emitter;
sys.exit(0 if fold.compiled() and emitter._line_compiled is not None else 'the sanitizer build did not load')" &&
 "$py" -m pytest "${pytest_args[@]}" "${allocator_tests[@]}" "${compiled_tests[@]}" &&
 "$py" tools/fuzz_compiled.py --seconds "$fuzz_seconds")

step "4. the fold without its SSE2 paths (-DCVDIAG_NO_SSE2)"
plain="$scratch/no-sse2"
copy_tree "$plain"
(cd "$plain" && CVDIAG_CFLAGS="-DCVDIAG_NO_SSE2" "$py" setup.py -q build_ext --inplace 2>&1 | grep -v -i "beta\|warnings.warn" || true)
(cd "$plain" && export PYTHONPATH="$plain" &&
 "$py" -c "import sys, cvdiag.read._cfold as c; sys.exit(0 if c.SSE2 == 0 else 'built with SSE2')" &&
 "$py" -m pytest "${pytest_args[@]}" "${fold_tests[@]}")

step "done"
