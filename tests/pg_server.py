"""A throwaway PostgreSQL server on a loopback port, and the Dagster instance the Helm chart renders on it.

The server is pytest-postgresql's `PostgreSQLExecutor` (pg_ctl initdb/start/stop)
and its `DatabaseJanitor` (one fresh database per use). PostgreSQL refuses to run
as root, and CI runs as root: then every pg_ctl call goes through a wrapper that
runs it as an unprivileged user, in a directory that user owns.

Imported by the tests (`pg_server`) and by `benchmarks/dagster_backfill.py --storage postgres`.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import yaml

from catchup_assets.defs.location import INSTANCE_YAML

DAGSTER_VALUES = Path(__file__).resolve().parents[1] / "charts" / "dagster-values.yaml"
HOST = "127.0.0.1"
# The chart's instance reads the password from DAGSTER_PG_PASSWORD. The throwaway server trusts loopback
# logins instead: pytest-postgresql hands initdb the password in a root-only temporary file, which the
# unprivileged server user could not read.
PASSWORD = "unchecked"
USER = yaml.safe_load(DAGSTER_VALUES.read_text())["postgresql"]["postgresqlUsername"]


def find_pg_ctl() -> str | None:
    """pg_ctl on PATH, else Debian's versioned directory (the newest), else None."""
    found = shutil.which("pg_ctl")
    if found:
        return found
    debian = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(Path(p).parts[4]))
    return debian[-1] if debian else None


def missing_reason() -> str | None:
    """Why no server can be started here (for a one-line skip), or None."""
    if find_pg_ctl() is None:
        return "no PostgreSQL server binaries (pg_ctl on PATH or in /usr/lib/postgresql/*/bin)"
    if os.geteuid() == 0 and (shutil.which("runuser") is None or _unprivileged_user() is None):
        return "running as root without runuser or an unprivileged user (postgres, nobody) to run PostgreSQL as"
    return None


def _unprivileged_user() -> str | None:
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name).pw_name
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _as_user(pg_ctl: str, base: Path, user: str) -> str:
    """A pg_ctl that runs the real one as `user`, from a directory it can read (initdb checks its cwd)."""
    wrapper = base / "pg_ctl"
    wrapper.write_text(f'#!/bin/sh\ncd "{base}" && exec runuser -u {user} -- "{pg_ctl}" "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


@contextlib.contextmanager
def postgres_server() -> Iterator[dict]:
    """Start a server, yield how to reach it, stop it and remove its files."""
    from pytest_postgresql.executors import PostgreSQLExecutor

    reason = missing_reason()
    if reason:
        raise RuntimeError(reason)
    pg_ctl = find_pg_ctl()
    # Not under pytest's tmp_path: its parents are root-only, the server's user could not reach its data.
    base = Path(tempfile.mkdtemp(prefix="catchup-pg-"))
    try:
        if os.geteuid() == 0:
            user = _unprivileged_user()
            entry = pwd.getpwnam(user)
            os.chown(base, entry.pw_uid, entry.pw_gid)
            pg_ctl = _as_user(pg_ctl, base, user)
        port = _free_port()
        proc = PostgreSQLExecutor(
            executable=pg_ctl,
            host=HOST,
            port=port,
            datadir=str(base / "data"),
            unixsocketdir=str(base),
            logfile=str(base / "server.log"),
            startparams="-w",
            dbname="dagster",
            user=USER,
            # listen on loopback only; fsync stays on, as in production
            postgres_options=f"-c listen_addresses={HOST}",
        )
        proc.start()
        try:
            yield {"host": HOST, "port": port, "user": USER, "version": proc.version}
        finally:
            proc.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)


@contextlib.contextmanager
def fresh_database(server: dict, dbname: str) -> Iterator[str]:
    """An empty database on the server for the block, dropped after it."""
    from pytest_postgresql.janitor import DatabaseJanitor

    with DatabaseJanitor(user=server["user"], host=server["host"], port=server["port"], dbname=dbname):
        yield dbname


def chart_instance_config(server: dict, dbname: str) -> dict:
    """The instance the dagster chart renders from charts/dagster-values.yaml, pointed at this server.

    Storage as the chart's instance ConfigMap writes it when `postgresql.enabled`: dagster-postgres run,
    event log and schedule storage, each with the same `postgres_db` block (its username, database, params
    and scheme from the values; host and port of the server; the password from DAGSTER_PG_PASSWORD).
    The policy (queue, run limit, retries, monitoring) is the local instance's, which the chart's values
    repeat (tests/deploy/test_chart.py keeps the two equal).
    """
    pg = yaml.safe_load(DAGSTER_VALUES.read_text())["postgresql"]
    db = {
        "username": pg["postgresqlUsername"],
        "password": {"env": "DAGSTER_PG_PASSWORD"},
        "hostname": server["host"],
        "db_name": dbname,
        "port": server["port"],
        "params": pg.get("postgresqlParams", {}),
    }
    if pg.get("postgresqlScheme"):
        db["scheme"] = pg["postgresqlScheme"]
    storages = {
        "run_storage": ("dagster_postgres.run_storage", "PostgresRunStorage"),
        "event_log_storage": ("dagster_postgres.event_log", "PostgresEventLogStorage"),
        "schedule_storage": ("dagster_postgres.schedule_storage", "PostgresScheduleStorage"),
    }
    config = yaml.safe_load(INSTANCE_YAML)
    for key, (module, cls) in storages.items():
        config[key] = {"module": module, "class": cls, "config": {"postgres_db": dict(db)}}
    return config
