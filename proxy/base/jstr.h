/*
 * The scan inside a JSON string for the next byte that ends the plain run:
 * a quote, a backslash and, when <ctl>, a control byte (which RFC 8259
 * forbids raw and cJSON 1.7 accepts).  Shared by the OpenAI fast path
 * (proxy/decode/dec_openai_fast.c: ctl, it hands such strings to cJSON) and the
 * request inspector's one pass (proxy/http/inspect.c: no ctl, as cJSON).
 * Sixteen bytes a step where SSE2 is there (every x86-64), a byte at a
 * time elsewhere.
 */
#ifndef TT_JSTR_H
#define TT_JSTR_H

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* the first such byte in [q, e), or e */
static inline const char *tt_jstr_stop(const char *q, const char *e, int ctl)
{
#if defined(__SSE2__)
    const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\');
    const __m128i c1f = _mm_set1_epi8(0x1f);

    while (e - q >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)q);
        __m128i m = _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash));
        unsigned mask;
        if (ctl)    /* v <= 0x1f (unsigned) exactly when max(v, 0x1f) == 0x1f */
            m = _mm_or_si128(m, _mm_cmpeq_epi8(_mm_max_epu8(v, c1f), c1f));
        mask = (unsigned)_mm_movemask_epi8(m);
        if (mask != 0)
            return q + __builtin_ctz(mask);
        q += 16;
    }
#endif
    for (; q < e; q++) {
        unsigned char c = (unsigned char)*q;
        if (c == '"' || c == '\\' || (ctl && c < 0x20))
            break;
    }
    return q;
}

#endif
