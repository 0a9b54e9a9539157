"""ds4-cli: generation, chat and file inspection on the command line (docs/CLI.md).

ds4-cli chat [options]           interactive multi-turn chat (`ds4-cli chat --help`)
ds4-cli info PATH [--json [--full | --max-array N]] [--tensors]
                                 summary of a GGUF file (exit 1 with the error on a bad file)
ds4-cli info --backends [--json] the compute backends of this build and the ops x types each runs
ds4-cli info --memory [--ctx N] [--support S] [--json] [PATH]
                                 memory of the model and one session of N tokens, from the header
ds4-cli bench [options]          benchmark: passes, verify(n), DSpark modes, memory (`--help`)
ds4-cli serve [options]          OpenAI-compatible HTTP server (the 'server' extra; docs/SERVER.md)
ds4-cli tokenize (--model GGUF | --vocab GGUF) [TEXT | --decode IDS]
                                 text -> token ids, or ids -> text (`ds4-cli tokenize --help`)
ds4-cli --version                version and build info
ds4-cli [generation options]     everything that is not a subcommand is generation mode

Subcommands are recognised by the first argument only, so generation options never collide
with them. Every user error and signal ends in one line on stderr and a non-zero status, never
in a traceback: 1 for a runtime error, 2 for a usage error, 130 for Ctrl-C, 141 for a closed
output pipe.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any

from . import _core, cli_generate
from .cli_common import (
    EXIT_BROKEN_PIPE,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    UsageError,
    apply_environment,
    check_llama_cpp_flags,
)
from .errors import Ds4rtError

# Arrays longer than this are cut in `info --json` unless --full or --max-array is given
# (large enough for per-layer arrays, small enough to keep the vocabulary out).
DEFAULT_JSON_MAX_ARRAY = 64
# Tensors listed by the text `info` without --tensors.
TEXT_TENSOR_PREVIEW = 10


def _build_parser() -> argparse.ArgumentParser:
    """Parser of the default (generation) mode."""
    p = argparse.ArgumentParser(
        prog="ds4-cli",
        description=__doc__.splitlines()[0],
        epilog="subcommands: chat, serve, info PATH, bench, tokenize "
        "(run `ds4-cli SUBCOMMAND --help`); "
        "ds4's DS4_DSPARK_STATS, DS4_DSPARK_SCHEDULER and DS4_CUDA_NO_Q8_F16_CACHE are honoured "
        "(docs/CLI.md)",
    )
    p.add_argument("--version", action="store_true", help="print version and build info")
    cli_generate.add_arguments(p)
    return p


def _build_info_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ds4-cli info",
        description="Summarise a GGUF file: header, notable metadata, tensor table. Only the "
        "header is read; the whole header is validated and a bad file is an error.",
    )
    p.add_argument("path", help="GGUF file")
    p.add_argument(
        "--json",
        action="store_true",
        help="print ds4rt.gguf.inspect() as JSON; arrays longer than "
        f"{DEFAULT_JSON_MAX_ARRAY} elements are cut (listed under 'metadata_truncated')",
    )
    p.add_argument("--full", action="store_true", help="with --json: never cut arrays")
    p.add_argument(
        "--max-array",
        type=int,
        default=DEFAULT_JSON_MAX_ARRAY,
        metavar="N",
        help=f"with --json: cut arrays to N elements (default {DEFAULT_JSON_MAX_ARRAY})",
    )
    p.add_argument("--tensors", action="store_true", help="list every tensor, not only the first")
    return p


# Subcommand name -> entry point taking the remaining arguments.
SUBCOMMANDS: dict[str, Callable[[list[str]], int]] = {}


def _fmt_bytes(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


def _fmt_value(value: Any, type_label: str) -> str:
    if isinstance(value, list):
        shown = ", ".join(_fmt_value(v, type_label[6:-1]) for v in value[:8])
        more = f", ... ({len(value)} values)" if len(value) > 8 else ""
        return f"[{shown}{more}]"
    if isinstance(value, float):
        return f"{value:.7g}" if type_label == "FLOAT32" else repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _notable_prefixes(arch: str) -> list[str]:
    """Metadata key prefixes worth showing for an architecture: its own keys, plus the
    `dspark.` keys of a ds4 DSpark support file and ds4rt's own (its acceptance prior)."""
    prefixes = [arch + "."] if arch else []
    if "dspark" in arch:
        prefixes += ["dspark.", "ds4rt.dspark."]
    return prefixes


