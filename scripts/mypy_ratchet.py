"""Run mypy over the apps and hold every module to its error count in mypy-baseline.json.

The configuration is ``[tool.mypy]`` in pyproject.toml (django and DRF plugins, the packages runs,
handover and approvals). This script runs mypy once, counts the errors per file, prints the total
and the modules that got worse, and exits non-zero when any module has more errors than its
baseline entry (a module absent from the baseline has baseline 0) or when mypy itself fails
(exit code 2, a crash, or output that does not add up).

    python scripts/mypy_ratchet.py                  # check (scripts/test.sh runs this)
    python scripts/mypy_ratchet.py --update         # lower the baseline to what improved
    python scripts/mypy_ratchet.py --update --allow-increase   # rewrite it as it is now
    python scripts/mypy_ratchet.py --strict-candidates         # modules clean under --strict

The baseline only goes down: ``--update`` lowers entries and never raises one unless
``--allow-increase`` is given. The strict list in pyproject.toml only grows: when
``--strict-candidates`` names a module, add it there.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import os
import re
import subprocess
import sys
import tomllib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "pyproject.toml"
BASELINE = ROOT / "mypy-baseline.json"

# "path:line: error: message  [code]", "path:line:col: error: ...", or "path: error: ..." (no line).
ERROR_LINE = re.compile(
    r"^(?P<path>[^:\s][^:]*\.pyi?)(?::(?P<line>\d+))?(?::\d+)?: error: (?P<msg>.*?)(?:  \[(?P<code>[\w-]+)\])?$"
)
SUMMARY_FOUND = re.compile(r"^Found (?P<errors>\d+) errors? in (?P<files>\d+) files? \(checked (?P<checked>\d+) source")
SUMMARY_OK = re.compile(r"^Success: no issues found in (?P<checked>\d+) source files?")


class MypyFailure(Exception):
    """mypy did not produce a usable result (crash, usage error, output that does not add up)."""


@dataclass(frozen=True)
class MypyResult:
    """The errors of one mypy run, grouped per file and per error code."""

    per_module: dict[str, int]
    per_code: dict[str, int]
    checked: int
    lines: dict[str, list[str]]

    @property
    def total(self) -> int:
        return sum(self.per_module.values())


def default_cache_dir() -> Path:
    """The cache directory, keyed by the configuration so that a config edit never replays stale errors."""
    var_dir = os.environ.get("HANDOVER_VAR_DIR")
    base = Path(var_dir) / "mypy_cache" if var_dir else ROOT / ".mypy_cache"
    digest = hashlib.sha256(CONFIG.read_bytes()).hexdigest()[:12]
    return base / f"config-{digest}"


def run_mypy(cache_dir: Path, extra_args: Sequence[str] = ()) -> MypyResult:
    """Run mypy with the project configuration and parse its errors; raise MypyFailure if it fails."""
    cmd = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        str(CONFIG),
        "--cache-dir",
        str(cache_dir),
        "--show-error-codes",
        "--no-pretty",
        "--no-color-output",
        "--hide-error-context",
        *extra_args,
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    output = proc.stdout + proc.stderr
    if proc.returncode not in (0, 1) or "INTERNAL ERROR" in output or "Traceback (most recent call last)" in output:
        raise MypyFailure(f"mypy exited with code {proc.returncode}:\n{output.strip()}")

    per_module: Counter[str] = Counter()
    per_code: Counter[str] = Counter()
    lines: dict[str, list[str]] = {}
    summary_errors: int | None = None
    checked: int | None = None
    for line in proc.stdout.splitlines():
        if match := ERROR_LINE.match(line):
            per_module[match["path"]] += 1
            per_code[match["code"] or "(no code)"] += 1
            lines.setdefault(match["path"], []).append(line)
        elif match := SUMMARY_FOUND.match(line):
            summary_errors, checked = int(match["errors"]), int(match["checked"])
        elif match := SUMMARY_OK.match(line):
            summary_errors, checked = 0, int(match["checked"])

    parsed = sum(per_module.values())
    if summary_errors is None or checked is None:
        raise MypyFailure(f"mypy printed no summary line (exit code {proc.returncode}):\n{output.strip()}")
    if parsed != summary_errors or (proc.returncode == 0) != (parsed == 0):
        raise MypyFailure(
            f"mypy reported {summary_errors} errors (exit code {proc.returncode}) but {parsed} were parsed:\n"
            f"{output.strip()}"
        )
    if checked == 0:
        raise MypyFailure("mypy checked no source files")
    return MypyResult(per_module=dict(per_module), per_code=dict(per_code), checked=checked, lines=lines)


def load_baseline() -> dict[str, int]:
    """The per-module error counts allowed; an absent file is an empty baseline."""
    if not BASELINE.exists():
        return {}
    data = json.loads(BASELINE.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not all(isinstance(k, str) and type(v) is int for k, v in data.items()):
        raise SystemExit(f"{BASELINE.name}: expected a JSON object of module path -> error count")
    return data


def write_baseline(counts: dict[str, int]) -> None:
    """Write the baseline sorted, without the modules at zero."""
    data = {path: counts[path] for path in sorted(counts) if counts[path] > 0}
    BASELINE.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def strict_patterns() -> list[str]:
    """The module patterns of the strict override in pyproject.toml (the one that sets warn_return_any)."""
    config = tomllib.loads(CONFIG.read_text(encoding="utf-8"))
    patterns: list[str] = []
    for override in config.get("tool", {}).get("mypy", {}).get("overrides", []):
        if override.get("warn_return_any") is True:
            modules = override.get("module", [])
            patterns.extend([modules] if isinstance(modules, str) else modules)
    return patterns


def module_name(path: str) -> str:
    """runs/alerts/records.py -> runs.alerts.records; runs/alerts/__init__.py -> runs.alerts."""
    parts = list(Path(path).with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_strict(module: str, patterns: Sequence[str]) -> bool:
    """Whether a mypy override pattern (``a.b`` or ``a.b.*``) covers the module."""
    for pattern in patterns:
        if pattern.endswith(".*") and (module == pattern[:-2] or module.startswith(pattern[:-1])):
            return True
        if module == pattern or ("*" in pattern and fnmatch.fnmatchcase(module, pattern)):
            return True
    return False


def source_files() -> list[str]:
    """The files mypy checks: [tool.mypy] files, without migrations."""
    config = tomllib.loads(CONFIG.read_text(encoding="utf-8"))
    found: list[str] = []
    for top in config["tool"]["mypy"]["files"]:
        for path in sorted((ROOT / top).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if "/migrations/" not in relative:
                found.append(relative)
    return found


def print_strict_candidates(cache_dir: Path) -> None:
    """Run mypy with --strict and print the modules clean under it that the strict list does not cover yet."""
    strict = run_mypy(cache_dir.with_name(cache_dir.name + "-strict"), ["--strict"])
    patterns = strict_patterns()
    candidates = [
        module_name(path)
        for path in source_files()
        if strict.per_module.get(path, 0) == 0 and not is_strict(module_name(path), patterns)
    ]
    print(f"mypy --strict: {strict.total} errors; {len(candidates)} clean modules not yet in the strict list:")
    for module in candidates:
        print(f'    "{module}",')


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--update", action="store_true", help="rewrite the baseline (lowering entries only)")
    parser.add_argument("--allow-increase", action="store_true", help="with --update, also raise entries")
    parser.add_argument("--strict-candidates", action="store_true", help="list modules clean under --strict")
    parser.add_argument("--cache-dir", type=Path, default=None, help="mypy cache (default: keyed by the config)")
    args = parser.parse_args(argv)
    if args.allow_increase and not args.update:
        parser.error("--allow-increase only goes with --update")
    cache_dir: Path = args.cache_dir or default_cache_dir()

    try:
        result = run_mypy(cache_dir)
    except MypyFailure as exc:
        print(f"mypy: FAILED: {exc}", file=sys.stderr)
        return 2

    baseline = load_baseline()
    print(
        f"mypy: {result.total} errors in {len(result.per_module)} modules "
        f"(baseline {sum(baseline.values())}; {result.checked} files checked)"
    )
    if result.per_code:
        codes = sorted(result.per_code.items(), key=lambda item: (-item[1], item[0]))
        print("mypy: by code: " + ", ".join(f"{code} {count}" for code, count in codes))

    regressions = {
        path: (count, baseline.get(path, 0))
        for path, count in sorted(result.per_module.items())
        if count > baseline.get(path, 0)
    }
    improved = {
        path: (result.per_module.get(path, 0), allowed)
        for path, allowed in sorted(baseline.items())
        if result.per_module.get(path, 0) < allowed
    }
    label = "RAISED" if args.update and args.allow_increase else "REGRESSION"
    for path, (count, allowed) in regressions.items():
        print(f"mypy: {label} {path}: {count} errors (baseline {allowed})")
        if label == "REGRESSION":
            for line in result.lines.get(path, []):
                print(f"    {line}")
    if improved and not args.update:
        print(f"mypy: {len(improved)} modules below their baseline: run scripts/mypy_ratchet.py --update to lock it in")

    if args.update:
        if args.allow_increase:
            new = dict(result.per_module)
        else:
            new = {path: min(result.per_module.get(path, 0), allowed) for path, allowed in baseline.items()}
        write_baseline(new)
        print(f"mypy: wrote {BASELINE.name} (total {sum(v for v in new.values() if v > 0)})")
        if args.allow_increase:
            regressions = {}

    if args.strict_candidates:
        try:
            print_strict_candidates(cache_dir)
        except MypyFailure as exc:
            print(f"mypy --strict: FAILED: {exc}", file=sys.stderr)
            return 2

    if regressions:
        print(
            f"mypy: {len(regressions)} modules have more errors than mypy-baseline.json allows "
            "(fix them; the baseline never goes up)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
