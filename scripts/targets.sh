#!/usr/bin/env bash
# Runs the target matrix in targets.toml: one check per triple, then a
# PASS/FAIL summary. Exits non-zero if any target fails.
#
#   scripts/targets.sh                       every target
#   scripts/targets.sh TRIPLE...             only these
#   scripts/targets.sh --skip-native         every target but native-test ones
#   scripts/targets.sh --list                print the matrix and exit
#   scripts/targets.sh --no-install          never install anything
#   scripts/targets.sh --clean               drop each target's build dir
#                                            once its check is done (CI:
#                                            ~1 GiB each, disk is finite)
#
# The checks (see targets.toml and docs/platforms.md):
#   native-test    cargo test --workspace
#   emulated-test  cargo check -p smarm-benches --all-targets; cargo test
#                  --workspace --lib (unit tests), then the integration
#                  tests in release, under qemu-user with RUST_TEST_THREADS=1
#                  (runner and linker: .cargo/config.toml)
#   build          cargo build -p PORT; cargo-zigbuild check -p smarm-benches
#                  --all-targets; cargo-zigbuild test --workspace --no-run
#                  (links every test binary and example; nothing runs)
#   core-build     cargo build -p smarm-core (and the no_std arch crate)
# "--workspace" always excludes the port crates of other OSes: they are
# empty there, and their examples name them.
#
# What a check needs is installed only if missing (rustup targets; the
# aarch64 cross gcc, its libc and qemu-user via apt; ziglang via pip;
# cargo-zigbuild via cargo install). Each target builds in its own
# CARGO_TARGET_DIR, target/targets/TRIPLE, so no two variants share
# artifacts and none blocks the default target/ build lock.
#
# Assumes an x86_64 Linux host (as CI): the aarch64 Linux entry is emulated.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

ZIGLANG_VERSION="0.17.1"
ZIGBUILD_VERSION="0.24.1"
MACOSX_DEPLOYMENT_TARGET="${MACOSX_DEPLOYMENT_TARGET:-11.0}"
export MACOSX_DEPLOYMENT_TARGET
APT_PACKAGES=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)

usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; }

# --- The matrix -------------------------------------------------------------

# Prints "triple port arch check" per entry, validating the file as it goes.
matrix() {
    python3 - "$ROOT/targets.toml" <<'PY'
import sys, tomllib
with open(sys.argv[1], "rb") as f:
    doc = tomllib.load(f)
checks = {"native-test", "emulated-test", "build", "core-build"}
for i, t in enumerate(doc.get("target", [])):
    missing = [k for k in ("triple", "port", "arch", "check") if k not in t]
    if missing:
        sys.exit(f"targets.toml: entry {i} lacks {', '.join(missing)}")
    if t["check"] not in checks:
        sys.exit(f"targets.toml: {t['triple']}: unknown check {t['check']!r}")
    print(t["triple"], t["port"], t["arch"], t["check"])
PY
}

# --- Installing what a check needs, only if missing ------------------------

INSTALL=1

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
        echo "need root for: $*" >&2; return 1; fi
}

need_rust_target() {
    rustup target list --installed 2>/dev/null | grep -qx "$1" && return 0
    [ "$INSTALL" -eq 1 ] || { echo "missing rustup target $1" >&2; return 1; }
    rustup target add "$1"
}

need_apt_packages() {
    local missing=() p
    for p in "${APT_PACKAGES[@]}"; do
        dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
    done
    [ "${#missing[@]}" -eq 0 ] && return 0
    [ "$INSTALL" -eq 1 ] || { echo "missing packages: ${missing[*]}" >&2; return 1; }
    as_root apt-get update -qq &&
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
}

need_zig() {
    if ! python3 -c 'import ziglang' 2>/dev/null && ! command -v zig >/dev/null; then
        [ "$INSTALL" -eq 1 ] || { echo "missing ziglang" >&2; return 1; }
        python3 -m pip install --quiet "ziglang==$ZIGLANG_VERSION" ||
            python3 -m pip install --quiet --user "ziglang==$ZIGLANG_VERSION" || return 1
    fi
    if ! command -v cargo-zigbuild >/dev/null; then
        [ "$INSTALL" -eq 1 ] || { echo "missing cargo-zigbuild" >&2; return 1; }
        cargo install --locked "cargo-zigbuild@$ZIGBUILD_VERSION" || return 1
    fi
}

# --- The checks -------------------------------------------------------------

# Echoes then runs a command; the step's status is the command's.
step() {
    echo "+ $*"
    "$@"
}

# `--exclude` flags for the port crates of other OSes: they compile to empty
# crates here, and their examples (which name them) could not build.
other_ports() {
    local port="$1" p
    for p in $(awk '{print $2}' <<<"$MATRIX" | sort -u); do
        [ "$p" != none ] && [ "$p" != "$port" ] && printf -- '--exclude %s ' "$p"
    done
}

