"""Property-based fuzzing of the HTTP API from its committed OpenAPI document (schemathesis
over hypothesis): requests that fit the document and requests that break it, against a real
`jobfence api`. Whatever arrives, no answer is a 5xx, every answer is one the document
declares (status, media type, and a body its schema allows: the answer schemas forbid
members they do not describe, so an undocumented field fails here), and a rejected request
leaves jobs.job and jobs.event as they were."""

from __future__ import annotations

import json

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings

from api_helpers import ADMIN_TOKEN, start_api
from conftest import REPO

schemathesis = pytest.importorskip("schemathesis")
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.specs.openapi.checks import (content_type_conformance,  # noqa: E402
                                               response_schema_conformance,
                                               status_code_conformance)

SCHEMA = schemathesis.openapi.from_dict(json.loads((REPO / "docs" / "openapi.json").read_text()))
# Long polls would spend the budget waiting; the wait itself is covered in test_api.py.
LONGEST_WAIT = 0.05
EXAMPLES = {GenerationMode.POSITIVE: 250, GenerationMode.NEGATIVE: 250}


def _counts(conn) -> tuple[int, int]:
    return conn.execute("SELECT (SELECT count(*) FROM jobs.job), "
                        "(SELECT count(*) FROM jobs.event)").fetchone()


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
                         ids=["fits-the-document", "breaks-the-document"])
def test_no_5xx_and_rejected_requests_change_nothing(procs, declared, mode):
    import requests

    api = start_api(procs, "--max-body-bytes", "262144",
                    env={"JOBFENCE_LOG_LEVEL": "INFO"})
    conn = psycopg.connect(declared, autocommit=True)
    session = requests.Session()
    # Some real jobs, so that generated ids (hypothesis favours small ones) find rows.
    for n in range(3):
        session.post(f"{api.base}/jobs", json={"kind": "noop", "payload": {"n": n}},
                     headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).raise_for_status()
    seen: dict[int, int] = {}
    rejected = [0]

    @settings(max_examples=EXAMPLES[mode], deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(case=SCHEMA.as_strategy(generation_mode=mode))
    def fuzz(case):
        if case.query and isinstance(case.query.get("wait"), (int, float)) \
                and not isinstance(case.query["wait"], bool) and case.query["wait"] > LONGEST_WAIT:
            case.query["wait"] = LONGEST_WAIT
        before = _counts(conn)
        response = case.call(base_url=api.base, session=session, timeout=30,
                             headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        seen[response.status_code] = seen.get(response.status_code, 0) + 1
        assert response.status_code < 500, (case.method, case.formatted_path, case.query,
                                            case.body, response.text[:500])
        case.validate_response(response, checks=[status_code_conformance,
                                                 content_type_conformance,
                                                 response_schema_conformance])
        if response.status_code >= 400:
            rejected[0] += 1
            assert _counts(conn) == before, (case.method, case.formatted_path, case.body,
                                             response.status_code, response.text[:300])

    try:
        fuzz()
    finally:
        conn.close()
        session.close()
    # The run must have reached both sides, or it proved nothing.
    assert rejected[0] > 0 and any(code < 400 for code in seen), seen
