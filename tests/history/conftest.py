"""The history tests run on SQLite and on PostgreSQL: the server's URL comes from
CONFORMANCE_TEST_POSTGRES_URL (.ci/run starts one); without it the PostgreSQL cases skip, except under
CI=true, where they fail: CI must run them."""

from __future__ import annotations

import os
import uuid

import pytest

POSTGRES = "CONFORMANCE_TEST_POSTGRES_URL"


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path):  # noqa: ANN001, ANN201
    """A fresh, empty history database: a SQLite file, or a new database on the test PostgreSQL server."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'history.sqlite'}"
        return
    server = os.environ.get(POSTGRES)
    if not server:
        why = f"{POSTGRES} is not set: no PostgreSQL server to test against (.ci/postgres starts one)"
        if os.environ.get("CI") == "true":
            pytest.fail(why + ", and CI=true must run these tests")
        pytest.skip(why)
    import sqlalchemy as sa

    name = f"history_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    yield server.rsplit("/", 1)[0] + f"/{name}"
    with admin.connect() as conn:
        conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    admin.dispose()