check_native_test() {
    local triple="$1" port="$2"
    # shellcheck disable=SC2046 # word splitting of the flags is intended
    step cargo test --workspace $(other_ports "$port") --target "$triple"
}

check_emulated_test() {
    local triple="$1" port="$2"
    need_apt_packages || return 1
    # The benches only type-check here (tokio and criterion under qemu would
    # take minutes to run for nothing); the test run builds everything else.
    step cargo check -p smarm-benches --all-targets --target "$triple" || return 1
    # Debug: every crate's unit tests (the switch shim, the core's data
    # structures, the port's locks and waits).
    # shellcheck disable=SC2046
    step env RUST_TEST_THREADS=1 cargo test --workspace $(other_ports "$port") \
        --exclude smarm-benches --exclude smarm-tests --lib --target "$triple" || return 1
    # The integration tests in release only: actor migration across workers
    # with the optimiser free to cache thread-local addresses (on aarch64 the
    # thread pointer is a register read LLVM may hoist across a switch). The
    # suite in debug as well, under qemu, cost CI minutes for a run that
    # repeats this one and the host's debug run.
    step env RUST_TEST_THREADS=1 cargo test --release -p smarm-tests --target "$triple"
}

check_build() {
    local triple="$1" port="$2"
    need_zig || return 1
    # The user's own command, at the root, needing no C compiler (README).
    step cargo build --target "$triple" || return 1
    # The link of every test binary and example covers the rest; the benches
    # (not test targets) are checked on their own, once.
    step cargo-zigbuild check -p smarm-benches --all-targets --target "$triple" || return 1
    # shellcheck disable=SC2046
    step cargo-zigbuild test --workspace $(other_ports "$port") --no-run --target "$triple"
}

check_core_build() {
    local triple="$1" arch="$2"
    step cargo build -p smarm-core --target "$triple" || return 1
    step cargo build -p "$arch" --target "$triple"
}

# --- Main -------------------------------------------------------------------

LIST=0
SKIP_NATIVE=0
CLEAN=0
WANT=()
for arg in "$@"; do
    case "$arg" in
        --list) LIST=1 ;;
        --skip-native) SKIP_NATIVE=1 ;;
        --no-install) INSTALL=0 ;;
        --clean) CLEAN=1 ;;
        -h | --help) usage; exit 0 ;;
        -*) echo "unknown option $arg" >&2; usage >&2; exit 2 ;;
        *) WANT+=("$arg") ;;
    esac
done

MATRIX="$(matrix)" || exit 2

if [ "$LIST" -eq 1 ]; then
    printf '%-28s %-14s %-20s %s\n' TRIPLE PORT ARCH CHECK
    while read -r triple port arch check; do
        printf '%-28s %-14s %-20s %s\n' "$triple" "$port" "$arch" "$check"
    done <<<"$MATRIX"
    exit 0
fi

for w in "${WANT[@]}"; do
    if ! awk '{print $1}' <<<"$MATRIX" | grep -qx -- "$w"; then
        echo "$w is not in targets.toml (see --list)" >&2
        exit 2
    fi
done

RESULTS=()
FAILED=0
while read -r triple port arch check; do
    if [ "${#WANT[@]}" -gt 0 ] && ! printf '%s\n' "${WANT[@]}" | grep -qx -- "$triple"; then
        continue
    fi
    if [ "$SKIP_NATIVE" -eq 1 ] && [ "$check" = native-test ]; then
        RESULTS+=("SKIP  $triple ($check)")
        continue
    fi
    echo
    echo "=== $triple: $check (port $port, arch $arch)"
    start=$SECONDS
    (
        export CARGO_TARGET_DIR="$ROOT/target/targets/$triple"
        need_rust_target "$triple" || exit 1
        case "$check" in
            native-test) check_native_test "$triple" "$port" ;;
            emulated-test) check_emulated_test "$triple" "$port" ;;
            build) check_build "$triple" "$port" ;;
            core-build) check_core_build "$triple" "$arch" ;;
        esac
    ) </dev/null
    status=$?
    took=$((SECONDS - start))
    [ "$CLEAN" -eq 1 ] && rm -rf "$ROOT/target/targets/$triple"
    if [ "$status" -eq 0 ]; then
        RESULTS+=("PASS  $triple ($check, ${took}s)")
    else
        RESULTS+=("FAIL  $triple ($check, ${took}s)")
        FAILED=1
    fi
done <<<"$MATRIX"

echo
echo "=== targets summary"
printf '%s\n' "${RESULTS[@]}"
exit "$FAILED"
