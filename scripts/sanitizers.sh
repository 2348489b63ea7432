#!/usr/bin/env bash
# Runs the integration suite (smarm-tests), the Linux port's and core's unit
# tests and core's threaded ring test (loom models compile empty)
# under ThreadSanitizer and/or AddressSanitizer, with the context switch
# annotated for both (core/src/actor/sanitizer.rs, cfgs `smarm_tsan` / `smarm_asan`).
#
#   scripts/sanitizers.sh [tsan|asan|all] [-- extra cargo test args]
#
# Needs the nightly toolchain (installs its rust-src component if missing:
# sanitizers need `-Zbuild-std`). x86_64 Linux only. Each sanitizer builds
# into its own target dir (target/tsan, target/asan). Reports fail the run:
# TSan exits 66 from the test binary after a report, ASan aborts at the
# first one. The doctests run too (built by rustdoc with the same flags).
# Suppressions (each entry says why it is false):
# scripts/tsan.supp.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export CARGO_TERM_COLOR=never

which=${1:-all}
shift || true
[ "${1:-}" = "--" ] && shift
case "$which" in tsan | asan | all) ;; *)
    echo "usage: $0 [tsan|asan|all] [-- extra cargo test args]" >&2
    exit 2
    ;;
esac

if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
    echo "sanitizers: x86_64 Linux only (this is $(uname -s)-$(uname -m))" >&2
    exit 2
fi
if ! rustup toolchain list | grep -q '^nightly'; then
    echo "sanitizers: need the nightly toolchain (rustup toolchain install nightly)" >&2
    exit 2
fi
rustup component list --installed --toolchain nightly 2>/dev/null | grep -q '^rust-src' ||
    rustup component add rust-src --toolchain nightly

TARGET=x86_64-unknown-linux-gnu

run() {
    local name=$1 sanitizer=$2
    shift 2
    local start
    start=$(date +%s)
    echo "=== $name: smarm-tests + smarm-linux, smarm-unix and smarm-core unit tests + ring_threads, then the doctests"
    # `--cfg smarm_*` turns the fiber hooks on; it reaches std too (build-std),
    # where it is unused. `-Cforce-frame-pointers` gives the reports' stacks.
    local flags="-Zsanitizer=$sanitizer --cfg smarm_$name -Cforce-frame-pointers=yes"
    RUSTFLAGS="$flags" CARGO_TARGET_DIR="target/$name" \
        cargo +nightly test -Zbuild-std --target "$TARGET" \
        -p smarm-tests -p smarm-linux -p smarm-unix -p smarm-core --lib --tests "$@"
    # The doctests (README's examples are the Linux port's crate docs):
    # rustdoc builds each with the same flags, against the same std.
    echo "=== $name: doctests"
    RUSTFLAGS="$flags" RUSTDOCFLAGS="$flags" CARGO_TARGET_DIR="target/$name" \
        cargo +nightly test -Zbuild-std --target "$TARGET" \
        -p smarm-tests -p smarm-linux -p smarm-core --doc
    echo "$name: $(($(date +%s) - start)) s"
}

# handle_segv=0: the port's own SIGSEGV handler reports guard-page hits
# (fault tests run children that must crash through it).
export TSAN_OPTIONS="handle_segv=0 second_deadlock_stack=1 suppressions=$PWD/scripts/tsan.supp ${TSAN_OPTIONS:-}"
# detect_stack_use_after_return=1: exercises the fake-stack half of the
# fiber hooks. detect_leaks=0: LeakSanitizer needs ptrace, which containers
# often refuse, and the runtime leaks on purpose at an overflow recovery.
export ASAN_OPTIONS="handle_segv=0 detect_stack_use_after_return=1 detect_leaks=0 ${ASAN_OPTIONS:-}"

case "$which" in
tsan) run tsan thread "$@" ;;
asan) run asan address "$@" ;;
all)
    run tsan thread "$@"
    run asan address "$@"
    ;;
esac
