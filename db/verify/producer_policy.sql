-- Verify jobfence:producer_policy on pg
-- Raises unless the table holds exactly its one settings row.
SELECT 1 / (count(*) = 1)::integer FROM jobs.producer_policy WHERE singleton;
SELECT singleton, ownership, updated_at FROM jobs.producer_policy WHERE false;