def _print_info(f: Any, show_all_tensors: bool) -> None:
    md = f.metadata
    types = f.metadata_types
    arch = md.get("general.architecture", "")
    rows: list[tuple[str, str]] = [
        ("file", str(f.path)),
        ("architecture", str(arch) if arch else "(general.architecture not set)"),
    ]
    if "general.name" in md:
        rows.append(("name", str(md["general.name"])))
    rows += [
        ("GGUF", f"version {f.version}, alignment {f.alignment}, data at byte {f.data_offset:,}"),
        ("file size", f"{_fmt_bytes(f.file_size)} ({f.file_size:,} bytes)"),
        ("metadata", f"{len(md)} keys"),
    ]
    for label, value in rows:
        print(f"{label:<14}{value}")

    prefixes = _notable_prefixes(str(arch))
    notable = [k for k in md if any(k.startswith(p) for p in prefixes)]
    if notable:
        print(f"hyperparameters ({', '.join(p + '*' for p in prefixes)}):")
        width = max(len(k) for k in notable)
        for k in notable:
            print(f"  {k:<{width}}  {_fmt_value(md[k], types[k])}")

    tok = []
    if "tokenizer.ggml.model" in md:
        tok.append(f"model {md['tokenizer.ggml.model']}")
    if "tokenizer.ggml.pre" in md:
        tok.append(f"pre {md['tokenizer.ggml.pre']}")
    for key, what in (("tokenizer.ggml.tokens", "tokens"), ("tokenizer.ggml.merges", "merges")):
        if isinstance(md.get(key), list):
            tok.append(f"{len(md[key])} {what}")
    if tok:
        print(f"{'tokenizer':<14}{', '.join(tok)}")

    tensors = f.tensors
    total = sum(t["nbytes"] for t in tensors)
    print(f"{'tensors':<14}{len(tensors)} tensors, {_fmt_bytes(total)} of tensor data")
    by_type: dict[str, list[int]] = {}
    for t in tensors:
        entry = by_type.setdefault(t["type"], [0, 0])
        entry[0] += 1
        entry[1] += t["nbytes"]
    for name, (count, nbytes) in sorted(by_type.items(), key=lambda kv: -kv[1][1]):
        print(f"  {name:<10}{count:>7} tensors  {_fmt_bytes(nbytes):>12}")
    listed = tensors if show_all_tensors else tensors[:TEXT_TENSOR_PREVIEW]
    if listed:
        more = "" if len(listed) == len(tensors) else f" (first {len(listed)}; --tensors for all)"
        print(f"tensor table{more}:")
        width = max(len(t["name"]) for t in listed)
        for t in listed:
            shape = "[" + ", ".join(str(d) for d in t["shape"]) + "]"
            print(
                f"  {t['name']:<{width}}  {t['type']:<8} {shape:<24} "
                f"{_fmt_bytes(t['nbytes']):>12}  at +{t['offset']}"
            )


def _info_main(argv: list[str]) -> int:
    if "--backends" in argv:  # no file: the backends of this build
        from . import cli_backends

        return cli_backends.main(argv)
    if "--memory" in argv:  # the memory plan (the header only)
        from . import cli_memory

        return cli_memory.main(argv)
    args = _build_info_parser().parse_args(argv)
    from . import gguf

    with gguf.GGUFFile(args.path) as f:
        if not args.json:
            _print_info(f, args.tensors)
            return 0
        cut: dict[str, int]
        if args.full:
            metadata, cut = f.metadata, {}
        else:
            metadata, cut = f.metadata_truncated(max(args.max_array, 0))
        doc = {
            "path": str(args.path),
            "version": f.version,
            "alignment": f.alignment,
            "data_offset": f.data_offset,
            "file_size": f.file_size,
            "metadata": metadata,
            "metadata_types": f.metadata_types,
            "metadata_truncated": cut,
            "tensors": f.tensors,
        }
    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


SUBCOMMANDS["info"] = _info_main


def _bench_main(argv: list[str]) -> int:
    from . import cli_bench

    return cli_bench.main(argv)


SUBCOMMANDS["bench"] = _bench_main


def _tokenize_main(argv: list[str]) -> int:
    from . import cli_tokenize

    return cli_tokenize.main(argv)


SUBCOMMANDS["tokenize"] = _tokenize_main


def _chat_main(argv: list[str]) -> int:
    from . import cli_chat

    return cli_chat.main(argv)


SUBCOMMANDS["chat"] = _chat_main


def _serve_main(argv: list[str]) -> int:
    from .server import main as server_main

    return server_main.main(argv, prog="ds4-cli serve")


SUBCOMMANDS["serve"] = _serve_main


def _generate_main(argv: list[str]) -> int:
    parser = _build_parser()
    check_llama_cpp_flags(argv, parser)
    args = parser.parse_args(argv)
    if args.version:
        print(_core.build_info())
        return 0
    if not argv and sys.stdin.isatty():
        parser.print_help()
        return 0
    apply_environment(args)
    return cli_generate.run(args)


def _quiet_stdout() -> None:
    """After a closed pipe: later writes (and Python's flush at exit) go nowhere."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except OSError:
        pass


def _error(text: str) -> None:
    try:
        print(f"ds4-cli: error: {text}", file=sys.stderr)
    except OSError:
        pass


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        if argv and argv[0] in SUBCOMMANDS:
            return SUBCOMMANDS[argv[0]](argv[1:])
        return _generate_main(argv)
    except UsageError as e:
        _error(str(e))
        return EXIT_USAGE
    except Ds4rtError as e:
        _error(str(e))
        return EXIT_ERROR
    except KeyboardInterrupt:
        try:
            print("\nds4-cli: interrupted", file=sys.stderr)
        except OSError:
            pass
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # the reader of our output went away (`ds4-cli ... | head`): stop quietly
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except OSError as e:  # a prompt file that cannot be read, ...
        _error(f"{e.filename}: {e.strerror}" if e.filename else str(e))
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
