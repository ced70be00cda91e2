"""Settings for Handover: one module; production differs only through environment variables.

With no environment variables set this is a local development configuration: DEBUG on, a generated
development secret kept in ``var/``, SQLite in ``var/handover.sqlite3`` and kombu's filesystem broker
in ``var/broker/`` (docs/production.md, "Toolchain facts"). ``HANDOVER_PRODUCTION=true`` turns DEBUG
off and refuses to start without a real secret key and explicit allowed hosts. ``.env.example`` lists every variable.
"""

from __future__ import annotations

import secrets
from datetime import timedelta
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from handover.env import BASE_DIR, env

PRODUCTION = env.bool("HANDOVER_PRODUCTION", default=False)
DEBUG = env.bool("DJANGO_DEBUG", default=not PRODUCTION)
VAR_DIR = Path(env.str("HANDOVER_VAR_DIR", default=str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def _development_secret_key() -> str:
    """Generate once and keep in var/ so web, worker and beat share sessions and signatures."""
    path = VAR_DIR / "dev-secret-key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
    return path.read_text().strip()


SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="")
if not SECRET_KEY:
    if PRODUCTION:
        raise ImproperlyConfigured("DJANGO_SECRET_KEY (or DJANGO_SECRET_KEY_FILE) must be set in production.")
    SECRET_KEY = _development_secret_key()
if PRODUCTION and (len(SECRET_KEY) < 40 or DEBUG):
    raise ImproperlyConfigured("Production needs DEBUG off and a secret key of at least 40 characters.")

ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=[] if PRODUCTION else ["localhost", "127.0.0.1", "[::1]"])
if PRODUCTION and not ALLOWED_HOSTS:
    raise ImproperlyConfigured("DJANGO_ALLOWED_HOSTS must list the host names in production.")
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "knox",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "guardian",
    "django_htmx",
    "csp",
    "axes",
    "handover",
    "runs",
    "approvals",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # The middlewares of people's requests are wrapped (``handover.core.middleware``, same order): an
    # integration post (alert ingestion, the job runner's replay views) skips them -- no session,
    # user or messages work (its views are CSRF-exempt); the security headers above and below still apply.
    "handover.core.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    # inside CommonMiddleware: its APPEND_SLASH redirect stays; an unknown API path answers problem details
    "handover.core.middleware.ApiNotFoundMiddleware",
    # Django's own, by name: `check --deploy` looks for it so; integration views are exempt already
    "django.middleware.csrf.CsrfViewMiddleware",
    "handover.core.middleware.AuthenticationMiddleware",
    "handover.core.middleware.AuditActorMiddleware",
    "handover.core.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "handover.core.middleware.HtmxMiddleware",
    "handover.core.middleware.ViewerTimeZoneMiddleware",
    # last, as django-axes asks: it turns a locked-out login into its lockout response
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "handover.urls"
WSGI_APPLICATION = "handover.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                # the unread count in the navigation (one indexed COUNT per page for a signed-in person)
                "handover.notifications.context_processors.navigation_counts",
                "runs.audit.context_processors.audit_link",
            ],
        },
    }
]

# --- database ---------------------------------------------------------------------------------
DATABASES = {"default": env.db_url("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'handover.sqlite3'}")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets readers run beside the one writer; IMMEDIATE takes the write lock at BEGIN so two
    # writers never deadlock on a lock upgrade; the busy timeout makes them wait instead of failing.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"transaction_mode": "IMMEDIATE", "timeout": 20, "init_command": "PRAGMA journal_mode=WAL"}
    )
