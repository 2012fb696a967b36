#!/bin/sh
# One attempt at one ledger range: ship the logs earlier attempts left on the
# volume, decide whether to resume (L16), then run `stellar-core catchup`.
#
# POSIX sh only: the stellar-core image has neither bash nor Python. Every
# input arrives through the environment and is only ever expanded inside
# double quotes (L17): nothing formats this file, and no value is evaluated.
#
#   RANGE_KEY            required  e.g. 0000016001-0000032000
#   CATCHUP_TARGET       required  END ledger (decimal)
#   CATCHUP_COUNT        required  ledgers to replay up to END (decimal)
#   CATCHUP_ATTEMPT      required  this attempt's number (decimal): names its log file
#   DATA_DIR             required  existing directory, the attempt's volume
#   STELLAR_CORE         optional  binary, default stellar-core
#   STELLAR_CORE_CONFIG  optional  passed as --conf before the subcommand
#   CATCHUP_TRUSTED_LEDGER  optional, with CATCHUP_TRUSTED_HASH: the checkpoint's
#   CATCHUP_TRUSTED_HASH    last ledger this range catches up to and its hash (64
#                        hex digits) from the mission's verify-checkpoints file,
#                        written as a one-checkpoint file of that shape and
#                        passed to catchup as --trusted-checkpoint-hashes (below)
#
# The log on the volume (L31): a pod that vanishes with its node takes its log
# with it, so everything printed after the shipping below, stdout and stderr
# alike, is also appended to logs/aNNN.log in the data dir as it is written.
# First, each earlier attempt's file not yet shipped is printed, to the pod's
# log only, between a begin and an end line naming its attempt (the format is
# catchup_assets/core/measure/shipped.py's), then renamed .shipped: the dispatcher
# splits the sections off this attempt's log and stores each as its
# attempt's log.
#
# Exit codes: 64 bad input; 65 when catchup exited 0 but offline-info does not
# show the target reached (a `WORKER FAILED:` line says why); otherwise new-db's
# failure code, 0 when the range is complete, or catchup's own code, unchanged.
# Nothing here prints a progress meter (L18): one event, one line.

set -u

MARKER=.catchup-range
LOGS=logs
# Neither 64 (bad input) nor any code of stellar-core's (0-3): classified `failed` (L4).
EXIT_SHORT=65

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
[ -n "${CATCHUP_ATTEMPT+x}" ] || die "CATCHUP_ATTEMPT is not set"
[ -n "${DATA_DIR:-}" ] || die "DATA_DIR is not set"
TARGET=$(decimal "$CATCHUP_TARGET") ||
    die "CATCHUP_TARGET is not a decimal integer: '$CATCHUP_TARGET'"
COUNT=$(decimal "$CATCHUP_COUNT") ||
    die "CATCHUP_COUNT is not a decimal integer: '$CATCHUP_COUNT'"
ATTEMPT=$(decimal "$CATCHUP_ATTEMPT") ||
    die "CATCHUP_ATTEMPT is not a decimal integer: '$CATCHUP_ATTEMPT'"
[ -d "$DATA_DIR" ] || die "DATA_DIR is not a directory: '$DATA_DIR'"
TRUSTED=${CATCHUP_TRUSTED_HASH:-}
if [ -n "$TRUSTED" ] || [ -n "${CATCHUP_TRUSTED_LEDGER:-}" ]; then
    case $TRUSTED in
        *[!0-9a-fA-F]*) die "CATCHUP_TRUSTED_HASH is not 64 hex digits: '$TRUSTED'" ;;
    esac
    [ "${#TRUSTED}" -eq 64 ] || die "CATCHUP_TRUSTED_HASH is not 64 hex digits: '$TRUSTED'"
    TRUSTED_LEDGER=$(decimal "${CATCHUP_TRUSTED_LEDGER:-}") ||
        die "CATCHUP_TRUSTED_LEDGER is not a decimal integer: '${CATCHUP_TRUSTED_LEDGER:-}'"
