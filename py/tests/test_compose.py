"""docker-compose.yml stays honest: no container engine runs here, so nothing checks the
compose file by running it. These tests hold every command it runs to what the native suite
runs: each `jobfence ...` command parses with the CLI's own click definitions, the sqitch
deploy is the repository's plan against the database the services use, run by the schema
owner, every process logs in as its own role that scripts/roles.sql grants what the process
needs, the test profile runs scripts/test's pg_prove and pytest commands, and each health
check passes against the real process started with that service's command (and fails against
the wrong one). scripts/roles.sql itself runs against the real server: the owner deploys and
each process works with only its role."""

from __future__ import annotations

import copy
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import click
import pytest
import yaml

from conftest import REPO, _free_port, sqitch_target, wait_until

COMPOSE = REPO / "docker-compose.yml"
LONG_RUNNING = ("api", "relay", "reaper", "worker")


# -- reading the file ---------------------------------------------------------------------------
def _unescape(node):
    # Compose writes a literal $ as $$ (in the file and in `config` output alike).
    if isinstance(node, str):
        return node.replace("$$", "$")
    if isinstance(node, list):
        return [_unescape(n) for n in node]
    if isinstance(node, dict):
        return {k: _unescape(v) for k, v in node.items()}
    return node


def _interpolate(text: str) -> str:
    """The ${NAME:-default} subset of compose interpolation, for when docker-compose is absent."""
    def sub(m):
        name, default = m.group(1), m.group(3) or ""
        return os.environ.get(name) or default
    return re.sub(r"(?<!\$)\$\{(\w+)(:?-([^}]*))?\}", sub, text)


