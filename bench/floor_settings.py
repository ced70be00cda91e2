"""The app's settings with the floor URLconf (same middleware, DRF settings and database)."""

from handover.settings import *  # noqa: F403

ROOT_URLCONF = "bench.floor_urls"
