/*
 * The vocabulary's tables: the per-request metrics' names (rows of
 * TT_METRICS, metrics/metric.h) and the error kinds (TT_ERROR_KINDS,
 * metrics/errkind.h) with the mapping of a failed request's facts to its
 * kind.
 */
#include <string.h>

#include "metrics/metric.h"
#include "metrics/errkind.h"

#define ALL(X) TT_METRICS(X) TT_METRIC_ICL(X)

#define TAG(id, tag, ...) [TT_M_##id] = tag,
const char *const tt_metric_tag[TT_M_NAMED] = { ALL(TAG) };

#define UNIT(id, tag, unit, ...) [TT_M_##id] = unit,
const char *const tt_metric_unit[TT_M_NAMED] = { ALL(UNIT) };

#define HEADER(id, tag, unit, header, ...) [TT_M_##id] = header,
const char *const tt_metric_header[TT_M_NAMED] = { ALL(HEADER) };

#define ABBR(id, tag, unit, header, abbr, ...) [TT_M_##id] = abbr,
const char *const tt_metric_abbr[TT_M_NAMED] = { ALL(ABBR) };

#define HIGHER(id, tag, unit, header, abbr, rank, higher, ...) [TT_M_##id] = higher,
const unsigned char tt_metric_higher[TT_M_NAMED] = { ALL(HIGHER) };

/* a rank given twice is an overridden initializer (-Wextra), one out of
 * range an error: so the ranks are a permutation */
#define ORDER(id, tag, unit, header, abbr, rank, ...) [rank] = TT_M_##id,
const int tt_metric_order[TT_M_NAMED] = { ALL(ORDER) };

int tt_metric_by_tag(const char *tag)
{
    for (int i = 0; i < TT_M__COUNT; i++)
        if (strcmp(tt_metric_tag[i], tag) == 0)
            return i;
    return -1;
}

/* ---- error kinds (metrics/errkind.h) ---------------------------------- */

const char *const tt_errkind_names[TT_EK__COUNT] = {
#define TT_EK_NAME(id, name, code, meaning) [TT_EK_##id] = name,
    TT_ERROR_KINDS(TT_EK_NAME)
#undef TT_EK_NAME
};

int tt_errkind_by_name(const char *name)
{
    for (int i = 0; i < TT_EK__COUNT; i++)
        if (strcmp(tt_errkind_names[i], name) == 0)
            return i;
    return -1;
}

int tt_errkind_classify(const char *own, int body_error, int status, int streaming,
                        int cancelled)
{
    int k;

    if (cancelled)
        return TT_EK_CANCELLED;
    if (own != NULL) {
        k = tt_errkind_by_name(own);
        /* the names of an unnamed error object: classified as one */
        if (k == TT_EK_STREAM_ERROR || k == TT_EK_UPSTREAM_ERROR)
            body_error = 1;
        else if (k >= 0)
            return k;
        else
            return TT_EK_PROXY_ERROR;   /* not a kind: tokentap's own mistake */
    }
    if (status >= 400)
        return TT_EK_UPSTREAM_STATUS;
    if (body_error)
        return streaming ? TT_EK_STREAM_ERROR : TT_EK_UPSTREAM_ERROR;
    if (status == 0)
        return TT_EK_NO_RESPONSE;
    return -1;
}
