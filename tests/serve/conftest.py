"""Fixtures of kiln-serve's end-to-end tests (test_serve.py).

The tools come from the command line (--kilnc, --kiln-run, --kiln-serve: ctest passes the build
tree's), else from $KILN_KILNC / $KILN_RUN / $KILN_SERVE, else from <source>/build/bin.

The client is tritonclient (pinned in the test virtualenv by scripts/setup.sh). Without it the
suite is skipped (exit 77, ctest's SKIP_RETURN_CODE), except under CI=true, where it fails.
"""
import os
import pathlib

import pytest

SOURCE_DIR = pathlib.Path(__file__).resolve().parents[2]


def pytest_addoption(parser):
    group = parser.getgroup("kiln-serve")
    for tool, env in (("kilnc", "KILN_KILNC"), ("kiln-run", "KILN_RUN"), ("kiln-serve", "KILN_SERVE")):
        group.addoption(f"--{tool}", default=os.environ.get(env, str(SOURCE_DIR / "build" / "bin" / tool)),
                        help=f"the {tool} binary (default: ${env}, else build/bin/{tool})")


def pytest_configure(config):
    try:
        import numpy  # noqa: F401
        import tritonclient.grpc  # noqa: F401
        import tritonclient.http  # noqa: F401
    except ImportError as e:
        why = f"kiln-serve tests need tritonclient[http,grpc] and NumPy (scripts/setup.sh installs them in .venv): {e}"
        if os.environ.get("CI") == "true":
            pytest.exit(why, returncode=1)
        pytest.exit("skipped: " + why, returncode=77)
    for tool in ("kilnc", "kiln-run", "kiln-serve"):
        path = config.getoption(tool.replace("-", "_"))
        if not os.access(path, os.X_OK):
            pytest.exit(f"{tool} not found or not executable: {path}", returncode=1)
