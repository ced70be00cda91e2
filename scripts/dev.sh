#!/usr/bin/env bash
# Set up, migrate, load the demo through the real ingestion API, then serve the app on
# http://127.0.0.1:${PORT:-8000}/ with a Celery worker and beat on the embedded default
# (SQLite + kombu's filesystem broker in var/). Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
PY=.venv/bin/python
$PY manage.py migrate --noinput
$PY manage.py load_demo
$PY manage.py collectstatic --noinput --verbosity 0
mkdir -p var
.venv/bin/celery -A handover worker --beat --concurrency 1 --loglevel INFO \
  --schedule var/celerybeat-schedule >var/celery.log 2>&1 &
CELERY_PID=$!
trap 'kill $CELERY_PID 2>/dev/null || true' EXIT INT TERM
echo
echo "Handover is at http://127.0.0.1:${PORT:-8000}/  (worker + beat log: var/celery.log)"
echo "Log in with a demo user printed above; the passwords are shown only when the users are created"
echo "(forgot them? .venv/bin/python manage.py load_demo --reset-passwords prints new ones). Mail is printed in this log."
$PY manage.py runserver "127.0.0.1:${PORT:-8000}"
