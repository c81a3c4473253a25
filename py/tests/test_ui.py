"""The web dashboard (`/ui`, docs/ui.md) end to end: a real `jobfence api` process, real
PostgreSQL, Redis and workers, and Debian's Chromium driven by Playwright. Every page visited
is saved as a screenshot under py/tests/artifacts/ui/."""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta, timezone

import pytest
from playwright import sync_api

from api_helpers import ADMIN_TOKEN, PRODUCER_TOKEN, start_api
from conftest import wait_until
from ui_helpers import (blocks_read, keep_for_docs, launch, pushed_ids, shoot, sql_all, sql_one,
                        status_of)


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        chromium = launch(playwright)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def api(procs, declared):
    return start_api(procs)


@pytest.fixture
def open_page(browser):
    """A new browser context (no cookies) per call; all closed at teardown."""
    contexts = []

    def make(*, width=1360, height=900):
        context = browser.new_context(viewport={"width": width, "height": height})
        context.set_default_timeout(15000)
        contexts.append(context)
        return context.new_page()

    yield make
    for context in contexts:
        context.close()


def sign_in(page, api, token):
    page.goto(f"{api.base}/ui/login")
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(r".*/ui(\?.*)?$"))


def cell(page, table: str, row_selector: str, column: str) -> str:
    """A figure as shown (without the words only screen readers get)."""
    text = page.locator(f"#{table} tr{row_selector} td[data-col='{column}']").inner_text()
    return text.replace("(outside its bound)", "").strip()


# Elements that stick out of the screen, other than the contents of scrollable regions.
WIDER_THAN_SCREEN = """() => [...document.querySelectorAll('body *')]
    .filter(el => !el.closest('.scroll') && el.getBoundingClientRect().right > innerWidth + 1)
    .slice(0, 10).map(el => el.tagName + '.' + el.className + ' ' + el.getBoundingClientRect().right)"""


def finished(url, job_id, wanted=("done", "failed")):
    return status_of(url, job_id) in wanted


# -- sign in and out --------------------------------------------------------------------------
def test_sign_in_sets_a_strict_httponly_cookie_and_sign_out_ends_it(api, open_page):
    page = open_page()
    page.goto(f"{api.base}/ui/jobs?status=failed")
    # Not signed in: sent to the login page, which remembers where to go back.
    assert "/ui/login" in page.url and "next=" in page.url, page.url
    shoot(page, "login")
    page.get_by_label("Token").fill("not-a-token")
    page.get_by_role("button", name="Sign in").click()
    assert page.get_by_role("alert").inner_text().startswith("That token is not")
    assert page.context.cookies() == []

    page.get_by_label("Token").fill(PRODUCER_TOKEN)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(r".*/ui/jobs\?status=failed$"))
    (cookie,) = page.context.cookies()
    assert cookie["name"] == "jobfence_session" and cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict" and cookie["path"] == "/ui"
    assert cookie["secure"] is False  # plain http here; https sets Secure
    # The cookie holds no token.
    assert PRODUCER_TOKEN not in cookie["value"]
    assert page.locator(".scope").inner_text().strip() == "producer"

    # The bearer header works as it does for the API, without any cookie.
    bare = open_page()
    bare.set_extra_http_headers({"Authorization": f"Bearer {ADMIN_TOKEN}"})
    bare.goto(f"{api.base}/ui/health")
    assert bare.url.endswith("/ui/health") and bare.locator(".scope").inner_text().strip() == "admin"

    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(re.compile(r".*/ui/login$"))
    assert page.context.cookies() == []
    page.goto(f"{api.base}/ui")
    assert "/ui/login" in page.url

    # A cookie signed by something else is no session.
    page.context.add_cookies([{"name": "jobfence_session", "value": cookie["value"][:-4] + "AAAA",
                               "url": f"{api.base}/ui"}])
    page.goto(f"{api.base}/ui")
    assert "/ui/login" in page.url
    # An htmx poll of an expired session is told where to sign in rather than sent a page.
    answer = api.get("/ui/fragments/overview", token=None, headers={"HX-Request": "true"})
    assert answer.status == 401 and answer.headers["hx-redirect"].startswith("/ui/login")
    # The login page does not send anyone elsewhere.
    assert "evil" not in api.get("/ui/login?next=//evil.example/ui", token=None).raw.decode()


def test_the_dashboard_is_not_in_the_openapi_document_and_serves_its_assets(api):
    paths = api.get("/openapi.json", token=None).data["paths"]
    assert not [p for p in paths if p.startswith("/ui")], paths
    for asset, media in (("htmx.min.js", "javascript"), ("uPlot.iife.min.js", "javascript"),
                         ("uPlot.min.css", "css"), ("app.css", "css"), ("app.js", "javascript")):
        answer = api.get(f"/ui/static/{asset}", token=None)
        assert answer.status == 200 and media in answer.headers["content-type"], asset
    page = api.get("/ui/login", token=None)
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY"


