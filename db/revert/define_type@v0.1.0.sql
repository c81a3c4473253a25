-- Revert jobfence:define_type from pg
BEGIN;
DROP FUNCTION jobs.define_type(text, text, interval, interval, integer, interval, interval, integer, interval, numeric, numeric, bigint, interval, numeric, integer, integer, integer, interval, text);
COMMIT;
