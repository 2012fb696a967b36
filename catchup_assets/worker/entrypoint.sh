#!/bin/sh
# One attempt at one ledger range: decide whether to resume (L16), then hand
# the process over to `stellar-core catchup`.
#
# POSIX sh only: the stellar-core image has neither bash nor Python. Every
# input arrives through the environment and is only ever expanded inside
# double quotes (L17): nothing formats this file, and no value is evaluated.
#
#   RANGE_KEY            required  e.g. 0000016001-0000032000
#   CATCHUP_TARGET       required  END ledger (decimal)
#   CATCHUP_COUNT        required  ledgers to replay up to END (decimal)
#   DATA_DIR             required  existing directory, the attempt's volume
#   STELLAR_CORE         optional  binary, default stellar-core
#   STELLAR_CORE_CONFIG  optional  passed as --conf before the subcommand
#
# Exit codes: 64 bad input; otherwise new-db's failure code, 0 when the range
# is already complete, or catchup's own code, unchanged (exec).
# Nothing here prints a progress meter (L18): one event, one line.

set -u

MARKER=.catchup-range

die() {
    printf 'ERROR: %s\n' "$1" >&2
    exit 64
}

# Prints the value with leading zeros removed: dash's $(( )) reads a leading 0
# as octal. More than 18 digits would overflow its arithmetic.
decimal() {
    case $1 in
        '' | *[!0-9]*) return 1 ;;
    esac
    _d=${1#"${1%%[!0]*}"}
    [ "${#_d}" -le 18 ] || return 1
    printf '%s' "${_d:-0}"
}

[ -n "${RANGE_KEY:-}" ] || die "RANGE_KEY is not set"
[ -n "${CATCHUP_TARGET+x}" ] || die "CATCHUP_TARGET is not set"
[ -n "${CATCHUP_COUNT+x}" ] || die "CATCHUP_COUNT is not set"
[ -n "${DATA_DIR:-}" ] || die "DATA_DIR is not set"
TARGET=$(decimal "$CATCHUP_TARGET") ||
    die "CATCHUP_TARGET is not a decimal integer: '$CATCHUP_TARGET'"
COUNT=$(decimal "$CATCHUP_COUNT") ||
    die "CATCHUP_COUNT is not a decimal integer: '$CATCHUP_COUNT'"
[ -d "$DATA_DIR" ] || die "DATA_DIR is not a directory: '$DATA_DIR'"
cd -- "$DATA_DIR" || die "DATA_DIR cannot be entered: '$DATA_DIR'"
START=$((TARGET - COUNT))

# The core command line, kept in "$@" since POSIX sh has no arrays.
set -- "${STELLAR_CORE:-stellar-core}"
if [ -n "${STELLAR_CORE_CONFIG:-}" ]; then
    set -- "$@" --conf "$STELLAR_CORE_CONFIG"
fi

printf 'WORKER: range %s target %s count %s\n' "$RANGE_KEY" "$TARGET" "$COUNT"

# Decide. Sets DECLINED to the reason when a fresh start is needed.
DECLINED=
LCL=
if [ ! -f "$MARKER" ]; then
    DECLINED="no range marker in the data dir (never started here)"
elif ! OWNER=$(cat -- "$MARKER"); then
    DECLINED="range marker unreadable"
elif [ "$OWNER" != "$RANGE_KEY" ]; then
    OWNER=$(printf '%s' "$OWNER" | tr '\r\n' '  ')
    DECLINED="data dir belongs to range '$OWNER', not this one"
elif ! INFO=$("$@" offline-info); then
    DECLINED="offline-info failed"
else
    # The whole document, never a window after "ledger": ~40 lines of bucket
    # hashes sit between that key and "num" (L16). "num" occurs exactly once.
    LCL=$(printf '%s\n' "$INFO" |
        sed -n 's/.*"num"[[:space:]]*:[[:space:]]*\([0-9][0-9]*\).*/\1/p' |
        head -n 1)
    if [ -z "$LCL" ]; then
        DECLINED="offline-info reported no ledger num"
    elif ! LCL=$(decimal "$LCL"); then
        DECLINED="offline-info ledger num out of range"
    elif [ "$LCL" -ge "$TARGET" ]; then
        # Re-running catchup here applies nothing and exits 2, on every retry.
        printf 'RESUME: range %s already complete: LCL %s >= target %s\n' \
            "$RANGE_KEY" "$LCL" "$TARGET"
        exit 0
    elif [ "$LCL" -lt "$START" ]; then
        DECLINED="LCL $LCL is below range start $START (bucket apply never finished)"
    fi
fi

if [ -n "$DECLINED" ]; then
    printf 'RESUME DECLINED: %s\n' "$DECLINED"
    # While new-db runs the volume belongs to no range.
    rm -f -- "$MARKER"
    "$@" new-db || {
        rc=$?
        printf 'ERROR: new-db failed with exit %s\n' "$rc" >&2
        exit "$rc"
    }
    if ! { printf '%s\n' "$RANGE_KEY" >"$MARKER.tmp" && mv -f -- "$MARKER.tmp" "$MARKER"; }; then
        # Catchup can still finish; a retry merely starts fresh again.
        printf 'WARNING: could not write %s; a retry will start fresh\n' "$MARKER" >&2
    fi
else
    printf 'RESUME: range %s from LCL %s toward target %s\n' "$RANGE_KEY" "$LCL" "$TARGET"
fi

# exec: SIGTERM reaches stellar-core itself, and its exit code is ours.
# stellar-core prints a metric at exit only when named with --metric: without
# it no attempt would report how long it spent applying transactions (L24).
exec "$@" catchup "$TARGET/$COUNT" --metric ledger.transaction.apply