def test_without_auth_every_page_is_open_and_forms_still_need_their_csrf_token(
        procs, client, declared, open_page):
    api = start_api(procs, "--no-auth", name="api-open", tokens=None, token=None)
    job_id = _failed_job(procs, client, declared, worker="w-open")
    page = open_page()
    page.goto(f"{api.base}/ui/login")
    assert page.url.endswith("/ui") and page.locator(".scope").inner_text().startswith("admin")
    assert page.get_by_role("button", name="Sign out").count() == 0
    page.goto(f"{api.base}/ui/jobs/{job_id}/confirm?action=replay")
    assert page.request.post(f"{api.base}/ui/jobs/{job_id}/replay", form={},
                             max_redirects=0).status == 403
    assert status_of(declared, job_id) == "failed"
    page.get_by_role("button", name=f"Replay job {job_id}").click()
    page.wait_for_url(re.compile(rf".*/ui/jobs/{job_id}\?done=\w+"))
    assert status_of(declared, job_id) == "queued"


def test_the_vendored_assets_are_the_ones_vendored_md_names():
    import hashlib

    from jobfence.ui.render import STATIC

    listed = re.findall(r"\| `([^`]+)` \|[^\n]*\| `([0-9a-f]{64})` \|",
                        (STATIC / "VENDORED.md").read_text())
    assert {name for name, _ in listed} == {"htmx.min.js", "uPlot.iife.min.js", "uPlot.min.css"}
    for name, digest in listed:
        assert hashlib.sha256((STATIC / name).read_bytes()).hexdigest() == digest, name
    assert (STATIC / "htmx.LICENSE").exists() and (STATIC / "uPlot.LICENSE").exists()
    assert '"2.0.11"' in (STATIC / "htmx.min.js").read_text()


# -- overview ---------------------------------------------------------------------------------
def test_the_overview_shows_each_queue_and_kind_with_the_counts_of_postgresql(
        api, procs, client, declared, open_page):
    client.db.define_type("report", queue="reports", slo_latency=5.0)
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    for n in range(3):
        client.submit("noop", {"n": n})
    for n in range(2):
        client.submit("noop", {"n": n}, run_after=later)
    client.submit("report", {"n": 0}, ordering_key="acct:1")
    client.submit("report", {"n": 1}, ordering_key="acct:1")
    client.submit("report", {"n": 2}, run_after=later)
    # Some failed attempts, so the failure chart and the dead-letter count have something.
    flaky = [client.submit("flaky", {"fail_times": 1}) for _ in range(4)]
    flaky.append(client.submit("flaky", {"p": 1, "permanent": True}))

    page = open_page()
    sign_in(page, api, ADMIN_TOKEN)
    sync_api.expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    depth = {(q, k): (ready, delayed, blocked, running) for q, k, ready, delayed, blocked, running in
             sql_all(declared, "SELECT queue, kind, queued_ready, queued_delayed, queued_blocked, "
                               "processing FROM jobs.queue_depth")}
    assert depth[("default", "noop")] == (3, 2, 0, 0)
    assert depth[("reports", "report")] == (1, 1, 1, 0)
    for (queue, kind), (ready, delayed, blocked, running) in depth.items():
        row = f"[data-queue='{queue}'][data-kind='{kind}']"
        assert cell(page, "depth", row, "ready") == str(ready), (queue, kind)
        assert cell(page, "depth", row, "delayed") == str(delayed), (queue, kind)
        assert cell(page, "depth", row, "blocked") == str(blocked), (queue, kind)
        assert cell(page, "depth", row, "in flight") == str(running), (queue, kind)
        assert cell(page, "depth", row, "backlog") == str(ready + delayed + blocked)
    assert cell(page, "kinds", "[data-kind='report']", "latency p95/slo") == "-/5s"
    # A paused queue says so (jobs.pause), and the next refresh shows it resumed.
    sql_one(declared, "SELECT jobs.pause(queue => 'reports')")
    row = page.locator("#depth tr[data-queue='reports'] td").first
    wait_until(lambda: "paused since" in row.inner_text(), timeout=20, what="the paused mark")
    sql_one(declared, "SELECT jobs.resume(queue => 'reports')")
    wait_until(lambda: "paused" not in row.inner_text(), timeout=20, what="the mark to go")
    # Both charts are drawn.
    wait_until(lambda: page.locator(".chart canvas").count() == 2, what="both charts drawn")

    # The fragment refreshes itself: a worker drains the ready noops and the page follows.
    procs.worker("w-overview")
    wait_until(lambda: sql_one(declared, "SELECT queued_ready FROM jobs.queue_depth "
                                         "WHERE kind = 'noop'")[0] == 0, what="noops drained")
    wait_until(lambda: cell(page, "depth", "[data-kind='noop']", "ready") == "0", timeout=20,
               what="the overview to refresh itself")
    assert cell(page, "kinds", "[data-kind='noop']", "in/s") != "-"
    wait_until(lambda: cell(page, "kinds", "[data-kind='noop']", "slo met/target")
               .startswith("100.0%"), timeout=20, what="the SLO column to follow")
    wait_until(lambda: all(finished(declared, j) for j in flaky), what="the flaky jobs")
    wait_until(lambda: cell(page, "kinds", "[data-kind='flaky']", "dead") == "1", timeout=20,
               what="the dead letter in the kinds table")
    assert "alert" in page.locator("#kinds tr[data-kind='flaky'] td[data-col='dead']") \
        .get_attribute("class")
    wait_until(lambda: page.locator(".chart canvas").count() == 2, what="charts redrawn")
    keep_for_docs(shoot(page, "overview"), "ui-overview")

    # Readable on a phone: nothing wider than the screen but the scrollable tables.
    phone = open_page(width=390, height=844)
    sign_in(phone, api, ADMIN_TOKEN)
    overflow = phone.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 1, (overflow, phone.evaluate(WIDER_THAN_SCREEN))
    shoot(phone, "overview-phone")


