/*
 * Thread-local bump arena behind cJSON (see jsonarena.h).  Owns the cJSON
 * allocation hooks of the whole process; called by proxy/decode/stream.c and
 * proxy/http/inspect.c through tt_json_parse().
 *
 * cJSON's hooks are process-global, so the hook functions look at a
 * thread-local flag: inside tt_json_parse() on this thread allocations come
 * from the arena, everywhere else (records, other threads) they go to malloc.
 * The free hook tells arena memory from malloc'd memory by address range:
 * arena pointers are dropped, others are passed to free().
 *
 * When one parse outgrows the arena, the rest comes from overflow blocks that
 * live until the next reset; the arena then grows (up to ARENA_MAX) to the
 * high-water mark, so a steady stream of similar events settles into zero
 * malloc calls.
 */
#include "proxy/base/jsonarena.h"

#include <math.h>

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_INIT  (64u * 1024)
#define ARENA_MAX   (4u * 1024 * 1024)
#define OVF_MIN     (64u * 1024)
#define ALIGN       16u

struct ovf {
    struct ovf *next;
    size_t      size;       /* usable bytes after the header */
    size_t      used;
};

#define OVF_HDR (((sizeof(struct ovf)) + ALIGN - 1) & ~(size_t)(ALIGN - 1))

struct arena {
    char       *base;       /* owned; NULL until the first parse */
    size_t      cap;
    size_t      used;
    struct ovf *ovf;        /* owned list, newest first */
    size_t      ovf_used;   /* bytes handed out from overflow since reset */
    int         active;     /* inside tt_json_parse() */
};

static _Thread_local struct arena ta;
static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;

static int in_range(const void *p, const char *lo, size_t n)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)lo;
    return a >= b && a < b + n;
}

static void *arena_alloc(size_t size)
{
    size_t sz = (size + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    struct ovf *o;

    if (sz < size)
        return NULL;
    if (ta.base != NULL && ta.cap - ta.used >= sz) {
        void *p = ta.base + ta.used;
        ta.used += sz;
        return p;
    }
    o = ta.ovf;
    if (o == NULL || o->size - o->used < sz) {
        size_t n = sz > OVF_MIN ? sz : OVF_MIN;
        if (n > SIZE_MAX - OVF_HDR)
            return NULL;
        o = malloc(OVF_HDR + n);
        if (o == NULL)
            return NULL;
        o->next = ta.ovf;
        o->size = n;
        o->used = 0;
        ta.ovf = o;
    }
    ta.ovf_used += sz;
    o->used += sz;
    return (char *)o + OVF_HDR + o->used - sz;
}

static void *hook_malloc(size_t size)
{
    if (!ta.active)
        return malloc(size);
    return arena_alloc(size);
}

static void hook_free(void *p)
{
    struct ovf *o;

    if (p == NULL)
        return;
    if (ta.base != NULL && in_range(p, ta.base, ta.cap))
        return;
    for (o = ta.ovf; o != NULL; o = o->next)
        if (in_range(p, (char *)o + OVF_HDR, o->size))
            return;
    free(p);
}

static void install_hooks(void)
{
    cJSON_Hooks h = { hook_malloc, hook_free };
    cJSON_InitHooks(&h);
}

void tt_json_init(void)
{
    pthread_once(&hooks_once, install_hooks);
}

static void free_ovf(void)
{
    struct ovf *o = ta.ovf, *next;

    for (; o != NULL; o = next) {
        next = o->next;
        free(o);
    }
    ta.ovf = NULL;
    ta.ovf_used = 0;
}

/* forget every tree; grow the arena to the last high-water mark */
static void arena_reset(void)
{
    size_t want = ta.used + ta.ovf_used;

    free_ovf();
    ta.used = 0;
    if (ta.base == NULL || (want > ta.cap && ta.cap < ARENA_MAX)) {
        size_t cap = ta.cap ? ta.cap : ARENA_INIT;
        char *p;
        while (cap < want && cap < ARENA_MAX)
            cap *= 2;
        if (cap > ARENA_MAX)
            cap = ARENA_MAX;
        p = malloc(cap);
        if (p != NULL) {
            free(ta.base);
            ta.base = p;
            ta.cap = cap;
        }
    }
}

cJSON *tt_json_parse(const char *s, size_t len)
{
    const char *end = NULL;
    char *copy;
    cJSON *root;

    tt_json_init();
    if (s == NULL || len == 0 || len == SIZE_MAX)
        return NULL;
    arena_reset();
    ta.active = 1;
    /* a NUL-terminated private copy: cJSON may peek one byte past <len> */
    copy = arena_alloc(len + 1);
    if (copy == NULL) {
        ta.active = 0;
        return NULL;
    }
    memcpy(copy, s, len);
    copy[len] = '\0';
    root = cJSON_ParseWithLengthOpts(copy, len, &end, 0);
    ta.active = 0;
    if (root == NULL)
        return NULL;
    if (end != NULL) {
        const char *stop = copy + len;
        while (end < stop && (*end == ' ' || *end == '\t' || *end == '\r' ||
                              *end == '\n'))
            end++;
        if (end < stop)
            return NULL;    /* trailing garbage: malformed */
    }
    return root;
}

void tt_json_reset(void)
{
    free_ovf();
    ta.used = 0;
}

void tt_json_thread_free(void)
{
    free_ovf();
    free(ta.base);
    ta.base = NULL;
    ta.cap = 0;
    ta.used = 0;
}

int tt_json_count(const cJSON *v, int64_t *out)
{
    double d;

    if (!cJSON_IsNumber(v))
        return -1;
    d = v->valuedouble;
    if (!isfinite(d) || d < 0 || d > 9.0e15)
        return -1;
    *out = (int64_t)d;
    return 0;
}
