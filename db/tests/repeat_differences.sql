-- jobs.repeat_differences: how a repeated idempotency key's request differs from the job
-- that holds the key (the HTTP API's 422); an identical repeat differs in nothing.
BEGIN;
SELECT plan(9);
SELECT jobs.define_type('rd.k');
SELECT jobs.submit_many('[{"kind": "rd.k", "payload": {"a": 1, "b": [1, 2]}, "idempotency_key": "k1", "ordering_key": "o", "priority": 3,
                           "run_after": "2999-01-01T00:00:00Z"},
                          {"kind": "rd.k", "idempotency_key": "k2", "run_after": "2000-01-01T00:00:00Z"}]');

SELECT is_empty($$ SELECT * FROM jobs.repeat_differences('[{"kind": "rd.k", "payload": {"b": [1, 2], "a": 1}, "idempotency_key": "k1",
                                                              "ordering_key": "o", "priority": 3, "run_after": "2999-01-01T00:00:00+00:00"}]') $$,
                'an identical repeat (keys in another order, the same instant written otherwise) differs in nothing');
SELECT is_empty($$ SELECT * FROM jobs.repeat_differences('[{"kind": "rd.k", "idempotency_key": "k2", "run_after": "2000-01-01T00:00:00Z"}]') $$,
                'a past run_after repeated is the same request (it was submitted as its creation time)');
SELECT is((SELECT differs FROM jobs.repeat_differences('[{"kind": "rd.k", "payload": {"a": 2, "b": [1, 2]}, "idempotency_key": "k1", "ordering_key": "o"}]')),
          ARRAY['payload'], 'another payload differs in payload (run_after and priority left out are not compared)');
SELECT is((SELECT differs FROM jobs.repeat_differences('[{"kind": "rd.k", "payload": {"a": 1, "b": [1, 2]}, "idempotency_key": "k1",
                                                           "run_after": "2999-01-02T00:00:00Z", "priority": 4}]')),
          ARRAY['ordering_key', 'run_after', 'priority'], 'ordering_key, run_after and priority are compared');
SELECT jobs.submit_many('[{"kind": "rd.k", "idempotency_key": "k3", "concurrency_key": "tenant-a"}]');
SELECT is((SELECT array_agg(differs[1] ORDER BY pos) FROM jobs.repeat_differences(
              '[{"kind": "rd.k", "idempotency_key": "k3", "concurrency_key": "tenant-b"},
                {"kind": "rd.k", "idempotency_key": "k3"},
                {"kind": "rd.k", "idempotency_key": "k3", "concurrency_key": "tenant-a"}]')),
          ARRAY['concurrency_key', 'concurrency_key'], 'concurrency_key is compared: another key, or none, differs; the same key does not');
SELECT is((SELECT pos FROM jobs.repeat_differences('[{"kind": "rd.k", "idempotency_key": "new"}, {"kind": "rd.k", "idempotency_key": "k2", "payload": {"x": 1}}]')),
          1, 'pos is the 0-based position of the differing spec; a new key is not reported');
SELECT is((SELECT count(*) FROM jobs.repeat_differences('[{"kind": "other", "idempotency_key": "k1", "payload": {"z": 0}}]')), 0::bigint,
          'the kind is part of the key: another kind''s spec meets no job');
SELECT is((SELECT job_id FROM jobs.repeat_differences('[{"kind": "rd.k", "idempotency_key": "k1"}]')),
          (SELECT id FROM jobs.job WHERE idempotency_key = 'k1'), 'job_id names the job that holds the key');
SELECT throws_ok($$ SELECT * FROM jobs.repeat_differences('{}') $$, '22023', NULL, 'specs that are not an array: 22023');
SELECT * FROM finish();
ROLLBACK;
