/*
 * A log-line rate limiter: at most one line per interval for a repeating
 * condition (accept failing with EMFILE, a record write failing), with the
 * number of lines held back in between.  Lock-free, so any thread may use
 * the same limiter.  Used by proxy/server/server.c and metrics/record.c.
 *
 *     static struct tt_ratelimit rl;
 *     uint64_t held;
 *     if (tt_ratelimit_ok(&rl, tt_now_mono(), TT_RATELIMIT_1S, &held))
 *         tt_log_warn("accept: %s (%llu more suppressed)", why, held);
 */
#ifndef TT_RATELIMIT_H
#define TT_RATELIMIT_H

#include <stdatomic.h>
#include <stdint.h>

#define TT_RATELIMIT_1S 1000000000ull

struct tt_ratelimit {
    _Atomic uint64_t next_ns;       /* earliest time of the next line; 0 = now */
    _Atomic uint64_t held;          /* lines suppressed since the last one */
};

/*
 * May a line be logged at <now_ns> (monotonic)?  Returns 1 and sets <*held>
 * to the number of lines suppressed since the previous one (then reset),
 * or 0 and counts this one as suppressed.
 */
static inline int tt_ratelimit_ok(struct tt_ratelimit *rl, uint64_t now_ns,
                                  uint64_t interval_ns, uint64_t *held)
{
    uint64_t next = atomic_load(&rl->next_ns);

    if (now_ns < next ||
        !atomic_compare_exchange_strong(&rl->next_ns, &next, now_ns + interval_ns)) {
        atomic_fetch_add(&rl->held, 1);
        return 0;
    }
    *held = atomic_exchange(&rl->held, 0);
    return 1;
}

#endif
