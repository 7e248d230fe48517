/*
 * A seeded xorshift64 for the unit tests: the same values on every run,
 * so a failing case can be found again.
 */
#ifndef TT_TEST_RNG_H
#define TT_TEST_RNG_H

#include <stdint.h>

static inline uint64_t test_xorshift(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

#endif
