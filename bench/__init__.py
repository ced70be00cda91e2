"""Benchmarks (never run in CI). ``python bench/ingest.py --help``."""