else:
    # A new PostgreSQL connection per request costs more than a core at load (docs/production.md, "Toolchain facts").
    DATABASES["default"]["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=60)
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# An optional read replica (streaming replication of default): list pages and reports marked
# @replica_reads read from it; everything else uses default (handover/core/replica.py). In tests it
# mirrors default.
if env.str("DATABASE_REPLICA_URL", default=""):
    DATABASES["replica"] = {
        **env.db_url("DATABASE_REPLICA_URL"),
        "CONN_MAX_AGE": DATABASES["default"].get("CONN_MAX_AGE", 0),
        "CONN_HEALTH_CHECKS": DATABASES["default"].get("CONN_HEALTH_CHECKS", False),
        "TEST": {"MIRROR": "default"},
    }
# No JIT compilation on PostgreSQL: our reads are short (index probes, counts that stop at the cap)
# but their estimated costs assume whole scans, so the default JIT (estimated cost past
# jit_above_cost) spent 2-3 s compiling page queries that then ran in 0.1-0.2 s at a million stored
# alerts (docs/production.md, "History measured").
for _database in DATABASES.values():
    if _database["ENGINE"] == "django.db.backends.postgresql":
        _database.setdefault("OPTIONS", {})["options"] = "-c jit=off"
DATABASE_ROUTERS = ["handover.core.replica.ReplicaRouter"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTHENTICATION_BACKENDS = [
    # first: refuses a locked-out login before any password is checked (django-axes)
    "handover.accounts.login_throttle.LoginThrottleBackend",
    "django.contrib.auth.backends.ModelBackend",
    "guardian.backends.ObjectPermissionBackend",
]
ANONYMOUS_USER_NAME = None  # guardian: no anonymous user row; anonymous people see nothing
GUARDIAN_RAISE_403 = False

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 12}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "runs:run-list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns about a missing root
STATICFILES_DIRS = [BASE_DIR / "handover" / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if PRODUCTION
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}

# --- security ---------------------------------------------------------------------------------
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_AGE = env.int("HANDOVER_SESSION_SECONDS", default=12 * 3600)
SESSION_COOKIE_SECURE = PRODUCTION
CSRF_COOKIE_SECURE = PRODUCTION
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Only forms post the CSRF token (htmx takes it from the page), so scripts need not read the cookie.
CSRF_COOKIE_HTTPONLY = True
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
# Content Security Policy (django-csp): nothing inline and nothing from elsewhere. htmx is served
# from static; the API docs use the Swagger UI page whose script is a separate file.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "worker-src": ["'self'", "blob:"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "frame-ancestors": ["'none'"],
        "form-action": ["'self'"],
    }
}
# Login throttling (django-axes): after HANDOVER_LOGIN_FAILURES failed logins for one username
# from one address, that pair is refused for HANDOVER_LOGIN_COOLOFF_SECONDS. Counts live in the
# cache, not the database, and log lines name no username (rule 8 in docs/architecture.md).
AXES_HANDLER = "axes.handlers.cache.AxesCacheHandler"
AXES_FAILURE_LIMIT = env.int("HANDOVER_LOGIN_FAILURES", default=5)
AXES_COOLOFF_TIME = timedelta(seconds=env.int("HANDOVER_LOGIN_COOLOFF_SECONDS", default=15 * 60))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_STR_CALLABLE = "handover.accounts.login_throttle.client_str"
# Reverse proxies (load balancers) in front of the app that append to X-Forwarded-For. 0: the
# header is ignored and the address is REMOTE_ADDR; N: the N-th entry from the right (set it to the
# real number: too high lets clients choose their address, too low locks out everyone behind a proxy).
HANDOVER_TRUSTED_PROXY_COUNT = env.int("HANDOVER_TRUSTED_PROXY_COUNT", default=0)
AXES_CLIENT_IP_CALLABLE = "handover.accounts.login_throttle.client_ip"
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
if PRODUCTION:
    SECURE_HSTS_SECONDS = env.int("HANDOVER_HSTS_SECONDS", default=31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = env.bool("HANDOVER_HSTS_PRELOAD", default=True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env.bool("HANDOVER_SSL_REDIRECT", default=True)
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]

# --- ingestion ----------------------------------------------------------------------------------
HANDOVER_MAX_BODY_BYTES = env.int("HANDOVER_MAX_BODY_BYTES", default=5 * 1024 * 1024)
HANDOVER_KEPT_OVERSIZE_BYTES = 64 * 1024  # what an oversized body keeps (docs/architecture.md)
HANDOVER_MAX_BATCH_ALERTS = env.int("HANDOVER_MAX_BATCH_ALERTS", default=1000)
HANDOVER_PENDING_SWEEP_AFTER_SECONDS = env.int("HANDOVER_PENDING_SWEEP_AFTER_SECONDS", default=60)
DATA_UPLOAD_MAX_MEMORY_SIZE = HANDOVER_MAX_BODY_BYTES + 1024
# Per-key rate limit of ingestion posts (sliding window in the cache; 429 with Retry-After above
# it). High by default: an alert storm of a whole cluster must not be refused.
# A post's alerts of the common shape (a new run's attempt) are written a segment at a time on PostgreSQL
# (runs/alerts/bulk.py); off: every alert applied row by row, as on SQLite.
HANDOVER_INGEST_SET_PATH = env.bool("HANDOVER_INGEST_SET_PATH", default=True)
HANDOVER_INGEST_RATE_LIMIT = env.int("HANDOVER_INGEST_RATE_LIMIT", default=6000)
HANDOVER_INGEST_RATE_WINDOW_SECONDS = env.int("HANDOVER_INGEST_RATE_WINDOW_SECONDS", default=60)

# --- retention ------------------------------------------------------------------------------------
# Raw delivery bodies and work-ledger items older than this many days are purged by the beat
# (bodies blanked, rows kept; ledger items nothing points at deleted). 0 turns the purge off.
HANDOVER_RETENTION_DAYS = env.int("HANDOVER_RETENTION_DAYS", default=90)

# --- work ledger loads ----------------------------------------------------------------------------
# Largest accepted record-id file (population, runner report, destination or provider export), bytes.
HANDOVER_LEDGER_MAX_UPLOAD_BYTES = env.int("HANDOVER_LEDGER_MAX_UPLOAD_BYTES", default=128 * 1024 * 1024)
# Files up to this size load inside the request; larger ones run as a Celery task with a progress bar.
HANDOVER_LEDGER_SYNC_MAX_BYTES = env.int("HANDOVER_LEDGER_SYNC_MAX_BYTES", default=1024 * 1024)

# --- cache --------------------------------------------------------------------------------------
# Load progress is written by the worker and polled by the web process, so the default must be
# shared across processes: a file-based cache in var/ (Redis in production via CACHE_URL).
SILENCED_SYSTEM_CHECKS: list[str] = []
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The inbox's covering index (migration runs 0029) INCLUDEs columns for PostgreSQL's index-only
    # counts; SQLite builds it on its keys alone (models.W040), which changes no result.
    SILENCED_SYSTEM_CHECKS.append("models.W040")
CACHES = {"default": env.cache_url("CACHE_URL", default=f"filecache://{VAR_DIR / 'cache'}")}
if CACHES["default"]["BACKEND"].endswith("FileBasedCache"):
    # django-axes (login throttling) and the ingest rate limit count in this cache. A file cache may
    # lose an increment when two processes race, which only allows a few more attempts; axes warns
    # about it (W001). Fine for the embedded single-machine setup; production uses Redis.
    SILENCED_SYSTEM_CHECKS.append("axes.W001")

# --- REST framework -----------------------------------------------------------------------------
# Lists count at most this many rows, then say "10,000+" (pages) or count_capped (API): a list over
# years of history never runs an unbounded COUNT(*) (handover/core/pagination.py).
LIST_COUNT_CAP = env.int("HANDOVER_LIST_COUNT_CAP", default=10_000)

REST_FRAMEWORK = {
    # Token first: its WWW-Authenticate header makes an unauthenticated call a 401, not a 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "handover.accounts.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "handover.core.pagination.DefaultPagination",
    "PAGE_SIZE": 50,
    # Filters are FilterSets that document and validate (handover/core/filters.py); selectors filter.
    "DEFAULT_FILTER_BACKENDS": ["handover.core.filters.SelectorFilterBackend"],
    # JSON nested at most 64 levels, and no NUL characters in any body (handover/core/parsers.py); the
    # ingestion endpoint has a parser of its own.
    "DEFAULT_PARSER_CLASSES": [
        "handover.core.parsers.JSONParser",
        "handover.core.parsers.FormParser",
        "handover.core.parsers.MultiPartParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "handover.core.errors.problem_exception_handler",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"]
    + (["rest_framework.renderers.BrowsableAPIRenderer"] if DEBUG else []),
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
# knox's token table, named (it is swappable): handover.ApiTokenUse (each token's last use) points at it.
KNOX_TOKEN_MODEL = "knox.AuthToken"
REST_KNOX = {
    "TOKEN_TTL": timedelta(days=env.int("HANDOVER_API_TOKEN_DAYS", default=90)),
    "AUTH_HEADER_PREFIX": "Token",
    "TOKEN_PREFIX": "ho_",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Handover API",
    "DESCRIPTION": "Failed scheduled runs: alerts in, runs and attempts, the timeline, handovers and replays.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # a personal API token's prefix in a path (handover/accounts/api.py registers the converter)
    "PATH_CONVERTER_OVERRIDES": {"token_prefix": {"type": "string", "pattern": "^ho_[0-9a-f]{12}$"}},
    # every operation's error answers (401/403/404/400) as problem details (handover/core/openapi.py)
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "handover.core.openapi.add_problem_responses",
        # DRF's placeholder page links (api.example.org/accounts) become each list's own address
        "handover.core.openapi.add_page_link_examples",
    ],
    # Several models have a `status`/`outcome`; name each enum after its model.
    "ENUM_NAME_OVERRIDES": {
        "ReplayRequestKindEnum": "approvals.replays.models._ReplayRequestKind",
        "ReplayRequestStatusEnum": "approvals.replays.models._ReplayRequestStatus",
        "ApprovalKindEnum": "approvals.replays.models._ApprovalKind",
        "ApprovalDecisionEnum": "approvals.replays.models._ApprovalDecision",
        "DispatchChannelEnum": "approvals.replays.models._DispatchChannel",
        "DispatchStatusEnum": "approvals.replays.models._DispatchStatus",
        "WebhookDeliveryStatusEnum": "approvals.replays.models._WebhookDeliveryStatus",
        "RunStatusEnum": "runs.attempts.models._RunStatus",
        "AttemptStatusEnum": "runs.attempts.models._AttemptStatus",
        "AlertOutcomeEnum": "runs.alerts.models._AlertOutcome",
        "DeliveryOutcomeEnum": "runs.alerts.models._DeliveryOutcome",
        "IntegrationKeyKindEnum": "runs.catalog.models._IntegrationKeyKind",
        "RefusedReasonEnum": "runs.alerts.models._RefusedReason",
        "RunFailureClassEnum": "runs.attempts.models._RunFailureClass",
        "WorkItemOutcomeEnum": "runs.ledger.models._WorkItemOutcome",
        "WorkItemEvidenceKindEnum": "runs.ledger.models._WorkItemEvidenceKind",
        "WorkItemRunnerStatusEnum": "runs.ledger.models._WorkItemRunnerStatus",
        "WorkItemChangeKindEnum": "runs.ledger.models._WorkItemChangeKind",
        "WorkItemLoadKindEnum": "runs.ledger.models._WorkItemLoadKind",
        "WorkItemLoadStatusEnum": "runs.ledger.models._WorkItemLoadStatus",
        "WorkItemLoadFormatEnum": "runs.ledger.models._WorkItemLoadFormat",
        "HandoverStatusEnum": "handover.handovers.models._HandoverStatus",
        "HandoverSectionEnum": "handover.handovers.models._HandoverSection",
        "HandoverNotificationStatusEnum": "handover.handovers.models._NotificationStatus",
        "ProblemStatusEnum": "handover.problems.models._ProblemStatus",
    },
}

# --- Celery -------------------------------------------------------------------------------------
BROKER_DIR = VAR_DIR / "broker"
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="filesystem://localhost/")
if CELERY_BROKER_URL.startswith("filesystem://"):
    # kombu does not create these folders; in and out must be the same folder, and processed
    # messages are kept on the same filesystem so a move is atomic (docs/production.md, "Toolchain facts").
    for sub in ("queue", "control", "processed"):
        (BROKER_DIR / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "control_folder": str(BROKER_DIR / "control"),
        "processed_folder": str(BROKER_DIR / "processed"),
        "store_processed": True,
    }