# -- one job ----------------------------------------------------------------------------------
def test_the_job_page_shows_the_timeline_of_a_retried_job(api, procs, client, declared, open_page):
    procs.worker("w-flaky")
    job_id = client.submit("flaky", {"fail_times": 2})
    wait_until(lambda: finished(declared, job_id), what="the flaky job to finish")
    assert status_of(declared, job_id) == "done"

    page = open_page()
    sign_in(page, api, PRODUCER_TOKEN)
    page.goto(f"{api.base}/ui/jobs/{job_id}")
    assert page.locator("#job-status").inner_text() == "done"
    assert page.locator("#attempt").inner_text().startswith("3 of")
    steps = page.locator("#timeline tbody tr")
    reasons = [steps.nth(i).get_attribute("data-reason") for i in range(steps.count())]
    expected = [r for (r,) in sql_all(declared, "SELECT reason FROM jobs.history WHERE job_id = %s "
                                                "ORDER BY id", (job_id,))]
    assert reasons == expected
    assert reasons.count("claimed") == 3 and reasons.count("retried") == 2
    assert reasons[0] == "submitted" and reasons[-1] == "completed"
    leases = [steps.nth(i).get_attribute("data-lease") for i in range(steps.count())
              if reasons[i] == "claimed"]
    # Each attempt holds a lease of its own, newer than the last (a retry bumps it too).
    assert leases == [str(v) for (v,) in sql_all(
        declared, "SELECT lease_version FROM jobs.history WHERE job_id = %s AND reason = "
                  "'claimed' ORDER BY id", (job_id,))]
    assert [int(v) for v in leases] == sorted({int(v) for v in leases})
    claimed = page.locator("#timeline tr[data-reason='claimed']").first.inner_text()
    assert "w-flaky" in claimed
    assert "planned failure on attempt 1" in page.locator("#timeline").inner_text()
    assert '"attempt": 3' in page.locator("#result").inner_text()
    # A producer looks: no action buttons.
    assert page.locator("#replay").count() == 0 and page.locator("#cancel").count() == 0
    keep_for_docs(shoot(page, "job"), "ui-job")


def test_the_job_page_shows_the_jobs_it_depends_on_and_its_dependents(
        api, procs, client, declared, open_page):
    parent = client.submit("noop", {"step": "extract"})
    child = client.submit("noop", {"step": "load"}, depends_on=[parent])
    anyway = client.submit("noop", {"step": "report"}, depends_on=[parent], on_dependency_failure="run")

    page = open_page()
    sign_in(page, api, PRODUCER_TOKEN)
    page.goto(f"{api.base}/ui/jobs/{child}")
    # Nothing has run yet: the child waits for its one dependency.
    assert page.locator("#pending").inner_text() == "Waiting for 1 of the jobs it depends on."
    row = page.locator(f"#dependencies tr[data-id='{parent}']")
    assert row.count() == 1 and "waiting" in row.inner_text() and "fail" in row.inner_text()
    assert page.locator("#dependents").count() == 0

    procs.worker("w-graph")
    wait_until(lambda: finished(declared, anyway) and finished(declared, child),
               what="the dependents to run once their dependency is done")
    page.goto(f"{api.base}/ui/jobs/{parent}")
    shown = [page.locator("#dependents tbody tr").nth(i).get_attribute("data-id")
             for i in range(page.locator("#dependents tbody tr").count())]
    assert shown == [str(child), str(anyway)]
    assert "run" in page.locator(f"#dependents tr[data-id='{anyway}']").inner_text()
    assert page.locator("#dependencies").count() == 0
    page.goto(f"{api.base}/ui/jobs/{child}")
    assert page.locator("#pending").count() == 0
    released = page.locator(f"#dependencies tr[data-id='{parent}']").inner_text()
    assert "waiting" not in released and "done" in released
    shoot(page, "job-dependencies")


