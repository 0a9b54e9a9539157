"""ds4-cli: one-shot generation and file inspection on the command line.

ds4-cli info PATH [--json]      summary of a GGUF file (exit 1 with the error on a bad file)
ds4-cli --version
"""

from __future__ import annotations

import argparse
import sys

from . import _core
from .errors import Ds4rtError


def _build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ds4-cli", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="store_true", help="print version and build info")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    try:
        if args.version:
            print(_core.build_info())
            return 0
    except Ds4rtError as e:
        print(f"ds4-cli: error: {e}", file=sys.stderr)
        return 1
    _build_parser().print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
