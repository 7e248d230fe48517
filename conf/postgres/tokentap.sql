-- tokentap records in PostgreSQL: one jsonb row per request record
-- (schema tokentap.record/1, docs/metrics.md), loaded from the JSONL files
-- of any number of tokentap instances, and views that summarise them per
-- upstream and model the way `tokentap report` does.
--
-- Create (idempotent):   psql -d DB -f conf/postgres/tokentap.sql
-- Load one instance's records (each line one JSON document; the CSV mode
-- with quote and delimiter bytes that JSON never contains raw reads every
-- line verbatim, backslash escapes included):
--
--   psql -d DB -c "SET tokentap.instance = 'proxy-a'" \
--        -c "\copy tokentap_records(doc) FROM 'records.jsonl' WITH (FORMAT csv, QUOTE E'\x01', DELIMITER E'\x02')"
--
-- Then:  SELECT * FROM tokentap_summary;
--
-- Definitions (as `tokentap report`, metrics/report_set.c and report.c):
--   * an error is a record whose "error" is an object, or was_cancelled;
--     latency percentiles are over the records that are not errors;
--   * percentiles are percentile_cont: linear interpolation between the
--     closest ranks, h = p (n - 1) -- numpy's default "linear" method, the
--     one tokentap report and AIPerf use;
--   * a request is good when metadata.slo.good is true and it is not an
--     error; goodput = good requests / duration, duration = last
--     request_end_ns - first request_start_ns of the group, in seconds;
--     good_request_fraction = good / all records of the group.  Both are
--     NULL when no record of the group carries an SLO verdict.

CREATE TABLE IF NOT EXISTS tokentap_records (
    id        bigserial PRIMARY KEY,
    -- which tokentap wrote the record: SET tokentap.instance before \copy
    instance  text NOT NULL
              DEFAULT coalesce(nullif(current_setting('tokentap.instance', true), ''), 'unknown'),
    loaded_at timestamptz NOT NULL DEFAULT now(),
    doc       jsonb NOT NULL,
    -- kept beside the document for grouping and time ranges
    upstream  text GENERATED ALWAYS AS (doc -> 'metadata' ->> 'upstream') STORED,
    model     text GENERATED ALWAYS AS (doc -> 'metadata' ->> 'model') STORED,
    start_ns  bigint GENERATED ALWAYS AS ((doc -> 'metadata' ->> 'request_start_ns')::bigint) STORED
);

CREATE INDEX IF NOT EXISTS tokentap_records_group
    ON tokentap_records (upstream, model, start_ns);
CREATE INDEX IF NOT EXISTS tokentap_records_request_id
    ON tokentap_records ((doc -> 'metadata' ->> 'x_request_id'));

-- one row per record, the fields the summary needs as SQL values
CREATE OR REPLACE VIEW tokentap_requests AS
SELECT id,
       instance,
       upstream,
       model,
       doc -> 'metadata' ->> 'api'                                    AS api,
       doc -> 'metadata' ->> 'x_request_id'                           AS request_id,
       (doc -> 'metadata' ->> 'status')::int                          AS status,
       start_ns,
       coalesce((doc -> 'metadata' ->> 'request_end_ns')::bigint, start_ns) AS end_ns,
       (jsonb_typeof(doc -> 'error') = 'object'
        OR coalesce((doc -> 'metadata' ->> 'was_cancelled')::boolean, false)) AS is_error,
       doc -> 'error' ->> 'type'                                      AS error_type,
       -- NULL when the record carries no SLO verdict
       CASE WHEN jsonb_typeof(doc -> 'metadata' -> 'slo' -> 'good') = 'boolean'
            THEN (doc -> 'metadata' -> 'slo' ->> 'good')::boolean END AS slo_good,
       (doc -> 'metrics' -> 'time_to_first_token' ->> 'value')::float8        AS ttft_ms,
       (doc -> 'metrics' -> 'time_to_first_output_token' ->> 'value')::float8 AS ttfo_ms,
       (doc -> 'metrics' -> 'inter_token_latency' ->> 'value')::float8        AS itl_ms,
       (doc -> 'metrics' -> 'request_latency' ->> 'value')::float8            AS latency_ms,
       (doc -> 'metrics' -> 'input_sequence_length' ->> 'value')::float8      AS input_tokens,
       (doc -> 'metrics' -> 'output_sequence_length' ->> 'value')::float8     AS output_tokens
FROM tokentap_records;

-- per upstream and model: TTFT and ITL percentiles, goodput, good fraction
CREATE OR REPLACE VIEW tokentap_summary AS
SELECT upstream,
       model,
       count(DISTINCT instance)                                          AS instances,
       count(*)                                                          AS requests,
       count(*) FILTER (WHERE is_error)                                  AS errors,
       percentile_cont(0.50) WITHIN GROUP (ORDER BY ttft_ms) FILTER (WHERE NOT is_error) AS ttft_p50_ms,
       percentile_cont(0.90) WITHIN GROUP (ORDER BY ttft_ms) FILTER (WHERE NOT is_error) AS ttft_p90_ms,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY ttft_ms) FILTER (WHERE NOT is_error) AS ttft_p95_ms,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY ttft_ms) FILTER (WHERE NOT is_error) AS ttft_p99_ms,
       percentile_cont(0.50) WITHIN GROUP (ORDER BY itl_ms)  FILTER (WHERE NOT is_error) AS itl_p50_ms,
       percentile_cont(0.90) WITHIN GROUP (ORDER BY itl_ms)  FILTER (WHERE NOT is_error) AS itl_p90_ms,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY itl_ms)  FILTER (WHERE NOT is_error) AS itl_p95_ms,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY itl_ms)  FILTER (WHERE NOT is_error) AS itl_p99_ms,
       count(*) FILTER (WHERE slo_good AND NOT is_error)                 AS good_requests,
       (max(end_ns) - min(start_ns))::float8 / 1e9::float8               AS duration_s,
       CASE WHEN count(slo_good) > 0 AND max(end_ns) > min(start_ns)
            THEN (count(*) FILTER (WHERE slo_good AND NOT is_error))::float8
                 / ((max(end_ns) - min(start_ns))::float8 / 1e9::float8) END AS goodput_rps,
       CASE WHEN count(slo_good) > 0
            THEN (count(*) FILTER (WHERE slo_good AND NOT is_error))::float8
                 / count(*)::float8 END                                  AS good_request_fraction
FROM tokentap_requests
GROUP BY upstream, model;
