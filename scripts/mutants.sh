#!/usr/bin/env bash
# The loom models can fail: applies one known bug at a time (a mutation of
# the real code or of a replica), runs the model that must catch it, and
# fails unless that model fails. Each mutation is undone afterwards (the
# file is restored from git; a file with uncommitted changes is refused).
#
#   scripts/mutants.sh          every mutation (~1 min each on 2 cores:
#                               a core mutation rebuilds core for loom)
#   scripts/mutants.sh --ci     the CI subset (MUTANTS_CI below)
#   scripts/mutants.sh NAME...  the named mutations
#
# Each entry, fields separated by '#': name, file, python regex (one
# match), replacement, loom test binary, model, text the failure must
# contain (a panic message, or "deadlock").
# The table is in docs/reliability.md, "The models can fail".
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

MUTANTS=(
'ring-pop-release#core/src/lockfree/ring.rs#\.store\(pos\.wrapping_add\(self\.capacity\(\)\), Ordering::Release\)#.store(pos.wrapping_add(self.capacity()), Ordering::Relaxed)#loom_ring#wrap_around_two_producers#Causality violation'
'idle-sleep-fence#core/src/sched/idle.rs#(self\.nsleep\.store\(list\.len\(\) as u32, Ordering::SeqCst\);\n        \}\n)        fence\(Ordering::SeqCst\);#\1#loom_idle#ring_one_worker_three_items_wraps#deadlock'
'idle-notify-fence#core/src/sched/idle.rs#(pub fn notify_one\(&self\) -> bool \{\n        // 1: orders the caller'\''s publish before the load of `nsleep`.\n)        fence\(Ordering::SeqCst\);#\1#loom_idle#ring_one_worker_three_items_wraps#deadlock'
'shutdown-no-recheck#core/tests/loom_shutdown.rs#                if self\.has_work\(i\) \{\n                    return false;\n                \}\n                self\.finished_after_push#                self.finished_after_push#loom_shutdown#outside_wake_races_the_sweep#abandoned'
'shutdown-last-idle#core/tests/loom_shutdown.rs#                self\.has_work\(i\)\n                    \|\| \(self\.shutdown\.load\(Ordering::SeqCst\) && self\.idle\.sleepers\(\) as usize >= self\.workers\)#                self.has_work(i)#loom_shutdown#parked_actor_is_swept_at_shutdown#deadlock'
'idle-wrong-word#core/src/sched/idle.rs#F::wake_one\(&self\.words\[j\]\);#F::wake_one(&self.words[(j + 1) % self.words.len()]);#loom_idle#two_workers_no_lost_wakeup#deadlock'
'idle-notify-lies#core/src/sched/idle.rs#self\.wake\(j, kick\);\n                true#self.wake(j, kick);\n                false#loom_idle#notify_one_racing_a_sleep#issued no wake'
'io-join-ignores-ticket#core/src/sched/io.rs#if \(self\.tick\.load\(Ordering::Relaxed\) \^ ticket\) & tick_mask\(interest\) != 0 \{#if false {#loom_io#readiness_after_eagain_is_never_lost#deadlock'
'mailbox-last-drop-no-wake#core/src/msg/channel/chan.rs#        // D2\.\n        if self\.rx\.is_set\(\) \{#        // D2.\n        if false {#loom_mailbox#last_addr_drop_racing_park#deadlock'
'select-register-no-recheck#core/src/msg/channel/chan.rs#        // R2, as in `wait`\.\n        // SAFETY: single consumer \(contract\)\.\n        if !unsafe \{ self\.queue\.is_empty_sc\(\) \} \|\| self\.senders\.load\(Ordering::SeqCst\) == 0 \{#        // R2, as in `wait`.\n        if false {#loom_select#two_sources_ready_at_once_one_taken_one_intact#deadlock'
'idle-no-kick#core/src/sched/idle.rs#        if kick \{\n            // Acquire: pairs with#        if false {\n            // Acquire: pairs with#loom_io#wakes_reach_the_poller_and_the_futex_sleeper#deadlock'
'mutex-unlock-ignores-queued#core/src/locks/mutex.rs#\.compare_exchange\(LOCKED, 0, Ordering::Release, Ordering::Relaxed\)\n            \.is_err\(\)#.fetch_and(!LOCKED, Ordering::Release)\n            == 0#loom_locks#mutex_unlock_races_a_waiter#deadlock'
'mutex-unlock-relaxed#core/src/locks/mutex.rs#\.compare_exchange\(LOCKED, 0, Ordering::Release, Ordering::Relaxed\)#.compare_exchange(LOCKED, 0, Ordering::Relaxed, Ordering::Relaxed)#loom_locks#mutex_unlock_races_a_waiter#Causality violation'
'semaphore-release-skips-grant#core/src/locks/semaphore.rs#        if s & QUEUED != 0 \{\n            self\.grant\(\);#        if false {\n            self.grant();#loom_locks#semaphore_release_races_acquire#deadlock'
'mutex-handoff-unmarked#core/src/locks/mutex.rs#                list\.mark\(e\.ticket\);\n#                let _ = e.ticket;\n#loom_locks#mutex_two_waiters#deadlock'
'condvar-register-after-release#core/src/locks/condvar.rs#(        // C1\.\n        let ticket = \{\n(?:.*\n){5}        \};\n)(        // C2\.\n        core::mem::forget\(guard\);\n(?:.*\n)        unsafe \{ mutex\.raw_unlock\(\) \};\n)#\2\1#loom_locks#condvar_notify_races_a_wait#deadlock'
'cell-kill-no-fence#core/src/actor/cell.rs#(        self\.killed\.store\(true, Ordering::SeqCst\);\n)        fence\(Ordering::SeqCst\);\n#\1#loom_cell#a_kill_racing_a_reserved_actors_spawn_reaches_it#the kill was lost'
'cell-control-keeps-life#core/src/actor/cell.rs#        drop\(ManuallyDrop::into_inner\(life\)\);#        let _ = life;#loom_cell#a_kill_racing_the_last_control_reference#frees the block'
'block-arc-upgrade-from-zero#core/src/sync/block_arc.rs#        if n == 0 \{\n            return false;\n        \}\n(        assert!\(n < MAX_REFS)#\1#loom_block_arc#an_upgrade_racing_the_last_strong_drop#Causality violation'
'block-arc-drop-relaxed#core/src/sync/block_arc.rs#    if count\.fetch_sub\(1, Ordering::Release\) != 1 \{\n        return false;\n    \}\n(?:    //.*\n){2}    count\.load\(Ordering::Acquire\);\n#    if count.fetch_sub(1, Ordering::Relaxed) != 1 {\n        return false;\n    }\n#loom_block_arc#clones_and_drops_of_both_kinds_on_two_threads#Causality violation'
'zero-close-no-wake#core/src/msg/channel/zero.rs#drop\(handed\);\n        for w in waiters \{\n            w\.wake\(\);\n        \}#drop(handed);\n        drop(waiters);#loom_channel#zero_receiver_drop_vs_blocked_send#deadlock'
'zero-hand-no-wake#core/src/msg/channel/zero.rs#drop\(st\);\n                    w\.wake\(\);\n                    sched::safe_point#drop(st);\n                    drop(w);\n                    sched::safe_point#loom_channel#zero_send_vs_recv#deadlock'
'zero-timeout-loses-value#core/src/msg/channel/zero.rs#return Found::Back\(back\);#return if closed { Found::Back(back) } else { Found::Taken };#loom_channel#zero_send_timeout_expiry_vs_recv#exactly one way'
'link-claim-ignores-unlink#core/src/actor/life.rs#let linked = mine\.swap_remove\(i\)\.1;#let linked = { mine.swap_remove(i); true };#loom_links#unlink_races_the_partners_exit_one_finds_the_link#exactly one finds the link'
'demonitor-no-wait#core/src/supervise/link.rs#while self\.0\.load\(Ordering::Acquire\) == SENDING \{#while false && self.0.load(Ordering::Acquire) == SENDING {#loom_links#demonitor_races_the_exit_hook_no_notice_after_it_returns#Causality violation'
'join-ref-drop-relaxed#core/src/spawn/slot.rs#if self\.refs\.fetch_sub\(1, Ordering::Release\) != 1 \{\n            return;\n        \}\n        self\.refs\.load\(Ordering::Acquire\);#if self.refs.fetch_sub(1, Ordering::Relaxed) != 1 {\n            return;\n        }#loom_join#a_detach_racing_the_finish_drops_the_result_once#Causality violation'
'join-complete-relaxed#core/src/spawn/slot.rs#match self\.state\.swap\(DONE, Ordering::AcqRel\)#match self.state.swap(DONE, Ordering::Relaxed)#loom_join#a_join_racing_the_finish_gets_the_value#Causality violation'
'ring-push-single-acquire#core/src/lockfree/ring.rs#(// Acquire: as in `push`, pairs with the Release store in `take`\n            // that freed the cell\.\n            let seq = slot\.seq\.load\()Ordering::Acquire#\1Ordering::Relaxed#loom_ring#one_producer_pushing_single_two_consumers#Causality violation'
'striped-plain-push-on-stripe#core/src/sched/queue/striped.rs#        if self\.single \{\n            self\.overflow\.push\(v\);#        if self.single {\n            let _ = unsafe { self.push_stripe(hint, v, relax) };#loom_striped#single_producer_stripes_owner_thief_and_plain_thread#Causality violation'
'poll-lock-unlock-relaxed#core/src/seam/lock.rs#self\.held\.store\(false, Ordering::Release\);#self.held.store(false, Ordering::Relaxed);#loom_locks#poll_lock_sections_are_ordered#Causality violation'
'park-word-relaxed#core/src/actor/mod.rs#state\.compare_exchange\(RUNNING, to, Ordering::AcqRel, Ordering::Acquire\)#state.compare_exchange(RUNNING, to, Ordering::Relaxed, Ordering::Relaxed)#loom_handoff#a_wake_racing_the_handoff_park_makes_the_actor_runnable_once#Causality violation'
'lent-wake-takes-counted-park#core/src/actor/mod.rs#            PARKED if counted => \(RUNNABLE, Woken::Schedule\),#            PARKED => (RUNNABLE, Woken::Schedule),#loom_lent#a_stale_lent_registration_leaves_a_counted_park_alone#returned Schedule'
)
# One real-code mutation (it rebuilds core for loom, ~2 min) and the two
# replica mutations (each rebuilds only its test binary, ~15 s).
MUTANTS_CI=(idle-sleep-fence shutdown-no-recheck shutdown-last-idle)