def test_a_reaped_lease_is_marked_on_the_timeline(api, procs, client, declared, open_page):
    # A worker that dies mid-job: its lease expires, the reaper takes it back, another
    # worker finishes; the dead worker's lease is the superseded one.
    procs.reaper()
    doomed = procs.worker("w-doomed")
    job_id = client.submit("crash", {"attempts": 1})
    wait_until(lambda: not doomed.alive(), what="the crashing worker to die")
    procs.worker("w-survivor")
    wait_until(lambda: finished(declared, job_id), timeout=30, what="the crash job to finish")
    page = open_page()
    sign_in(page, api, PRODUCER_TOKEN)
    page.goto(f"{api.base}/ui/jobs/{job_id}")
    first_claim = page.locator("#timeline tr[data-reason='claimed']").first
    assert "superseded" in first_claim.get_attribute("class")
    assert "later writes refused" in first_claim.inner_text()
    assert page.locator("#timeline tr[data-reason='reaped']").count() == 1
    shoot(page, "job-reaped")


def _failed_job(procs, client, declared, payload=None, worker="w-fail"):
    w = procs.worker(worker)
    job_id = client.submit("flaky", payload or {"p": 1, "permanent": True})
    wait_until(lambda: finished(declared, job_id), what="the job to fail")
    assert status_of(declared, job_id) == "failed"
    w.kill()
    return job_id


def test_replay_from_the_job_page_queues_the_failed_job_and_signals_it(
        api, procs, client, declared, redis_url, open_page):
    job_id = _failed_job(procs, client, declared)
    page = open_page()
    sign_in(page, api, ADMIN_TOKEN)
    page.goto(f"{api.base}/ui/jobs/{job_id}")
    assert "permanent failure" in page.locator("#error").inner_text()
    page.get_by_role("link", name="Replay…").click()
    # The confirmation step changes nothing by itself.
    sync_api.expect(page.get_by_role("heading", name=f"Replay job {job_id}?")).to_be_visible()
    shoot(page, "replay-confirm")
    assert status_of(declared, job_id) == "failed"
    page.get_by_role("button", name=f"Replay job {job_id}").click()
    page.wait_for_url(re.compile(rf".*/ui/jobs/{job_id}\?done=\w+"))
    assert "queued again" in page.get_by_role("status").inner_text()
    assert status_of(declared, job_id) == "queued"
    assert sql_one(declared, "SELECT reason FROM jobs.event WHERE job_id = %s ORDER BY id DESC "
                             "LIMIT 1", (job_id,))[0] == "replayed"
    # Signalled as the API's replay route signals.
    assert job_id in pushed_ids(redis_url)
    assert page.locator("#replay").count() == 0
    # A queued job can be cancelled, after its own confirmation.
    page.get_by_role("link", name="Cancel…").click()
    page.get_by_role("button", name=f"Cancel job {job_id}").click()
    page.wait_for_url(re.compile(rf".*/ui/jobs/{job_id}\?done=\w+"))
    assert status_of(declared, job_id) == "failed"
    assert "Cancelled" in page.get_by_role("status").inner_text()


def test_a_producer_sees_no_replay_button_and_is_refused_if_it_posts(
        api, procs, client, declared, open_page):
    job_id = _failed_job(procs, client, declared)
    page = open_page()
    sign_in(page, api, PRODUCER_TOKEN)
    page.goto(f"{api.base}/ui/jobs/{job_id}")
    assert page.locator("#job-status").inner_text() == "failed"
    assert page.get_by_role("link", name="Replay…").count() == 0
    csrf = page.locator("form[action$='/logout'] input[name=csrf]").get_attribute("value")
    answer = page.request.post(f"{api.base}/ui/jobs/{job_id}/replay", form={"csrf": csrf},
                               headers={"Origin": api.base}, max_redirects=0)
    assert answer.status == 403, answer.status
    assert "may look but not act" in answer.text()
    assert page.request.get(f"{api.base}/ui/jobs/{job_id}/confirm?action=replay").status == 403
    groups = page.request.post(f"{api.base}/ui/dead-letters/replay",
                               form={"csrf": csrf, "ids": str(job_id), "confirmed": "yes"},
                               headers={"Origin": api.base})
    assert groups.status == 403
    assert status_of(declared, job_id) == "failed"
    page.goto(f"{api.base}/ui/dead-letters")
    assert page.locator("#replay-selected").count() == 0


