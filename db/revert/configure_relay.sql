-- Revert jobfence:configure_relay from pg
BEGIN;
DROP FUNCTION jobs.configure_relay(text);
COMMIT;