fi
cd -- "$DATA_DIR" || die "DATA_DIR cannot be entered: '$DATA_DIR'"
START=$((TARGET - COUNT))
# A trusted hash verifies a checkpoint's last ledger only (VerifyLedgerChainWork
# checks it against the newest checkpoint's last header; runCatchup refuses a
# checkpoints file for any other destination), and the grid's targets (16000 x k)
# never are one: catch up to the first checkpoint end at or past TARGET, the few
# ledgers beyond it replayed as overlap. TARGET still decides done. The
# dispatcher named the ledger it looked the hash up for: the two must agree.
CORE_TARGET=$TARGET
CORE_COUNT=$COUNT
PAST=$(((TARGET + 1) % 64))
if [ -n "$TRUSTED" ] && [ "$PAST" -ne 0 ]; then
    CORE_TARGET=$((TARGET + 64 - PAST))
    CORE_COUNT=$((COUNT + 64 - PAST))
fi
if [ -n "$TRUSTED" ] && [ "$TRUSTED_LEDGER" -ne "$CORE_TARGET" ]; then
    die "CATCHUP_TRUSTED_LEDGER $TRUSTED_LEDGER is not the checkpoint end $CORE_TARGET this range catches up to"
fi
OWN=$LOGS/$(printf 'a%03d.log' "$ATTEMPT")

