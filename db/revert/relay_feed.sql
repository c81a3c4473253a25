-- Revert jobfence:relay_feed from pg
BEGIN;
DROP TABLE jobs.relay_feed;
COMMIT;
