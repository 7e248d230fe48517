/*
 * OTLP spans (SPEC section 14): one span per finished request leg, built
 * on the worker from the same computed metrics as its record
 * (tt_span_fill), then encoded in batches on the exporter's thread as an
 * ExportTraceServiceRequest, in protobuf (http/protobuf) or OTLP/JSON
 * (http/json).  Owned by metrics/otlp.c; the exporter is
 * metrics/otlp_export.c.
 *
 * The protobuf encoder is written here for the few messages used
 * (ExportTraceServiceRequest, ResourceSpans, Resource, ScopeSpans,
 * InstrumentationScope, Span, Span.Event, Span.Link, Status, KeyValue,
 * AnyValue, ArrayValue) with the field numbers of opentelemetry-proto's
 * trace/v1, common/v1 and resource/v1: Debian packages no OTLP schema, and
 * a code generator would need one.  Tests decode it with protoc --decode_raw.
 */
#ifndef TT_OTLP_H
#define TT_OTLP_H

#include <stddef.h>
#include <stdint.h>

#include "metrics/metric.h"
#include "metrics/request.h"
#include "metrics/slo.h"

enum tt_attr_type { TT_A_STR, TT_A_INT, TT_A_DBL, TT_A_BOOL, TT_A_STRLIST };

struct tt_span_attr {
    const char *key;            /* static */
    uint8_t     type;           /* enum tt_attr_type; STRLIST: one string */
    uint16_t    soff, slen;     /* string in tt_span.s */
    int64_t     i;              /* INT, BOOL */
    double      d;              /* DBL */
};

#define TT_SPAN_ATTRS  28
#define TT_SPAN_EVENTS 6

struct tt_span {
    struct tt_trace tr;
    int64_t  start_ns, end_ns;  /* unix ns */
    int      error;             /* status ERROR */
    uint16_t name_off, name_len;
    unsigned nattrs, nevents;
    struct tt_span_attr a[TT_SPAN_ATTRS];
    struct { const char *name; int64_t t; } ev[TT_SPAN_EVENTS];
    size_t   slen;
    char     s[1536];           /* the strings of name and attributes */
};

/*
 * Fill <sp> for the finished request <r> with metrics <m> (as computed for
 * its record) and SLO verdict <res> (NULL: no SLO); <host>/<port> name the
 * leg's upstream (server.address, server.port).  Returns 0, or -1 when the
 * request has no trace or its trace is not sampled (nothing to export).
 * No prompt, no answer: only names, ids, counts and times.
 */
int tt_span_fill(struct tt_span *sp, const struct tt_request *r,
                 const struct tt_metric_values *m, const struct tt_slo_result *res,
                 const char *host, const char *port);

/* a growable byte buffer; p is owned (free()) */
struct tt_obuf {
    unsigned char *p;
    size_t len, cap;
    int oom;
};

/* what is said of the process in every request (the Resource and Scope) */
struct tt_otlp_resource {
    const char *service_name;   /* service.name */
    const char *version;        /* service.version, scope version */
};

/* one ExportTraceServiceRequest of <n> spans appended to <b>; 0 or -1 (oom) */
int tt_otlp_encode_pb(struct tt_obuf *b, const struct tt_otlp_resource *res,
                      const struct tt_span *const *spans, size_t n);
int tt_otlp_encode_json(struct tt_obuf *b, const struct tt_otlp_resource *res,
                        const struct tt_span *const *spans, size_t n);

#endif