# Prints every earlier attempt's log file left on the volume between its
# marker lines, then marks it shipped. A file that could not be read whole
# stays unshipped: the next attempt prints it again, and the dispatcher keeps
# the longer copy.
ship_earlier_logs() {
    for f in "$LOGS"/a*.log; do
        [ -f "$f" ] || continue # no match: the pattern itself
        [ "$f" != "$OWN" ] || continue
        n=${f#"$LOGS"/a}
        n=$(decimal "${n%.log}") || continue
        printf '==> shipped log of attempt %s begins (%s on the volume) <==\n' "$n" "$f"
        copied=yes
        cat -- "$f" || copied=
        # A newline of its own first, always: the end line stays a whole line whatever
        # the file ends with (a line cut off by a kill, a read that failed midway).
        printf '\n==> shipped log of attempt %s ends <==\n' "$n"
        [ -z "$copied" ] || mv -f -- "$f" "$f.shipped" || :
    done
}

# From here on, this shell's stdout and stderr, and so every command's, go
# through tee into $OWN as well (appended: nothing earlier is lost). tee
# ignores SIGTERM and SIGINT, which may reach the whole process group, so it
# keeps copying while stellar-core drains; the shell waits for it at the end.
# Without mkfifo or tee, or a writable volume, the attempt logs to the pod only.
TEE=
start_log_file() {
    command -v tee >/dev/null 2>&1 && command -v mkfifo >/dev/null 2>&1 || return 1
    pipe=$LOGS/.$(printf 'a%03d' "$ATTEMPT").pipe
    mkdir -p -- "$LOGS" && rm -f -- "$pipe" && mkfifo -- "$pipe" || return 1
    (
        trap '' TERM INT
        exec tee -a -- "$OWN"
    ) <"$pipe" &
    TEE=$!
    exec >"$pipe" 2>&1
    rm -f -- "$pipe"
}

# Exits with $1 once tee has copied everything: closing our ends of its pipe
# is its end of input (every child writing to it has exited by now).
finish() {
    if [ -n "$TEE" ]; then
        trap '' TERM INT # a signal now must not cut the wait short
        exec >&- 2>&-
        wait "$TEE"
    fi
    exit "$1"
}

ship_earlier_logs
start_log_file ||
    printf 'WARNING: no log file on the volume (%s); this attempt logs to the pod only\n' "$OWN" >&2

# The core command line, kept in "$@" since POSIX sh has no arrays.
set -- "${STELLAR_CORE:-stellar-core}"
if [ -n "${STELLAR_CORE_CONFIG:-}" ]; then
    set -- "$@" --conf "$STELLAR_CORE_CONFIG"
fi

printf 'WORKER: range %s target %s count %s\n' "$RANGE_KEY" "$TARGET" "$COUNT"

# Sets LCL to the last closed ledger stellar-core's own state reports
# (`offline-info`), or WHY to why there is none. The whole document, never a
# window after "ledger": ~40 lines of bucket hashes sit between that key and
# "num" (L16). "num" occurs exactly once. Called with the core command line.
core_lcl() {
    LCL=
    WHY=
    if ! INFO=$("$@" offline-info); then
        WHY="offline-info failed"
        return 1
    fi
    LCL=$(printf '%s\n' "$INFO" |
        sed -n 's/.*"num"[[:space:]]*:[[:space:]]*\([0-9][0-9]*\).*/\1/p' |
        head -n 1)
    if [ -z "$LCL" ]; then
        WHY="offline-info reported no ledger num"
    elif ! LCL=$(decimal "$LCL"); then
        WHY="offline-info ledger num out of range"
    else
        return 0
    fi
    LCL=
    return 1
}

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
elif ! core_lcl "$@"; then
    DECLINED=$WHY
elif [ "$LCL" -ge "$TARGET" ]; then
    # Re-running catchup here applies nothing and exits 2, on every retry.
    printf 'RESUME: range %s already complete: LCL %s >= target %s\n' \
        "$RANGE_KEY" "$LCL" "$TARGET"
    finish 0
elif [ "$LCL" -lt "$START" ]; then
    DECLINED="LCL $LCL is below range start $START (bucket apply never finished)"
fi

if [ -n "$DECLINED" ]; then
    printf 'RESUME DECLINED: %s\n' "$DECLINED"
    # While new-db runs the volume belongs to no range.
    rm -f -- "$MARKER"
    "$@" new-db || {
        rc=$?
        printf 'ERROR: new-db failed with exit %s\n' "$rc" >&2
        finish "$rc"
    }
    if ! { printf '%s\n' "$RANGE_KEY" >"$MARKER.tmp" && mv -f -- "$MARKER.tmp" "$MARKER"; }; then
        # Catchup can still finish; a retry merely starts fresh again.
        printf 'WARNING: could not write %s; a retry will start fresh\n' "$MARKER" >&2
    fi
else
    printf 'RESUME: range %s from LCL %s toward target %s\n' "$RANGE_KEY" "$LCL" "$TARGET"
fi

# stellar-core prints a metric at exit only when named with --metric: without
# it no attempt would report how long it spent applying transactions (L24).
# In the background, so this shell can wait for tee after it; a SIGTERM or
# SIGINT (the kubelet's, to this shell) is passed on, and stellar-core drains.
# runCatchup (src/main/CommandLine.cpp, stellar-core a9b8613) reads one pair from
# a checkpoints file, the destination's: the range's own pair, in the shape
# verify-checkpoints writes, is that file without 75 MB on every pod. Both values
# were checked above (decimal, 64 hex digits) and reach printf as arguments.
if [ -n "$TRUSTED" ]; then
    HASHES=$DATA_DIR/.catchup-trusted-checkpoint.json
    printf '[\n[%s, "%s"],\n[0, ""]\n]\n' "$CORE_TARGET" "$TRUSTED" >"$HASHES" ||
        die "cannot write $HASHES"
    printf 'TRUSTED: catchup to %s, hash %s\n' "$CORE_TARGET" "$TRUSTED"
    "$@" catchup "$CORE_TARGET/$CORE_COUNT" --metric ledger.transaction.apply \
        --trusted-checkpoint-hashes "$HASHES" &
else
    "$@" catchup "$TARGET/$COUNT" --metric ledger.transaction.apply &
fi
CORE=$!
trap 'SIGNALLED=yes; kill -TERM "$CORE" 2>/dev/null' TERM
trap 'SIGNALLED=yes; kill -INT "$CORE" 2>/dev/null' INT
# A trapped signal cuts `wait` short (> 128) while stellar-core runs on: wait
# again, until a wait no signal interrupted. Its code is catchup's own. Asked
# again after it ended, dash repeats the code and bash answers 127: keep the
# one we have.
rc=
while :; do
    SIGNALLED=
    wait "$CORE"
    code=$?
    [ "$code" -eq 127 ] && [ -n "$rc" ] || rc=$code
    [ -n "$SIGNALLED" ] || break
done
[ "$rc" -eq 0 ] || finish "$rc"

# Exit 0 is stellar-core's word, not proof: a core that stopped short and exited
# 0 would be recorded done (issue 24 item 6). Its own state must show the target.
if ! core_lcl "$@"; then
    printf 'WORKER FAILED: catchup exited 0 but its ledger cannot be read: %s\n' "$WHY"
    finish "$EXIT_SHORT"
elif [ "$LCL" -lt "$TARGET" ]; then
    printf 'WORKER FAILED: catchup exited 0 at LCL %s, short of target %s\n' "$LCL" "$TARGET"
    finish "$EXIT_SHORT"
fi
printf 'CAUGHT UP: range %s: LCL %s >= target %s\n' "$RANGE_KEY" "$LCL" "$TARGET"
finish 0
