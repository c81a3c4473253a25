-- Verify jobfence:lease_policy on pg
-- Raises unless the one row exists with its two 64-byte key halves.
SELECT 1 / count(*) FROM jobs.lease_policy
 WHERE singleton AND octet_length(token_key_inner) = 64 AND octet_length(token_key_outer) = 64;
