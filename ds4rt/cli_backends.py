"""ds4-cli info --backends: the compiled-in backends and the op x type table of each."""

from __future__ import annotations

import argparse
import json
import sys

from .backends import backends


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="ds4-cli info --backends",
        description="List the compute backends of this build, their devices and, for each op of "
        "the backend table, the weight types it runs with.",
    )
    p.add_argument("--backends", action="store_true", required=True)
    p.add_argument("--json", action="store_true", help="print the table as JSON")
    args = p.parse_args(argv)
    table = backends()
    if args.json:
        json.dump(table, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    for b in table:
        print(f"{b['name']}: {b['n_devices']} device(s), op table v{b['ops_version']}")
        if b["ops"] is None:
            print("  (no device visible: nothing to run on)")
            continue
        width = max(len(op) for op in b["ops"])
        for op, types in b["ops"].items():
            print(f"  {op:<{width}}  {' '.join(types) if types else '(missing)'}")
    return 0
