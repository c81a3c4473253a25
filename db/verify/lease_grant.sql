-- Verify jobfence:lease_grant on pg
SELECT (NULL::jobs.lease_grant).job_id, (NULL::jobs.lease_grant).lease_version, (NULL::jobs.lease_grant).token;