def test_a_form_without_this_sessions_csrf_token_or_from_another_origin_changes_nothing(
        api, procs, client, declared, open_page):
    job_id = _failed_job(procs, client, declared)
    page = open_page()
    sign_in(page, api, ADMIN_TOKEN)
    page.goto(f"{api.base}/ui/jobs/{job_id}/confirm?action=replay")
    csrf = page.locator("main form input[name=csrf]").get_attribute("value")
    url = f"{api.base}/ui/jobs/{job_id}/replay"
    for form, origin in (({}, api.base), ({"csrf": "0" * 64}, api.base),
                         ({"csrf": csrf}, "http://evil.example"), ({"csrf": csrf}, "null")):
        answer = page.request.post(url, form=form, headers={"Origin": origin}, max_redirects=0)
        assert answer.status == 403, (form, origin, answer.status)
        assert status_of(declared, job_id) == "failed"
    # Another session's token is not this one's.
    other = open_page()
    sign_in(other, api, ADMIN_TOKEN)
    assert other.request.post(url, form={"csrf": csrf}, headers={"Origin": api.base},
                              max_redirects=0).status == 403
    assert status_of(declared, job_id) == "failed"
    # Signing out needs the token too.
    assert page.request.post(f"{api.base}/ui/logout", form={}, max_redirects=0).status == 403
    # The real form works.
    answer = page.request.post(url, form={"csrf": csrf}, headers={"Origin": api.base},
                               max_redirects=0)
    assert answer.status == 303 and status_of(declared, job_id) == "queued"


# -- dead letters -----------------------------------------------------------------------------
def test_dead_letters_are_grouped_and_a_selected_group_is_replayed_in_one_go(
        api, procs, client, declared, redis_url, open_page):
    w = procs.worker("w-dead")
    permanent = [client.submit("flaky", {"p": 1, "permanent": True}) for _ in range(3)]
    exhausted = client.submit("flaky", {"fail_times": 99})
    cancelled = client.submit("noop", run_after=datetime.now(timezone.utc) + timedelta(hours=1))
    client.cancel(cancelled)
    wait_until(lambda: all(finished(declared, j) for j in permanent + [exhausted]), timeout=30,
               what="the jobs to fail")
    w.kill()

    page = open_page()
    sign_in(page, api, ADMIN_TOKEN)
    page.goto(f"{api.base}/ui/dead-letters")
    rows = page.locator("#groups tbody tr")
    assert rows.count() == 2, page.locator("#groups").inner_text()
    text = page.locator("#groups").inner_text()
    assert "flaky: permanent failure" in text and "planned failure" in text
    # A cancellation is not a dead letter.
    assert page.locator(f"#groups a[href$='/jobs/{cancelled}']").count() == 0
    assert page.locator(f"#groups a[href$='/jobs/{exhausted}']").count() == 1
    keep_for_docs(shoot(page, "dead-letters"), "ui-dead-letters")

    # The whole group: jobs.replay_many for the kind and that exact error.
    page.get_by_role("button", name=re.compile("Replay the whole group: flaky failing with "
                                               ".*permanent failure")).click()
    confirm = page.get_by_role("heading", name="Replay every failed flaky job with this error?")
    sync_api.expect(confirm).to_be_visible()
    assert all(status_of(declared, j) == "failed" for j in permanent)
    page.get_by_role("button", name="Replay every failed flaky job with this error").click()
    assert page.locator("#summary").inner_text().startswith("3 replayed")
    shoot(page, "replay-summary")
    assert [status_of(declared, j) for j in permanent] == ["queued"] * 3
    assert set(permanent) <= set(pushed_ids(redis_url))
    # The three were replayed by one transaction: one transaction id on their events.
    (xids,) = sql_one(declared, "SELECT count(DISTINCT xmin::text) FROM jobs.event "
                                "WHERE reason = 'replayed' AND job_id = ANY(%s)", (permanent,))
    assert xids == 1
    # Ticked groups: their jobs, each by jobs.replay, in one transaction.
    page.goto(f"{api.base}/ui/dead-letters")
    page.get_by_label(re.compile("Select 1 flaky job")).check()
    page.get_by_role("button", name="Replay selected…").click()
    sync_api.expect(page.get_by_role("heading", name="Replay 1 job?")).to_be_visible()
    assert status_of(declared, exhausted) == "failed"
    page.get_by_role("button", name="Replay 1 job").click()
    assert page.locator("#summary").inner_text().startswith("1 replayed")
    assert status_of(declared, exhausted) == "queued"
    # A replay of jobs that are no longer failed skips them and says so.
    csrf = page.locator("form[action$='/logout'] input[name=csrf]").get_attribute("value")
    again = page.request.post(f"{api.base}/ui/dead-letters/replay",
                              form={"csrf": csrf, "ids": f"{permanent[0]},{exhausted}",
                                    "confirmed": "yes"}, headers={"Origin": api.base})
    assert again.status == 200 and "0 replayed, 2 skipped" in again.text()


