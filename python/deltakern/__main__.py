"""``python -m deltakern list|explain|conformance|demo ...``: the command line of the C++ build
(apps/deltakern), shipped in the package beside libdeltakern, run with the same arguments."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def cli_path() -> Path:
    """The packaged ``deltakern`` executable (the install tree's bin/, inside the package)."""
    return Path(__file__).resolve().parent / "bin" / "deltakern"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    cli = cli_path()
    if not cli.is_file():
        print(f"deltakern: the command line is not installed at {cli}", file=sys.stderr)
        return 2
    sys.stdout.flush()
    sys.stderr.flush()
    # exec: its exit status, signals and terminal are the command's own.
    os.execv(cli, [str(cli), *args])
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