else:
    # Above the longest countdown we use, so Redis does not redeliver a held message (Celery #2481).
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 2 * 3600}
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = 120
CELERY_TASK_TIME_LIMIT = 180
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_TIMEZONE = "UTC"
CELERY_BEAT_SCHEDULE = {
    # Every minute: finish alerts a crash left `pending`, and write the beat heartbeat for /healthz.
    "runs-alert-sweep": {"task": "runs.alert_sweep_pending", "schedule": 60.0},
    # Every minute: settle next-run checks past their deadline or with a success of the next run.
    "runs-next-run-check-sweep": {"task": "runs.next_run_check_sweep", "schedule": 60.0},
    # Every minute: one `missed` run per fire time of a success-reporting target that never reported.
    "runs-missed-run-sweep": {"task": "runs.run_sweep_missed", "schedule": 60.0},
    # Every minute: resolve verifying handovers whose next-run checks passed or were waived; reopen failed ones.
    "handover-verifying-sweep": {"task": "handover.handover_sweep_verifying", "schedule": 60.0},
    # Every minute: the follow-ups of failed next-run checks (their outbox: failed, not yet notified).
    "handover-check-follow-ups": {"task": "handover.next_run_check_follow_ups_sweep", "schedule": 60.0},
    # Hourly: purge delivery bodies and work-ledger items older than HANDOVER_RETENTION_DAYS.
    "runs-retention-purge": {"task": "runs.retention_purge", "schedule": 3600.0},
    # Every minute: expire overdue replay requests, make lapsed dispatch leases `unknown`, dispatch approved
    # requests (held or lost ones), complete replays the ledger confirms, deliver due replay webhooks.
    "approvals-replay-sweep": {"task": "approvals.replay_sweep", "schedule": 60.0},
    # Every 15 minutes: remind the eligible approvers of replay requests waiting too long.
    "approvals-replay-remind": {"task": "approvals.replay_request_remind", "schedule": 900.0},
    # Every minute: send the digests of held notifications and enqueue again deliveries whose message was lost.
    "handover-notification-sweep": {"task": "handover.notification_sweep", "schedule": 60.0},
    # Every 5 minutes: the reminder ladder of aged work (each step sent once per item; docs/ownership.md).
    "handover-aged-work-sweep": {"task": "handover.aged_work_escalate", "schedule": 300.0},
    # Every 5 minutes: verify problems whose fix is deployed once every linked target ran clean N times.
    "handover-problem-verify-sweep": {"task": "handover.problem_verify_sweep", "schedule": 300.0},
}
# How far back the missed-run sweep re-checks fire times each tick (a longer outage is walked from
# the target's latest run), in seconds.
HANDOVER_MISSED_RUN_LOOKBACK_SECONDS = env.int("HANDOVER_MISSED_RUN_LOOKBACK_SECONDS", default=2 * 24 * 3600)