want=()
case "${1:-}" in
    --ci) want=("${MUTANTS_CI[@]}") ;;
    "") for m in "${MUTANTS[@]}"; do want+=("${m%%#*}"); done ;;
    *) want=("$@") ;;
esac

export RUSTFLAGS="--cfg smarm_loom -C debug-assertions" CARGO_TARGET_DIR=target/loom
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}"
restore=""
trap '[ -z "$restore" ] || git checkout -- "$restore"' EXIT
start=$(date +%s)
for name in "${want[@]}"; do
    entry=""
    for m in "${MUTANTS[@]}"; do
        [ "${m%%#*}" = "$name" ] && entry="$m"
    done
    [ -n "$entry" ] || { echo "mutants: no mutation named $name" >&2; exit 2; }
    IFS='#' read -r _ file pattern replacement test model expect <<<"$entry"
    git diff --quiet -- "$file" || { echo "mutants: $file has uncommitted changes" >&2; exit 2; }
    python3 - "$file" "$pattern" "$replacement" <<'PY'
import re, sys
path, pat, rep = sys.argv[1:]
src = open(path).read()
out, n = re.subn(pat, rep, src, count=1)
if n != 1:
    sys.exit(f"mutants: the mutation's pattern no longer matches {path}: update scripts/mutants.sh")
open(path, "w").write(out)
PY
    restore="$file"
    t0=$(date +%s)
    rc=0
    out=$(cargo test -q -p smarm-core --release --test "$test" -- --exact "$model" 2>&1) || rc=$?
    git checkout -- "$file"
    restore=""
    if [ "$rc" = 0 ]; then
        echo "mutants: $name: $test::$model PASSED with the bug in: the model cannot fail"
        exit 1
    fi
    if ! grep -qi -- "$expect" <<<"$out"; then
        printf '%s\n' "$out" | tail -20
        echo "mutants: $name: $test::$model failed, but not with '$expect' (a build error?)"
        exit 1
    fi
    echo "mutants: $name: $test::$model fails as it must ('$expect', $(( $(date +%s) - t0 )) s)"
done
echo "mutants: ${#want[@]} mutations caught ($(( $(date +%s) - start )) s)"
