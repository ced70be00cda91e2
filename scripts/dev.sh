#!/usr/bin/env bash
# Set up, migrate, load the demo through the real ingestion API, then serve the app on
# http://127.0.0.1:${PORT:-8000}/ with a Celery worker and beat on the embedded default
# (SQLite + kombu's filesystem broker in var/). Quiet: the setup's output goes to var/setup.log;
# what is left on screen is where the app is, one line about the demo and the demo users' passwords
# (shown once, when the users are created). Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."
VAR=${HANDOVER_VAR_DIR:-var}
mkdir -p "$VAR"
LOG="$VAR/setup.log"
PY=.venv/bin/python
echo "Setting up Handover (details in $LOG)…"
if ! { scripts/setup.sh && $PY manage.py migrate --noinput && $PY manage.py collectstatic --noinput --verbosity 0; } >"$LOG" 2>&1; then
  tail -n 40 "$LOG"
  echo "Setup failed: the whole output is in $LOG" >&2
  exit 1
fi
# the demo's details go to the log; its summary and the users' passwords (never logged) to the screen
if ! DEMO=$($PY manage.py load_demo --verbosity 1 2>>"$LOG"); then
  echo "Loading the demo failed: see $LOG" >&2
  exit 1
fi
.venv/bin/celery -A handover worker --beat --concurrency 1 --loglevel INFO \
  --schedule "$VAR/celerybeat-schedule" >"$VAR/celery.log" 2>&1 &
CELERY_PID=$!
trap 'kill $CELERY_PID 2>/dev/null || true' EXIT INT TERM
echo
echo "Handover is at http://127.0.0.1:${PORT:-8000}/  (worker + beat log: $VAR/celery.log; mail is printed by the console backend there and below)"
echo "Forgot the passwords? .venv/bin/python manage.py load_demo --reset-passwords prints new ones."
echo "$DEMO"
echo
$PY manage.py runserver "127.0.0.1:${PORT:-8000}"