# -- jobs and health --------------------------------------------------------------------------
def test_jobs_filter_and_page_and_health_names_the_running_worker(
        api, procs, client, declared, open_page):
    ids = [client.submit("noop", {"n": n}) for n in range(7)]
    sleeper = client.submit("sleep", {"seconds": 30})
    page = open_page()
    sign_in(page, api, PRODUCER_TOKEN)
    page.goto(f"{api.base}/ui/jobs?kind=noop&limit=25")
    shown = [int(x) for x in page.locator("#jobs tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.id)")]
    assert shown == sorted(ids, reverse=True)
    page.goto(f"{api.base}/ui/jobs?kind=noop&limit=25&after={ids[3]}")
    shown = [int(x) for x in page.locator("#jobs tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.id)")]
    assert shown == [ids[2], ids[1], ids[0]]
    # Submitted before a moment: the jobs older than the fifth.
    (moment,) = sql_one(declared, "SELECT created_at FROM jobs.job WHERE id = %s", (ids[4],))
    before = moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")
    page.goto(f"{api.base}/ui/jobs?before={before}")
    first = int(page.locator("#jobs tbody tr").first.get_attribute("data-id"))
    assert first == ids[3], (first, ids)
    page.goto(f"{api.base}/ui/jobs?status=bogus")
    assert page.get_by_role("alert").inner_text().startswith("status 'bogus' is not one of")
    # One ordering key's jobs, whatever their status, through the filter form.
    keyed = [client.submit("noop", {"k": n}, ordering_key="acct-9") for n in range(3)]
    page.goto(f"{api.base}/ui/jobs")
    page.get_by_label("Ordering key").fill("acct-9")
    page.get_by_role("button", name="Filter").click()
    shown = [int(x) for x in page.locator("#jobs tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.id)")]
    assert shown == sorted(keyed, reverse=True)

    procs.worker("w-health")
    wait_until(lambda: status_of(declared, sleeper) == "processing", what="the sleep job to run")
    page.goto(f"{api.base}/ui/health")
    assert page.locator("#checks [data-check='postgresql']").inner_text().endswith("answers")
    assert page.locator("#checks [data-check='redis']").inner_text().endswith("answers")
    workers = page.locator("#workers").inner_text()
    assert "w-health" in workers, workers
    shoot(page, "health")


def test_health_says_which_of_redis_and_postgresql_does_not_answer(procs, declared, open_page):
    from api_helpers import closed_port

    no_redis = start_api(procs, name="api-no-redis",
                         redis_url=f"redis://127.0.0.1:{closed_port()}/0", token=ADMIN_TOKEN)
    page = open_page()
    sign_in(page, no_redis, ADMIN_TOKEN)
    page.goto(f"{no_redis.base}/ui/health")
    assert page.locator("#checks [data-check='postgresql']").inner_text().endswith("answers")
    redis_line = page.locator("#checks [data-check='redis']")
    assert "ConnectionError" in redis_line.inner_text(), redis_line.inner_text()
    assert "alert" in redis_line.get_attribute("class")
    shoot(page, "health-no-redis")

    no_pg = start_api(procs, name="api-no-pg", token=ADMIN_TOKEN, env={
        "JOBFENCE_DATABASE_URL": f"postgresql://root@127.0.0.1:{closed_port()}/nothing"})
    health = no_pg.get("/ui/health")
    body = health.raw.decode()
    assert health.status == 503, health.status
    assert 'data-check="postgresql" class="alert"' in body, body[-3000:]
    assert 'data-check="redis" class="ok"' in body
    # Any other page says so as a page, not a problem document.
    overview = no_pg.get("/ui")
    assert overview.status == 503 and overview.media_type == "text/html", overview.headers
    assert "PostgreSQL does not answer" in overview.raw.decode()
    # The API's own routes keep their problem documents.
    assert no_pg.get("/queues").media_type == "application/problem+json"


UNLABELLED = """() => [...document.querySelectorAll('input:not([type=hidden]), select, button')]
    .filter(el => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
                  && !el.textContent.trim()).map(el => el.outerHTML)"""


