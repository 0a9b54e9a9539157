#!/usr/bin/env bash
# Long libFuzzer runs of every fuzz target of tests/fuzz/ (docs/ROBUSTNESS.md).
#
#   tools/fuzz_long.sh [MINUTES_PER_TARGET] [PROCESSES] [TARGET...]
#       defaults: 30 minutes, 1 process, all of fuzz_gguf fuzz_tokenizer fuzz_params
#       fuzz_model fuzz_support
#
# Needs clang with libFuzzer (apt-get install clang). Builds the targets with ASan + UBSan and
# libFuzzer's coverage inside the library (-Dfuzz_engine=libfuzzer) in DS4RT_FUZZ_BUILD
# (default build-fuzz), generates the seed model files, and runs each target for the given
# time, growing its corpus in DS4RT_FUZZ_OUT (default fuzz-out/corpus/<target>, seeded from
# tests/fuzz/corpus/). A crash or failed check leaves its input in fuzz-out/artifacts/ and
# makes the script exit non-zero; reproduce it with `build-fuzz/tests/<target> <artifact>`.
# The last lines of each target's log (fuzz-out/<target>.log) are what docs/ROBUSTNESS.md
# records.
set -euo pipefail
cd "$(dirname "$0")/.."

minutes="${1:-30}"
procs="${2:-1}"
shift $(( $# < 2 ? $# : 2 ))
targets=("$@")
[ "${#targets[@]}" -gt 0 ] || targets=(fuzz_gguf fuzz_tokenizer fuzz_params fuzz_model fuzz_support)
build="${DS4RT_FUZZ_BUILD:-build-fuzz}"
out="${DS4RT_FUZZ_OUT:-fuzz-out}"

if [ ! -f "$build/build.ninja" ]; then
    CC="${CC:-clang}" meson setup "$build" -Dtest_programs=true -Dpython=false -Dwerror=true \
        -Dbuildtype=debugoptimized -Db_sanitize=address,undefined -Db_lundef=false \
        -Dfuzz_engine=libfuzzer
fi
ninja -C "$build" "${targets[@]/#/tests/}"
mkdir -p "$out/artifacts"
read -r target_gguf support_gguf < <(python3 tests/fuzz/make_corpus.py --models "$out/models")
export DS4RT_FUZZ_TARGET="$target_gguf" DS4RT_FUZZ_SUPPORT="$support_gguf" DS4RT_FUZZ_STATS=1
export ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"

status=0
for t in "${targets[@]}"; do
    corpus="${t#fuzz_}"
    mkdir -p "$out/corpus/$corpus"
    parallel=()
    [ "$procs" -gt 1 ] && parallel=(-fork="$procs")
    echo "== $t: $minutes min, $procs process(es), $(date -u +%FT%TZ)"
    if ! "$build/tests/$t" -max_total_time=$((minutes * 60)) "${parallel[@]}" -print_final_stats=1 \
        -artifact_prefix="$out/artifacts/$t-" "$out/corpus/$corpus" "tests/fuzz/corpus/$corpus" \
        >"$out/$t.log" 2>&1; then
        echo "   FINDING: see $out/$t.log and $out/artifacts/"
        status=1
    fi
    grep -E "^#[0-9]+ +DONE|^Done|stat::number_of_executed_units|\"inputs\"" "$out/$t.log" | tail -3 || true
done
exit "$status"
