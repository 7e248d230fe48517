/*
 * The error kinds: the fixed set every output groups failed requests by.
 * A record's error.kind, /metrics tokentap_errors_total{type}, /stats
 * "errors" (and the dashboard, which reads it) and the report's "Errors by
 * type" table all take their names from this one list, so for any mix of
 * failures their counts agree.  docs/metrics.md section 4 lists the same
 * rows (tests/integration/test_vocab.py compares them).
 *
 * X(ID, name, code, meaning)
 *   name     the kind as outputs show it; for tokentap's own errors also
 *            the type the proxy passes to tt_request_set_error()
 *   code     the status tokentap answers or records with, as the docs
 *            show it ("upstream's": the upstream's status, or its error
 *            object's code)
 *   meaning  one line, as docs/metrics.md gives it
 *
 * The mapping of a finished request to its kind is tt_request_errkind()
 * (metrics/clock.h): a name below set by the proxy is that kind; an error
 * object or an error status from the upstream is upstream_status (under a
 * status >= 400), stream_error or upstream_error, the upstream's own type
 * kept beside it (error.upstream_type).  Adding a kind is one line here.
 */
#ifndef TT_ERRKIND_H
#define TT_ERRKIND_H

#define TT_ERROR_KINDS(X) \
    X(BAD_REQUEST, "bad_request", "400", \
      "malformed or smuggling-prone request head/body (see ARCHITECTURE.md, data path), CONNECT, " \
      "non-absolute target, `#fragment`, version other than HTTP/1.0 or 1.1") \
    X(REQUEST_TIMEOUT, "request_timeout", "408", \
      "request head not complete within `head_timeout`") \
    X(PAYLOAD_TOO_LARGE, "payload_too_large", "413", \
      "body over `max_body_bytes` (chunk sizes and chunk extensions included)") \
    X(HEADER_TOO_LARGE, "header_too_large", "431", \
      "header block over `max_header_bytes` or too many fields") \
    X(UPSTREAM_CONNECT, "upstream_connect", "502", \
      "connection refused, DNS failure, cannot connect") \
    X(UPSTREAM_TLS, "upstream_tls", "502", \
      "upstream TLS handshake or verification failed") \
    X(UPSTREAM_CONNECT_TIMEOUT, "upstream_connect_timeout", "504", \
      "no connection (TLS included) within `connect_timeout`") \
    X(UPSTREAM_TIMEOUT, "upstream_timeout", "504", \
      "no response head within `response_timeout`") \
    X(UPSTREAM_IDLE_TIMEOUT, "upstream_idle_timeout", "504", \
      "gap between upstream bytes over `upstream_idle_timeout`") \
    X(UPSTREAM_RESET, "upstream_reset", "502", \
      "upstream reset the connection") \
    X(UPSTREAM_BAD_RESPONSE, "upstream_bad_response", "502", \
      "malformed or smuggling-prone upstream response") \
    X(TRUNCATED, "truncated", "502", \
      "upstream closed mid-body, or the stream ended without its terminal marker") \
    X(NO_RESPONSE, "no_response", "502", \
      "no response at all and no other cause known") \
    X(UPSTREAM_STATUS, "upstream_status", "upstream's", \
      "upstream answered with a status >= 400, with or without an error object " \
      "(its own type, when it names one, is `error.upstream_type`)") \
    X(STREAM_ERROR, "stream_error", "upstream's", \
      "error in a stream under a non-error status (`data: {\"error\":..}`, `event: error`, " \
      "`response.failed`, Ollama `{\"error\":..}` lines)") \
    X(STREAM_PARSE_ERROR, "stream_parse_error", "502", \
      "a WebSocket session's frames broke RFC 6455: forwarded as they came, its decoding " \
      "stopped (the turn in progress and the session)") \
    X(UPSTREAM_ERROR, "upstream_error", "upstream's", \
      "error object in a non-streaming body under a non-error status") \
    X(CANCELLED, "cancelled", "499", \
      "the client went away before the response ended (`was_cancelled: true`, outcome `cancelled`)") \
    X(SHADOW_DROPPED, "shadow_dropped", "none", \
      "a shadow copy was abandoned (shadow upstreams only, see shadow.md)") \
    X(PROXY_ERROR, "proxy_error", "502", \
      "tokentap itself failed (out of memory)")

enum tt_errkind {
#define TT_EK_ENUM(id, name, code, meaning) TT_EK_##id,
    TT_ERROR_KINDS(TT_EK_ENUM)
#undef TT_EK_ENUM
    TT_EK__COUNT
};

/* name of each kind ("bad_request", ...) */
extern const char *const tt_errkind_names[TT_EK__COUNT];

/* the kind named <name> (exact), or -1 */
int tt_errkind_by_name(const char *name);

/*
 * The kind of a failed request from what is known about it (shared by
 * tt_request_errkind and the report's reading of records that predate
 * error.kind):
 *   own        the type tokentap set (NULL: none, or the upstream's own)
 *   body_error the response carried an error object (or the type is the
 *              upstream's own)
 *   status     the response status, 0 when there was none
 *   streaming  the body was an event stream
 *   cancelled  the client went away (beats every other cause)
 * -1 when nothing failed.
 */
int tt_errkind_classify(const char *own, int body_error, int status, int streaming,
                        int cancelled);

#endif
