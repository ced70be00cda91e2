#!/usr/bin/env bash
# Set up, then run every check and test: ruff, the migration check, the OpenAPI schema check,
# the suite on SQLite, and the suite again on PostgreSQL (with the PostgreSQL-only concurrency
# tests) when one answers at $TEST_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/handover).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
PY=.venv/bin/python
export HANDOVER_VAR_DIR=${HANDOVER_VAR_DIR:-$(mktemp -d)}
unset DATABASE_URL
echo "== ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "== mypy (per-module baseline)"
$PY scripts/mypy_ratchet.py
echo "== migrations match the models"
$PY manage.py makemigrations --check --dry-run
echo "== OpenAPI schema (validated, warnings fail)"
$PY manage.py spectacular --validate --fail-on-warn --file "$HANDOVER_VAR_DIR/schema.yaml"
echo "== tests on SQLite"
$PY -m pytest -q -m "not slow" tests
PG_URL=${TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/handover}
if $PY - "$PG_URL" <<'PYCHECK'
import sys, psycopg
try:
    psycopg.connect(sys.argv[1].rsplit("/", 1)[0] + "/postgres", connect_timeout=3).close()
except Exception as exc:
    print(f"PostgreSQL not reachable ({exc.__class__.__name__}); skipping the PostgreSQL run")
    sys.exit(1)
PYCHECK
then
  echo "== tests on PostgreSQL (including slow suites)"
  DATABASE_URL=$PG_URL $PY -m pytest -q --create-db tests
elif [ "${CI:-}" = "true" ]; then
  echo "PostgreSQL is required in CI"; exit 1
fi
