#!/usr/bin/env bash
# Runs every loom model (core/tests/loom_*.rs) in one cargo invocation,
# release with debug assertions, and prints how many models ran and the
# total time (build included). Exits non-zero if any model fails.
#
#   scripts/loom.sh            every model at LOOM_MAX_PREEMPTIONS=2 (CI)
#   scripts/loom.sh --deep     also the models marked #[ignore] for their
#                              size (minutes each)
#   scripts/loom.sh -- ARGS    extra libtest arguments (a name filter, ...)
#
# LOOM_MAX_PREEMPTIONS in the environment overrides the bound of 2 (a
# higher bound is for a manual run: the state space grows fast). The
# models, what each covers and their run time: docs/reliability.md, Loom.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

extra=()
while [ $# -gt 0 ]; do
    case "$1" in
        --deep) extra+=(--include-ignored) ;;
        --) shift; extra+=("$@"); break ;;
        *) echo "usage: $0 [--deep] [-- LIBTEST_ARGS...]" >&2; exit 2 ;;
    esac
    shift
done

# The models that must pass (docs/reliability.md, Loom): fewer means a
# model or a whole file stopped running. Raise it with each new model.
MIN_MODELS=114

tests=()
for f in core/tests/loom_*.rs; do
    tests+=(--test "$(basename "$f" .rs)")
done

export RUSTFLAGS="--cfg smarm_loom -C debug-assertions" CARGO_TARGET_DIR=target/loom
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s)
cargo test -p smarm-core --release "${tests[@]}" --no-run
built=$(date +%s)
status=0
cargo test -p smarm-core --release --no-fail-fast "${tests[@]}" -- "${extra[@]}" 2>&1 | tee "$log" || status=$?
end=$(date +%s)
passed=$(grep -Eo '^test result: [a-zA-Z]+\. [0-9]+ passed' "$log" | awk '{s += $4} END {print s + 0}')
failed=$(grep -Eo '[0-9]+ failed' "$log" | awk '{s += $1} END {print s + 0}')
echo "loom: $passed models passed, $failed failed ($(( ${#tests[@]} / 2 )) files," \
    "LOOM_MAX_PREEMPTIONS=$LOOM_MAX_PREEMPTIONS): models $(( end - built )) s, build $(( built - start )) s"
if [ "$status" = 0 ] && [ "$passed" -lt "$MIN_MODELS" ]; then
    echo "loom: only $passed models passed; at least $MIN_MODELS must (a model stopped running?)"
    exit 1
fi
exit "$status"
