/*
 * JSON parsing for the hot path: cJSON trees carved from a thread-local bump
 * arena, so decoding an event costs no malloc/free in steady state.
 *
 * Called by the stream decoder (proxy/decode/stream.c) once per event and by the
 * request inspector (proxy/http/inspect.c) once per request.  Other modules keep
 * using cJSON as usual: the hooks installed by tt_json_init() route to
 * malloc/free except inside tt_json_parse() on the calling thread.
 */
#ifndef TT_JSONARENA_H
#define TT_JSONARENA_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

/*
 * Install the cJSON hooks (idempotent, thread-safe).  Called lazily by
 * tt_json_parse(); main() may call it at startup, before worker threads use
 * cJSON, to keep the one-time hook switch out of any race.
 */
void tt_json_init(void);

/*
 * Parse <len> bytes at <s> (need not be NUL-terminated) as one JSON value;
 * trailing bytes other than whitespace make it a parse error.  Returns the
 * tree or NULL.  The tree lives in this thread's arena and stays valid until
 * the next tt_json_parse() or tt_json_reset() on the same thread; never
 * cJSON_Delete() it (harmless, but pointless).
 */
cJSON *tt_json_parse(const char *s, size_t len);

/* <v> as a token count: a finite, non-negative number below 2^53.
 * Returns 0 with <*out> set, or -1 (absent, not a number, out of range) */
int tt_json_count(const cJSON *v, int64_t *out);

/* release this thread's overflow memory (after a large parse) */
void tt_json_reset(void);

/* free this thread's arena entirely (thread exit, tests) */
void tt_json_thread_free(void);

#endif