def load_config(path: Path = COMPOSE) -> dict:
    """`docker-compose config` (what compose itself makes of the file: anchors merged,
    variables filled in, paths resolved) when it is installed, else the file through PyYAML."""
    exe = shutil.which("docker-compose")
    if exe:
        done = subprocess.run([exe, "-f", str(path), "config"], cwd=REPO, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, f"docker-compose config failed:\n{done.stderr}"
        return _unescape(yaml.safe_load(done.stdout))
    return _unescape(yaml.safe_load(_interpolate(path.read_text())))


@pytest.fixture(scope="module")
def config() -> dict:
    return load_config()


def services(config) -> dict:
    return config["services"]


def argv(svc: dict) -> list[str]:
    """What the container runs: entrypoint then command, as compose joins them."""
    def words(v):
        if v is None:
            return []
        return shlex.split(v) if isinstance(v, str) else [str(x) for x in v]
    return words(svc.get("entrypoint")) + words(svc.get("command"))


def env(svc: dict) -> dict:
    e = svc.get("environment") or {}
    if isinstance(e, list):
        e = dict(item.split("=", 1) for item in e)
    return {k: "" if v is None else str(v) for k, v in e.items()}


def volume_sources(svc: dict) -> dict[str, str]:
    """container path -> host path of the bind mounts."""
    out = {}
    for v in svc.get("volumes") or []:
        if isinstance(v, dict):
            out[v["target"]] = v["source"]
        else:
            host, target = v.split(":")[:2]
            out[target] = host
    return out


# -- the checks, as functions so that a broken copy can be shown to fail them ----------------
def cli_problems(args: list[str]) -> list[str]:
    """Parse `jobfence ARGS` with the CLI's click objects without running anything: an
    unknown command or option, a missing required one, or a value the option's type refuses
    is a problem."""
    from jobfence.cli import main as cli

    assert args and args[0] == "jobfence", args
    ctx = click.Context(cli, info_name="jobfence")
    rest = list(args[1:])
    if not rest or rest[0].startswith("-"):
        return [f"{shlex.join(args)}: global options belong in the environment "
                "(JOBFENCE_DATABASE_URL, ...), the command word first"]
    sub = cli.get_command(ctx, rest[0])
    if sub is None:
        return [f"{shlex.join(args)}: `jobfence {rest[0]}` is not a command of the CLI"]
    try:
        sub.make_context(rest[0], rest[1:], parent=ctx)
    except click.ClickException as exc:
        return [f"{shlex.join(args)}: {exc.format_message()}"]
    return []


def option(args: list[str], name: str) -> str | None:
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def healthcheck_argv(svc: dict) -> list[str]:
    test = (svc.get("healthcheck") or {}).get("test") or []
    if isinstance(test, str):
        return shlex.split(test)
    if test and test[0] == "CMD":
        return list(test[1:])
    if test and test[0] == "CMD-SHELL":
        return shlex.split(test[1])
    return list(test)


def listening_port(args: list[str]) -> str | None:
    return option(args, "--metrics-port") or option(args, "--port")


def health_problems(name: str, svc: dict) -> list[str]:
    """The health check probes the port the command listens on, with a program the image
    has, for metric names the code exports."""
    check = healthcheck_argv(svc)
    if not check:
        return [f"{name}: no healthcheck"]
    if check[0] != "jobfence-healthcheck":
        return [f"{name}: healthcheck runs {check[0]!r}, not jobfence-healthcheck"]
    url = urlsplit(check[1])
    port = listening_port(argv(svc))
    problems = []
    if url.hostname not in ("127.0.0.1", "localhost"):
        problems.append(f"{name}: healthcheck probes {url.hostname}, not the container itself")
    if str(url.port) != port:
        problems.append(f"{name}: healthcheck probes port {url.port}, the command listens on {port}")
    source = "\n".join(p.read_text() for p in (REPO / "py" / "jobfence").rglob("*.py"))
    for flag in ("--has", "--equals", "--fresh"):
        value = option(check, flag)
        if value is not None:
            metric = value.split("=", 1)[0]
            if f'"{metric}"' not in source:
                problems.append(f"{name}: {metric} is not a metric py/jobfence exports")
    return problems


def normalized(line: str) -> list[str]:
    """A shell command's words with every word that expands a variable made one placeholder:
    compose and scripts/test name their databases differently, the commands must not differ."""
    return ["$ARG" if "$" in w else w for w in shlex.split(line)]


def script_lines(text: str) -> list[list[str]]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or re.match(r"^\w+=", line):
            continue
        out.append(normalized(line))
    return out


def native_block(title: str) -> list[list[str]]:
    """The commands of one `echo "== TITLE..."` block of scripts/test."""
    text = (REPO / "scripts" / "test").read_text()
    m = re.search(rf'^echo "== {re.escape(title)}.*?\n(.*?)(?=^echo "==|\Z)', text, re.M | re.S)
    assert m, f"scripts/test has no '== {title}' block"
    return [w for w in script_lines(m.group(1)) if w[0] != "echo"]


def is_subsequence(needles: list, haystack: list) -> bool:
    it = iter(haystack)
    return all(any(n == h for h in it) for n in needles)


# -- the file as a whole ------------------------------------------------------------------------
def test_compose_file_has_the_whole_stack(config):
    names = set(services(config))
    assert {"postgres", "redis", "roles", "sqitch", "declare", "api", "relay", "reaper",
            "worker", "demo", "pgtap", "pytest"} <= names
    assert "migrate" not in names, "the deploy service is called sqitch"
    assert services(config)["demo"].get("profiles") == ["demo"]
    for name in ("pgtap", "pytest"):
        assert services(config)[name].get("profiles") == ["test"], name


def test_every_jobfence_command_parses_with_the_cli(config):
    problems, seen = [], 0
    for name, svc in services(config).items():
        args = argv(svc)
        if args and args[0] == "jobfence":
            seen += 1
            problems += cli_problems(args)
        # A `jobfence` hidden inside a shell script would escape this check.
        assert not any(re.search(r"(^|[;&|(]|\bexec)\s*jobfence\s", a, re.M)
                       for a in args[1:] if args[0] in ("bash", "sh")), name
    assert seen >= 5
    assert not problems, "\n".join(problems)


def test_a_misspelt_option_or_unknown_command_is_caught():
    good = ["jobfence", "worker", "--app", "jobfence.examples:app", "--concurrency", "8"]
    assert cli_problems(good) == []
    assert cli_problems(good[:-2] + ["--concurency", "8"])
    assert cli_problems(["jobfence", "worker", "--concurrency", "8"]), "--app is required"
    assert cli_problems(good[:-1] + ["0"]), "--concurrency is at least 1"
    assert cli_problems(["jobfence", "reapr", "--interval", "5"])


def test_long_running_services_are_health_checked_and_restarted(config):
    svcs = services(config)
    problems = []
    for name in LONG_RUNNING:
        problems += health_problems(name, svcs[name])
        assert svcs[name].get("restart") == "unless-stopped", name
    for name in ("postgres", "redis"):
        assert healthcheck_argv(svcs[name]), name
        assert svcs[name].get("restart") == "unless-stopped", name
    assert "pg_isready" in healthcheck_argv(svcs["postgres"])
    assert healthcheck_argv(svcs["redis"])[:2] == ["redis-cli", "ping"]
    for name in ("roles", "sqitch", "declare", "demo", "pgtap", "pytest"):
        assert svcs[name].get("restart") == "no", f"{name} is a one-shot"
    assert not problems, "\n".join(problems)


def test_a_wrong_healthcheck_port_or_metric_is_caught(config):
    svc = copy.deepcopy(services(config)["reaper"])
    i = svc["command"].index("--metrics-port")
    svc["command"][i + 1] = "9101"
    assert any("port" in p for p in health_problems("reaper", svc))
    svc = copy.deepcopy(services(config)["relay"])
    svc["healthcheck"]["test"] = [w.replace("jobfence_relay_listening", "jobfence_relay_up")
                                  for w in svc["healthcheck"]["test"]]
    assert any("jobfence_relay_up" in p for p in health_problems("relay", svc))


def test_workers_scale(config):
    worker = services(config)["worker"]
    assert "container_name" not in worker, "a fixed name allows one container"
    assert not worker.get("ports"), "a published port allows one container per host port"


def test_services_wait_for_the_deploy(config):
    svcs = services(config)
    assert svcs["roles"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert svcs["sqitch"]["depends_on"]["roles"]["condition"] == "service_completed_successfully"
    assert svcs["worker"]["depends_on"]["declare"]["condition"] == "service_completed_successfully"
    for name in (*LONG_RUNNING, "declare", "demo", "pgtap", "pytest"):
        deps = svcs[name].get("depends_on") or {}
        assert deps.get("sqitch", {}).get("condition") == "service_completed_successfully", name
    for name in (*LONG_RUNNING, "demo", "pytest"):
        assert svcs[name]["depends_on"].get("redis", {}).get("condition") == "service_healthy", name


# Who each service logs in as, and the group role the functions it calls are granted to
# (db/deploy/*.sql; docs/security.md). Never the owner, never the DBA.
LOGINS = {"api": ("jobfence_api", "jobs_producer"), "relay": ("jobfence_relay", "jobs_admin"),
          "reaper": ("jobfence_reaper", "jobs_admin"), "worker": ("jobfence_worker", "jobs_worker"),
          "declare": ("jobfence_admin", "jobs_admin"), "demo": ("jobfence_admin", "jobs_admin")}
ROLES_SQL = REPO / "scripts" / "roles.sql"


def _app_database_url(config) -> str:
    """host, port and database of the services, without the user (each has its own)."""
    urls = {urlsplit(env(services(config)[n])["JOBFENCE_DATABASE_URL"])._replace(
        netloc=urlsplit(env(services(config)[n])["JOBFENCE_DATABASE_URL"]).netloc.split("@")[-1]
    ).geturl() for n in LOGINS}
    assert len(urls) == 1, f"the services disagree on the database: {urls}"
    return urls.pop()


def granted_in_roles_sql(text: str | None = None) -> set[tuple[str, str]]:
    """(group, login) pairs scripts/roles.sql grants."""
    text = ROLES_SQL.read_text() if text is None else text
    block = re.search(r"SELECT format\('GRANT %I TO %I', g, l\)\s+FROM \(VALUES (.*?)\) AS v",
                      text, re.S)
    assert block, "scripts/roles.sql has no GRANT ... VALUES block"
    return set(re.findall(r"\('(\w+)',\s*'(\w+)'\)", block.group(1)))


def login_problems(config) -> list[str]:
    svcs, problems = services(config), []
    dba = env(svcs["postgres"])["POSTGRES_USER"]
    grants = granted_in_roles_sql()
    roles_env = env(svcs["roles"])
    roles_cmd = argv(svcs["roles"])[-1]
    for name, (login, group) in LOGINS.items():
        e = env(svcs[name])
        url = urlsplit(e.get("JOBFENCE_DATABASE_URL", ""))
        if url.username != login:
            problems.append(f"{name} logs in as {url.username}, not {login}")
        if url.username in (dba, "jobs_owner"):
            problems.append(f"{name} logs in as {url.username}: the DBA or the owner")
        if url.password:
            problems.append(f"{name}: a password inside the URL (docker inspect, logs)")
        if (group, login) not in grants:
            problems.append(f"{name}: scripts/roles.sql does not grant {group} to {login}")
        # The password the process presents is the one the roles service sets.
        m = re.search(rf'-v password_{login}="\$\{{?(\w+)\}}?"', roles_cmd)
        if not m:
            problems.append(f"{name}: the roles service sets no password for {login}")
        elif roles_env.get(m.group(1)) != e.get("PGPASSWORD"):
            problems.append(f"{name}: PGPASSWORD is not the password roles sets for {login}")
    return problems


def test_each_process_logs_in_as_its_own_role(config):
    assert not login_problems(config), "\n".join(login_problems(config))
    users = [urlsplit(env(services(config)[n])["JOBFENCE_DATABASE_URL"]).username
             for n in LONG_RUNNING]
    assert len(set(users)) == len(users), f"long-running services share a role: {users}"
    assert "JOBFENCE_DATABASE_URL" not in services(config)["pytest"].get("environment", {})


def test_the_api_serves_admin_requests_as_its_own_admin_login(config):
    """docs/http.md, "Database logins": admin-scoped requests and the dashboard run as
    jobfence_api_admin (jobs_admin), its password beside the URL, never inside it."""
    e = env(services(config)["api"])
    url = urlsplit(e.get("JOBFENCE_API_ADMIN_DATABASE_URL", ""))
    assert url.username == "jobfence_api_admin" and not url.password, url
    assert ("jobs_admin", "jobfence_api_admin") in granted_in_roles_sql()
    m = re.search(r'-v password_jobfence_api_admin="\$\{?(\w+)\}?"', argv(services(config)["roles"])[-1])
    assert m, "the roles service sets no password for jobfence_api_admin"
    assert env(services(config)["roles"]).get(m.group(1)) == e.get("JOBFENCE_API_ADMIN_DATABASE_PASSWORD")
    for name in LONG_RUNNING:
        if name != "api":
            assert "JOBFENCE_API_ADMIN_DATABASE_URL" not in env(services(config)[name]), name


def test_a_process_logging_in_as_the_owner_is_caught(config):
    broken = copy.deepcopy(config)
    services(broken)["relay"]["environment"]["JOBFENCE_DATABASE_URL"] = (
        "postgresql://jobs_owner:pw@postgres:5432/jobfence")
    found = login_problems(broken)
    assert any("the DBA or the owner" in p for p in found)
    assert any("password inside the URL" in p for p in found)
    broken = copy.deepcopy(config)
    services(broken)["worker"]["environment"]["PGPASSWORD"] = "something-else"
    assert any("PGPASSWORD" in p for p in login_problems(broken))


def test_sqitch_deploys_the_repositorys_plan_to_the_services_database(config):
    svc = services(config)["sqitch"]
    args = argv(svc)
    assert args[:3] == ["sqitch", "deploy", "--verify"], args
    # The target is the services' database, spelt as sqitch spells it (conftest's rule),
    # deployed by the owner: the DBA created it, no process runs as either.
    app = urlsplit(_app_database_url(config))
    assert args[3:] == [sqitch_target(app._replace(netloc="jobs_owner@" + app.netloc).geturl())]
    # sqitch reads sqitch.conf and sqitch.plan from its working directory: the repository.
    mounts = volume_sources(svc)
    workdir = svc["working_dir"]
    assert workdir in mounts, "sqitch runs in a directory that is not the mounted repository"
    assert Path(REPO, mounts[workdir]).resolve() == REPO.resolve()
    conf = (REPO / "sqitch.conf").read_text()
    assert re.search(r"plan_file\s*=\s*sqitch.plan", conf) and (REPO / "sqitch.plan").is_file()
    assert re.search(r"top_dir\s*=\s*db", conf) and (REPO / "db" / "deploy").is_dir()
    roles = services(config)["roles"]
    assert env(svc)["PGPASSWORD"] == env(roles)["OWNER_PASSWORD"]
    assert "-f scripts/roles.sql" in argv(roles)[-1]
    assert f"-v db={app.path.lstrip('/')}" in argv(roles)[-1]
    assert Path(REPO, volume_sources(roles)[roles["working_dir"]]).resolve() == REPO.resolve()
    pg = env(services(config)["postgres"])
    assert env(roles)["PGPASSWORD"] == pg["POSTGRES_PASSWORD"]
    assert f"postgresql://{pg['POSTGRES_USER']}@postgres:5432/" in argv(roles)[-1]
    assert app.hostname == "postgres"


def test_pgtap_service_runs_scripts_test_commands(config):
    svc = services(config)["pgtap"]
    args = argv(svc)
    assert args[:2] == ["bash", "-euo"] and args[-2] == "-c", args
    compose_lines = script_lines(args[-1])
    native = native_block("pgTAP")
    assert any(w[0] == "pg_prove" for w in native)
    assert is_subsequence(native, compose_lines), (
        "the pgtap service does not run scripts/test's pgTAP commands in order:\n"
        f"scripts/test: {native}\ncompose:      {compose_lines}")
    assert "postgresql://postgres@postgres:5432" in args[-1]
    assert env(svc)["PGPASSWORD"] == env(services(config)["postgres"])["POSTGRES_PASSWORD"]
    assert Path(REPO, volume_sources(svc)[svc["working_dir"]]).resolve() == REPO.resolve()


def test_a_pgtap_service_that_drifts_is_caught():
    native = native_block("pgTAP")
    drifted = [w if w[0] != "pg_prove" else [x for x in w if x != "--failures"] for w in native]
    assert not is_subsequence(native, drifted)
    assert not is_subsequence(native, native[:-1])


def test_pytest_service_runs_scripts_test_pytest_against_compose_servers(config):
    svc = services(config)["pytest"]
    native = [w for w in native_block("pytest") if Path(w[0]).name == "python"]
    # scripts/test runs two sessions: the parallel tests, then the serial ones. Compose runs
    # one session of them all, one after another: its sessions share one Redis database
    # (JOBFENCE_TEST_REDIS_URL), which parallel sessions would flush under each other. Apart
    # from that split (-n, --dist, -m), the pytest command is the same.
    assert len(native) == 2, native
    compose = argv(svc)
    for line in native:
        words = line[:line.index("||")] if "||" in line else line
        interpreter, *rest = words
        assert rest[-1] == "$ARG"  # "$@": the extra arguments, which compose passes after the name
        assert Path(compose[0]).name == Path(interpreter).name == "python"
        assert rest[:2] == compose[1:3] == ["-m", "pytest"], (compose, line)
        flags, split = rest[2:-1], ("-n", "--dist", "-m")
        common = [w for i, w in enumerate(flags)
                  if w not in split and (i == 0 or flags[i - 1] not in split)]
        assert compose[3:] == common, f"compose runs {compose}, scripts/test {line}"
    e = env(svc)
    conftest = (REPO / "py" / "tests" / "conftest.py").read_text()
    for var in ("JOBFENCE_TEST_ADMIN_URL", "JOBFENCE_TEST_REDIS_URL"):
        assert f'"{var}"' in conftest, f"conftest.py no longer reads {var}"
        assert var in e, f"without {var} the tests look for servers on the container's 127.0.0.1"
    assert urlsplit(e["JOBFENCE_TEST_ADMIN_URL"]).hostname == "postgres"
    assert urlsplit(e["JOBFENCE_TEST_REDIS_URL"]).hostname == "redis"
    assert e["JOBFENCE_TEST_REDIS_URL"] != env(services(config)["worker"])["JOBFENCE_REDIS_URL"], (
        "the tests flush their Redis database: it must not be the service's")
    # The test image installs the package as scripts/setup does.
    setup = (REPO / "scripts" / "setup").read_text()
    found = (re.search(r'pip install -q -e ("\.\[[\w,]+\]")', setup)
             or re.search(r'target=("\.\[[\w,]+\]")', setup))
    assert found, "scripts/setup installs no .[EXTRA] of the package"
    spec = found.group(1)
    assert f"-e {spec}" in (REPO / "docker" / "Dockerfile").read_text()
    assert svc["build"]["target"] == "test"


def test_images_build_from_files_in_the_repository(config):
    for name, svc in services(config).items():
        build = svc.get("build")
        if build:
            assert (Path(REPO, build["context"]) / build["dockerfile"]).is_file(), name
    dockerfile = (REPO / "docker" / "Dockerfile").read_text()
    assert "COPY docker/healthcheck.py /usr/local/bin/jobfence-healthcheck" in dockerfile


# -- the health checks against the real processes ------------------------------------------------
def _healthcheck_module():
    spec = importlib.util.spec_from_file_location("jobfence_healthcheck",
                                                  REPO / "docker" / "healthcheck.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _local(args: list[str], port: int) -> list[str]:
    """The service's command on this machine: a free port, the loopback interface."""
    out = list(args)
    for flag in ("--metrics-port", "--port"):
        if flag in out:
            out[out.index(flag) + 1] = str(port)
    for flag in ("--metrics-host", "--host"):
        if flag in out:
            out[out.index(flag) + 1] = "127.0.0.1"
    return out


@pytest.mark.parametrize("name", LONG_RUNNING)
def test_healthcheck_passes_against_the_service_command(name, config, procs, declared):
    # declared: the kinds and the example's effect table exist, as the compose stack's
    # declare service leaves them (its worker runs --no-declare).
    from jobfence.cli import main as cli

    svcs = services(config)
    svc = svcs[name]
    args = argv(svc)
    if cli.get_command(click.Context(cli), args[1]) is None:
        pytest.fail(f"`jobfence {args[1]}` is not a command of the CLI")
    port = _free_port()
    # The service's settings but its database logins: this server is the test's.
    extra = {k: v for k, v in env(svc).items()
             if k.startswith("JOBFENCE_API_") and not k.startswith("JOBFENCE_API_ADMIN_DATABASE")}
    proc = procs.start(name, *_local(args, port)[1:], env=extra)
    check = healthcheck_argv(svc)
    url = urlsplit(check[1])._replace(netloc=f"127.0.0.1:{port}").geturl()
    hc = _healthcheck_module()
    last = {"problem": "not probed yet"}

    def healthy():
        assert proc.alive(), f"{name} exited:\n{proc.tail()}"
        last["problem"] = hc.check([url, *check[2:]])
        return last["problem"] is None

    try:
        wait_until(healthy, timeout=30, what=f"{name}'s healthcheck to pass")
    except pytest.fail.Exception:
        pytest.fail(f"{name}: {last['problem']}\n{proc.tail()}")
    # Each role's condition reads what only that role exports: another's page fails it.
    for other in ("relay", "reaper", "worker"):
        if other != name:
            assert hc.check([url, *healthcheck_argv(svcs[other])[2:]]) is not None, (
                f"{other}'s healthcheck passes against {name}: it checks nothing of {other}'s")


def test_the_worker_healthcheck_fails_while_its_claim_loop_is_stuck(config, procs, declared,
                                                                   redis_url):
    """A worker whose claim waits on a lock still serves its metrics page: the health check
    reads the loop's last round, so it fails then, and passes again once the loop moves."""
    import urllib.request

    import psycopg
    import redis

    from jobfence.transport import ready_key

    svc = services(config)["worker"]
    port = _free_port()
    proc = procs.start("worker", *_local(argv(svc), port)[1:])
    check = healthcheck_argv(svc)
    url = urlsplit(check[1])._replace(netloc=f"127.0.0.1:{port}").geturl()
    metric = option(check, "--fresh").split("=", 1)[0]
    strict = [url, "--fresh", f"{metric}=3"]  # the service's check, with a test's patience
    hc = _healthcheck_module()
    wait_until(lambda: hc.check(strict) is None, timeout=30, what="the worker's loop to go round")
    with psycopg.connect(declared) as locker:
        locker.execute("LOCK TABLE jobs.job IN ACCESS EXCLUSIVE MODE")
        # A signal to claim: the claim now waits for the lock, and the loop with it.
        redis.Redis.from_url(redis_url).lpush(ready_key("default"), "1")
        wait_until(lambda: (hc.check(strict) or "").startswith(f"{metric}:"), timeout=30,
                   what="the health check to see the loop stuck")
        with urllib.request.urlopen(url, timeout=5) as page:
            assert page.status == 200  # the page alone would have said healthy
        assert proc.alive()
        locker.rollback()
    wait_until(lambda: hc.check(strict) is None, timeout=30, what="the loop to go round again")


def test_the_api_service_answers_by_its_service_name_and_refuses_other_hosts(config, procs):
    """Other containers reach the API as http://api:8000: its Host allow-list must hold the
    service name, and its default token must be one `jobfence api` accepts (16+ characters)."""
    from api_helpers import Api

    svc = services(config)["api"]
    port = _free_port()
    # The service's settings but its database logins: this server is the test's.
    extra = {k: v for k, v in env(svc).items()
             if k.startswith("JOBFENCE_API_") and not k.startswith("JOBFENCE_API_ADMIN_DATABASE")}
    proc = procs.start("api", *_local(argv(svc), port)[1:], env=extra)
    proc.wait_for("api_listening")
    token = extra["JOBFENCE_API_TOKENS"].split(",")[0].rsplit(":", 1)[0]
    api = Api(proc, port, token)
    assert api.get("/queues", headers={"Host": "api:8000"}).status == 200
    assert api.get("/queues", headers={"Host": f"127.0.0.1:{port}"}).status == 200
    assert api.get("/queues", headers={"Host": "evil.example"}).status == 421


# -- the roles file against the real server ----------------------------------------------------
def test_the_roles_file_lets_the_owner_deploy_and_each_process_run_with_its_role(procs, tmp_path):
    """What the roles service and scripts/run do, on this server: scripts/roles.sql as the
    superuser, sqitch deploy as jobs_owner, then relay, reaper and worker each as its own
    login role, and a producer's submit runs to done. The roles are cluster-wide and stay
    (the file is idempotent, as scripts/run relies on); the database is dropped."""
    import uuid

    import psycopg

    from conftest import ADMIN_URL
    from role_helpers import login_role, url_as

    name = f"jobfence_roles_{uuid.uuid4().hex[:8]}"
    started = []
    try:
        done = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-v", f"db={name}",
                               "-v", "example_app=1", "-f", str(ROLES_SQL), ADMIN_URL],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        dba_url = ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
        as_ = {role: url_as(dba_url, role) for role in (
            "jobs_owner", "jobfence_worker", "jobfence_reaper", "jobfence_relay",
            "jobfence_api", "jobfence_admin")}
        deployed = subprocess.run(["sqitch", "--quiet", "deploy", "--verify",
                                   sqitch_target(as_["jobs_owner"])], cwd=REPO,
                                  capture_output=True, text=True, timeout=300)
        assert deployed.returncode == 0, deployed.stdout + deployed.stderr
        with psycopg.connect(dba_url, autocommit=True) as dba:
            assert dba.execute("SELECT rolsuper OR rolcreaterole FROM pg_roles "
                               "WHERE rolname = 'jobs_owner'").fetchone()[0] is False
            owners = {r[0] for r in dba.execute(
                "SELECT DISTINCT proowner::regrole::text FROM pg_proc "
                "WHERE pronamespace = 'jobs'::regnamespace")}
            assert owners == {"jobs_owner"}
        # CONNECT is the jobfence roles' only: a role with no grant is refused at the door.
        with login_role(ADMIN_URL) as nobody:
            with pytest.raises(psycopg.OperationalError, match="permission denied"):
                psycopg.connect(url_as(dba_url, nobody), connect_timeout=5).close()

        declared = subprocess.run(
            [sys.executable, "-m", "jobfence", "worker", "--app", "jobfence.examples:app",
             "--declare-only"], env=dict(procs.env, JOBFENCE_DATABASE_URL=as_["jobfence_admin"]),
            capture_output=True, text=True, timeout=60, cwd=REPO)
        assert declared.returncode == 0, declared.stderr
        for role, args, ready in (
                ("relay", ["relay", "--poll-interval", "0.5"], "relay_listening"),
                ("reaper", ["reaper", "--interval", "0.5"], "reaper_ready"),
                ("worker", ["worker", "--app", "jobfence.examples:app", "--no-declare",
                            "--pop-timeout", "0.2"], "worker_ready")):
            p = procs.start(role, *args, env={"JOBFENCE_DATABASE_URL": as_[f"jobfence_{role}"]})
            started.append(p)
            p.wait_for(ready, timeout=30)
        with psycopg.connect(as_["jobfence_api"], autocommit=True) as api:
            job = api.execute("SELECT id FROM jobs.submit('transfer', '{\"amount\": 5}')"
                              ).fetchone()[0]
            status = lambda: api.execute("SELECT status::text, error FROM jobs.get(%s)",  # noqa: E731
                                         (job,)).fetchone()
            wait_until(lambda: status()[0] == "done", 30,
                       what=f"job {job} done ({status()})\n" + "\n".join(p.tail() for p in started))
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                api.execute("SELECT * FROM jobs.claim(%s, 'x')", (job,))
        with psycopg.connect(as_["jobfence_worker"], autocommit=True) as worker:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                worker.execute("SELECT * FROM jobs.submit('noop', '{}')")
        with psycopg.connect(dba_url, autocommit=True) as dba:
            logins = {r[0] for r in dba.execute(
                "SELECT DISTINCT usename FROM pg_stat_activity WHERE datname = %s "
                "AND application_name LIKE 'jobfence-%%'", (name,))}
            assert logins == {"jobfence_relay", "jobfence_reaper", "jobfence_worker"}
    finally:
        for p in started:
            p.kill()
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
