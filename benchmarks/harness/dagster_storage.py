"""The Dagster instance storage a benchmark runs on: the embedded default's SQLite, or the chart's Postgres.

`--storage postgres` starts a throwaway PostgreSQL server (tests/pg_server.py: the
chart's instance config, one fresh database) unless `--postgres-url` names an
existing, empty database (`postgresql+psycopg2://...`: the bare scheme selects
psycopg 3 under SQLAlchemy 2.1, see docs/design.md).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from catchup_assets.defs.location import INSTANCE_YAML


@dataclass
class Storage:
    overrides: dict  # the instance config (dagster.yaml) the benchmark runs on
    env: dict[str, str]  # what the instance's processes need in their environment
    size_bytes: Callable[[], int]  # the storage's size now, to measure its growth over the run
    size_label: str
    what: str  # a sentence for the result file


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def _database_bytes(url: str) -> Callable[[], int]:
    import sqlalchemy

    def size() -> int:
        engine = sqlalchemy.create_engine(url)
        try:
            with engine.connect() as c:
                return int(c.execute(sqlalchemy.text("SELECT pg_database_size(current_database())")).scalar())
        finally:
            engine.dispose()

    return size


@contextlib.contextmanager
def instance_storage(kind: str, home: Path, postgres_url: str | None = None) -> Iterator[Storage]:
    if kind == "sqlite":
        yield Storage(
            yaml.safe_load(INSTANCE_YAML),
            {},
            lambda: dir_bytes(home / "history"),
            "SQLite growth (history/: runs.db, run shard, index.db), bytes",
            "The instance is the embedded default's (SQLite under DAGSTER_HOME).",
        )
        return
    if postgres_url:
        config = yaml.safe_load(INSTANCE_YAML)
        for key, module, cls in STORAGES:
            config[key] = {"module": module, "class": cls, "config": {"postgres_url": postgres_url}}
        yield Storage(
            config,
            {},
            _database_bytes(postgres_url),
            "Postgres database growth (pg_database_size), bytes",
            "The instance's run, event log and schedule storage are dagster-postgres on the given server "
            "(`--postgres-url`), the rest as the chart's instance.",
        )
        return
    # The throwaway server and the chart's instance config live with the tests that use them too.
    from tests.pg_server import PASSWORD, chart_instance_config, fresh_database, postgres_server

    with postgres_server() as server, fresh_database(server, f"bench_{uuid.uuid4().hex[:12]}") as db:
        config = chart_instance_config(server, db)
        pg = config["run_storage"]["config"]["postgres_db"]
        url = f"{pg.get('scheme', 'postgresql')}://{pg['username']}@{server['host']}:{server['port']}/{db}"
        yield Storage(
            config,
            {"DAGSTER_PG_PASSWORD": PASSWORD},
            _database_bytes(url),
            "Postgres database growth (pg_database_size), bytes",
            f"The instance is the Helm chart's: dagster-postgres run, event log and schedule storage, on a "
            f"throwaway local PostgreSQL {server['version']} server (loopback TCP, fsync on, default settings) "
            "started by the benchmark.",
        )


STORAGES = [
    ("run_storage", "dagster_postgres.run_storage", "PostgresRunStorage"),
    ("event_log_storage", "dagster_postgres.event_log", "PostgresEventLogStorage"),
    ("schedule_storage", "dagster_postgres.schedule_storage", "PostgresScheduleStorage"),
]
