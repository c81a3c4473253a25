-- Verify jobfence:relay_feed on pg
-- Raises unless the table holds exactly its one row.
SELECT 1 / (count(*) = 1)::integer FROM jobs.relay_feed WHERE singleton;
SELECT singleton, source, read_upto, horizon_id, horizon_xid, horizon_source, changed_at FROM jobs.relay_feed WHERE false;