def test_pages_are_usable_with_the_keyboard_and_every_control_is_labelled(
        api, procs, client, declared, open_page):
    job_id = _failed_job(procs, client, declared, worker="w-a11y")
    page = open_page()
    sign_in(page, api, ADMIN_TOKEN)
    for path in ("/ui", "/ui/jobs", f"/ui/jobs/{job_id}", f"/ui/jobs/{job_id}/confirm?action=replay",
                 "/ui/dead-letters", "/ui/health"):
        page.goto(f"{api.base}{path}")
        assert page.evaluate(UNLABELLED) == [], path
        assert page.locator("main h1").count() == 1, path
        assert page.locator("header nav[aria-label]").count() == 1, path
    page.goto(f"{api.base}/ui/jobs")
    # The first Tab reaches the skip link, which is visible when focused and leads to main.
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.textContent") == "Skip to content"
    assert page.evaluate("() => getComputedStyle(document.activeElement).outlineStyle") != "none"
    page.keyboard.press("Enter")
    assert page.evaluate("() => document.activeElement.id") == "main"
    # From there the filters come first, in order, and the form submits with Enter.
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.id") == "f-kind"
    page.keyboard.type("flaky")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*/ui/jobs\?kind=flaky.*"))
    assert page.locator("#jobs tbody tr").count() == 1
    # A replay by keyboard alone: focus the link, confirm with Enter.
    page.goto(f"{api.base}/ui/jobs/{job_id}")
    page.locator("#replay").focus()
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*/confirm\?action=replay$"))
    page.locator("#confirm").focus()
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(rf".*/ui/jobs/{job_id}\?done=\w+"))
    assert status_of(declared, job_id) == "queued"