# --- e-mail: failed next-run checks (console backend unless EMAIL_URL is set) -------------------
EMAIL_CONFIG = env.email_url("EMAIL_URL", default="consolemail://")
vars().update(EMAIL_CONFIG)
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="handover@localhost")

# --- handovers ------------------------------------------------------------------------------------
# The mail backend class may also be named directly (it wins over the one EMAIL_URL chose); console by default.
EMAIL_BACKEND = env.str(
    "EMAIL_BACKEND", default=EMAIL_CONFIG.get("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
)
# Absolute links built outside a request (e-mail, chat, replay webhooks) start with this; links in an
# answer to a request are built from that request (handover.core.links). Required in production.
HANDOVER_BASE_URL = env.str("HANDOVER_BASE_URL", default="" if PRODUCTION else "http://127.0.0.1:8000")
if PRODUCTION and not HANDOVER_BASE_URL.startswith("https://"):
    raise ImproperlyConfigured("HANDOVER_BASE_URL must be set to the site's https:// address in production.")
# the schema's server: Swagger UI's "Try it out" and the examples use this installation's address
SPECTACULAR_SETTINGS["SERVERS"] = [
    {"url": HANDOVER_BASE_URL or "http://127.0.0.1:8000", "description": "this installation"}
]
# "Needs attention": a run unresolved for longer than this (seconds since it was scheduled) is listed.
HANDOVER_UNRESOLVED_AGE_SECONDS = env.int("HANDOVER_UNRESOLVED_AGE_SECONDS", default=24 * 3600)
# "Needs attention": a job target with this many failures among its last N settled runs fails repeatedly.
HANDOVER_REPEATED_FAILURES = env.int("HANDOVER_REPEATED_FAILURES", default=3)
HANDOVER_REPEATED_FAILURES_OF = env.int("HANDOVER_REPEATED_FAILURES_OF", default=5)
# Aged work (docs/ownership.md), in seconds: a failed or missed run with no handover, counted from when
# it failed; an open handover (draft, handed over, recovering) with no write, from its last write; a run
# with unresolved ledger items (unverified, absent, uncertain), from its last ledger change; a next-run
# check still scheduled past its deadline, from the deadline.
HANDOVER_AGED_FAILED_RUN_SECONDS = env.int("HANDOVER_AGED_FAILED_RUN_SECONDS", default=4 * 3600)
HANDOVER_AGED_HANDOVER_SECONDS = env.int("HANDOVER_AGED_HANDOVER_SECONDS", default=24 * 3600)
HANDOVER_AGED_LEDGER_SECONDS = env.int("HANDOVER_AGED_LEDGER_SECONDS", default=24 * 3600)
HANDOVER_AGED_CHECK_SECONDS = env.int("HANDOVER_AGED_CHECK_SECONDS", default=3600)
# The reminder ladder: at each of these ages (seconds, ascending) an aged item's owners are reminded once.
HANDOVER_AGED_REMINDER_STEPS_SECONDS = sorted(
    env.list("HANDOVER_AGED_REMINDER_STEPS_SECONDS", cast=int, default=[86400, 3 * 86400, 7 * 86400])
)

# --- notifications (handover/notifications/) ------------------------------------------------------
# Fernet keys (comma-separated, the first encrypts) for the stored Apprise URLs; empty: derived from the
# secret key (development). Generate one (docs/production.md "Settings"):
#   python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"
HANDOVER_NOTIFICATION_KEYS = env.list("HANDOVER_NOTIFICATION_KEYS", default=[])
# Apprise schemes people may use (the admin's allow-list).
HANDOVER_APPRISE_SCHEMES = env.list(
    "HANDOVER_APPRISE_SCHEMES",
    default=["slack", "msteams", "discord", "tgram", "mmosts", "ntfys", "jsons", "forms"]
    + ([] if PRODUCTION else ["json", "form"]),
)
# Hosts generic json/form/xml targets may reach (nothing else is allowed for them).
HANDOVER_APPRISE_GENERIC_HOSTS = env.list("HANDOVER_APPRISE_GENERIC_HOSTS", default=[])
# Hosts a chat/push target may reach although they are (or resolve to) a private or loopback address.
HANDOVER_APPRISE_PRIVATE_HOSTS = env.list("HANDOVER_APPRISE_PRIVATE_HOSTS", default=[])
# A storm: more than this many messages to one person on one channel within the minutes below are held
# and sent as one digest.
HANDOVER_NOTIFICATION_STORM_COUNT = env.int("HANDOVER_NOTIFICATION_STORM_COUNT", default=10)
HANDOVER_NOTIFICATION_STORM_MINUTES = env.int("HANDOVER_NOTIFICATION_STORM_MINUTES", default=10)

# --- replays (approvals app) ----------------------------------------------------------------------
# A replay request still pending after this long expires (its approvals are void), in seconds.
HANDOVER_REPLAY_PENDING_EXPIRY_SECONDS = env.int("HANDOVER_REPLAY_PENDING_EXPIRY_SECONDS", default=3 * 24 * 3600)
# Remind the eligible approvers of a request pending this long (and again after as long), in seconds.
HANDOVER_REPLAY_REMIND_AFTER_SECONDS = env.int("HANDOVER_REPLAY_REMIND_AFTER_SECONDS", default=4 * 3600)
# An approver's re-entered password counts this long before approving or rejecting, in seconds.
HANDOVER_REPLAY_REAUTH_SECONDS = env.int("HANDOVER_REPLAY_REAUTH_SECONDS", default=300)
# Wrong passwords allowed within 15 minutes before the re-entry answers 429.
HANDOVER_REPLAY_REAUTH_MAX_FAILURES = env.int("HANDOVER_REPLAY_REAUTH_MAX_FAILURES", default=5)
# A dispatch nobody claimed (and whose webhook was not delivered) within this long becomes `unknown`, seconds.
HANDOVER_REPLAY_CLAIM_WINDOW_SECONDS = env.int("HANDOVER_REPLAY_CLAIM_WINDOW_SECONDS", default=3600)
# The lease: a claimed or delivered replay must report its attempt as started within this long, seconds.
HANDOVER_REPLAY_LEASE_SECONDS = env.int("HANDOVER_REPLAY_LEASE_SECONDS", default=15 * 60)
# Replay webhooks: hosts allowed although they resolve to a private or loopback address.
HANDOVER_REPLAY_WEBHOOK_ALLOWED_HOSTS = env.list("HANDOVER_REPLAY_WEBHOOK_ALLOWED_HOSTS", default=[])
# Replay webhooks: seconds to wait for an answer; deliveries per dispatch in all; first retry delay (doubles).
HANDOVER_REPLAY_WEBHOOK_TIMEOUT_SECONDS = env.int("HANDOVER_REPLAY_WEBHOOK_TIMEOUT_SECONDS", default=10)
HANDOVER_REPLAY_WEBHOOK_MAX_DELIVERIES = env.int("HANDOVER_REPLAY_WEBHOOK_MAX_DELIVERIES", default=6)
HANDOVER_REPLAY_WEBHOOK_BACKOFF_SECONDS = env.int("HANDOVER_REPLAY_WEBHOOK_BACKOFF_SECONDS", default=30)

# --- logging: never secrets or personal data (rule 8 in docs/architecture.md) ---------------------
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    # URL keys travel in the ingestion address: masked in every line (handover/core/access_log.py)
    "filters": {"mask_url_keys": {"()": "handover.core.access_log.UrlKeyMaskFilter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["mask_url_keys"]}},
    "root": {"handlers": ["console"], "level": env.str("HANDOVER_LOG_LEVEL", default="INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # axes: its start-up banner and per-login lines are noise; lockouts are still logged (WARNING)
        "axes": {"level": "WARNING"},
        # apprise: its INFO lines name the target (an Apprise URL carries its token): warnings only
        "apprise": {"level": "WARNING"},
        # runserver's request lines print paths: through the masking console handler, not Django's own
        "django.server": {"handlers": ["console"], "level": "INFO", "propagate": False},
        # Django's "Unauthorized: <path>" warnings likewise (no ADMINS are set, so no mail is lost)
        "django.request": {"handlers": ["console"], "level": "INFO", "propagate": False},
    },
}
