#!/usr/bin/env python3
"""Writes the ABI listing of a frozen header: every function it declares ("symbol NAME") and the
size of every struct and the offset of every field as a C compiler lays them out ("struct NAME
SIZE", "field NAME.FIELD OFFSET", the output of tests/abi/sizes.c built against that header).

    python tools/abi_list.py tests/abi/ds4rt_1_0.h SIZES_OUTPUT > tests/abi/abi_1_0.txt

where SIZES_OUTPUT is the output of the abi_sizes_1_0 program (tests/meson.build). The listing of
a released ABI is written once and committed; tests/test_abi_compat.py checks today's library and
header against it (no symbol lost, no struct shrunk, no field moved).
"""

from __future__ import annotations

import re
import sys


def declared_functions(header: str) -> list[str]:
    return sorted(set(re.findall(r"DS4RT_API\s+[^;(]*?\b(ds4rt_\w+)\s*\(", header)))


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    header = open(argv[1], encoding="utf-8").read()
    sizes = open(argv[2], encoding="utf-8").read()
    print(f"# ABI listing of {argv[1]} (tools/abi_list.py): symbols, struct sizes, field offsets")
    print("# on x86_64 Linux (LP64). Never edit: tests/test_abi_compat.py holds the library to it.")
    for name in declared_functions(header):
        print(f"symbol {name}")
    sys.stdout.write(sizes)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