# -- a large table ----------------------------------------------------------------------------
def seed(url: str, jobs: int) -> None:
    """``jobs`` finished jobs of four kinds (one in 500 failed), straight into the tables
    as superuser: one INSERT ... SELECT each for jobs and their events."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as c:
        c.execute("SET synchronous_commit = off")
        with c.transaction():
            c.execute("""
                INSERT INTO jobs.job (kind, queue, status, payload, result, error, created_at,
                                      updated_at, claimed_at, finished_at, owned_by, lease_version,
                                      retry_count, max_retries, lease_timeout, timeout, run_after,
                                      due_at, ordering_key)
                SELECT (ARRAY['noop','sleep','flaky','report'])[1 + n %% 4],
                       CASE WHEN n %% 4 = 3 THEN 'reports' ELSE 'default' END,
                       (CASE WHEN n %% 500 = 0 THEN 'failed' ELSE 'done' END)::jobs.status,
                       jsonb_build_object('n', n), '{"ok": true}', CASE WHEN n %% 500 = 0 THEN
                       'seeded failure ' || (n %% 3) END,
                       t, t, t, t + interval '1 second', 'w-seed', 1, 0, 3,
                       interval '30 s', interval '60 s', t, t, 'acct:' || (n %% 1000)
                  FROM generate_series(1, %(jobs)s) AS n,
                       LATERAL (SELECT now() - interval '2 days' + n * interval '100 ms') AS s(t)
            """, {"jobs": jobs})
            c.execute("""
                INSERT INTO jobs.event (job_id, at, from_status, to_status, lease_version, worker,
                                        reason, error)
                SELECT j.id, j.created_at + step.dt, step.f::jobs.status,
                       (CASE WHEN step.t = 'end' THEN j.status::text ELSE step.t END)::jobs.status,
                       step.lv, step.w, CASE WHEN step.t <> 'end' THEN step.r
                                             WHEN j.status = 'failed' THEN 'failed' ELSE 'completed' END,
                       CASE WHEN step.t = 'end' THEN j.error END
                  FROM jobs.job AS j
                 CROSS JOIN (VALUES (interval '0.5 s', 'queued', 'processing', 1, 'w-seed', 'claimed'),
                                    (interval '1 s', 'processing', 'end', 1, 'w-seed', NULL))
                       AS step(dt, f, t, lv, w, r)
            """)
        c.execute("ANALYZE jobs.job")
        c.execute("ANALYZE jobs.event")


def test_pages_render_with_a_million_jobs(api, declared, open_page, record_property):
    started = time.monotonic()
    seed(declared, 1_000_000)
    record_property("seed_seconds", round(time.monotonic() - started, 1))
    (total,) = sql_one(declared, "SELECT count(*) FROM jobs.job")
    assert total == 1_000_000
    newest, oldest_failed = sql_one(declared, "SELECT max(id), max(id) FILTER (WHERE status = "
                                              "'failed') FROM jobs.job")
    page = open_page()
    sign_in(page, api, ADMIN_TOKEN)
    deep = 1000
    timings = {}
    for name, path, check in (
            ("overview", "/ui", "#depth"),
            ("jobs", "/ui/jobs", "#jobs"),
            ("jobs-deep", f"/ui/jobs?after={deep}", "#jobs"),
            ("jobs-filtered", "/ui/jobs?kind=flaky&status=done&limit=100", "#jobs"),
            ("jobs-failed", "/ui/jobs?status=failed", "#jobs"),
            ("jobs-before", "/ui/jobs?before=" + (datetime.now(timezone.utc) - timedelta(days=1))
             .strftime("%Y-%m-%dT%H:%M:%S"), "#jobs"),
            ("job", f"/ui/jobs/{oldest_failed}", "#timeline"),
            ("dead-letters", "/ui/dead-letters", "#groups"),
            ("health", "/ui/health", "#checks")):
        began = time.monotonic()
        answer = page.goto(f"{api.base}{path}")
        timings[name] = round(time.monotonic() - began, 3)
        assert answer.status == 200, (name, answer.status)
        assert page.locator(check).count() == 1, name
        shoot(page, f"large-{name}")
    # Information only: how long each page took on this machine.
    record_property("page_seconds", timings)
    print("page render seconds with 1M jobs:", timings)

    shown = page.goto(f"{api.base}/ui/jobs?after={deep}")
    assert shown.status == 200
    ids = [int(x) for x in page.locator("#jobs tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.id)")]
    assert ids == list(range(deep - 1, deep - 51, -1))
    page.goto(f"{api.base}/ui/jobs?kind=flaky&status=done&limit=100")
    assert page.locator("#jobs tbody tr").count() == 100
    moment = datetime.now(timezone.utc) - timedelta(days=1)
    page.goto(f"{api.base}/ui/jobs?before=" + moment.strftime("%Y-%m-%dT%H:%M:%S"))
    (expected,) = sql_one(declared, "SELECT max(id) FROM jobs.job WHERE created_at < %s",
                          (moment.replace(microsecond=0),))
    assert int(page.locator("#jobs tbody tr").first.get_attribute("data-id")) == expected
    page.goto(f"{api.base}/ui/dead-letters")
    # 2000 failed jobs, three errors; the page groups the newest 1000.
    counts = sorted(int(x) for x in page.locator("#groups tbody tr td.num").all_inner_texts())
    assert sum(counts) == 1000 and len(counts) == 3
    # What the pages ask PostgreSQL reads a page's worth of the table, not the table: the
    # dashboard's own statements, with the parameters its pages pass, counted in buffers.
    from jobfence import sql

    (pages,) = sql_one(declared, "SELECT relpages FROM pg_class WHERE oid = 'jobs.job'::regclass")
    failed_ids = [i for (i,) in sql_all(declared, "SELECT id FROM jobs.job WHERE status = "
                                                  "'failed' ORDER BY id DESC LIMIT 1000")]
    listing = {"kind": None, "status": None, "before_id": None, "max_jobs": 50, "queue": None,
               "ordering_key": None}
    touched = {
        "newest page": blocks_read(declared, sql.LIST_JOBS, listing),
        "a page half-way down": blocks_read(declared, sql.LIST_JOBS,
                                            {**listing, "before_id": newest - 500_000}),
        "kind and status": blocks_read(declared, sql.LIST_JOBS, {
            **listing, "kind": "flaky", "status": "done", "max_jobs": 100}),
        "one step of submitted-before": blocks_read(declared, sql.LIST_JOBS, {
            **listing, "before_id": 123_457, "max_jobs": 1}),
        "failed jobs for dead letters": blocks_read(declared, sql.LIST_JOBS, {
            **listing, "status": "failed", "max_jobs": 1000}),
        "one ordering key": blocks_read(declared, sql.LIST_JOBS, {
            **listing, "ordering_key": "acct-none"}),
        "their dead-letter check": blocks_read(declared, sql.DEAD_LETTERS,
                                               {"job_ids": failed_ids}),
        "one job's timeline": blocks_read(declared, sql.EVENTS, {"job_id": oldest_failed}),
        "queue depth": blocks_read(declared, sql.QUEUE_DEPTH),
        "chart windows": blocks_read(declared, sql.METRIC_WINDOWS, {"minutes": 15}),
    }
    record_property("buffers", touched)
    print(f"buffers touched (jobs.job has {pages} pages):", touched)
    # The dead-letter page checks 1000 failed jobs and their last events: a bounded number
    # of pages per job, whatever the table holds. Every other statement reads some tens of
    # pages, where the table has ~30,000.
    per_page = {"failed jobs for dead letters": 3 * len(failed_ids),
                "their dead-letter check": 20 * len(failed_ids)}
    for name, count in touched.items():
        assert count < per_page.get(name, 200), (name, count, pages)
