"""ds4-cli generation mode: one-shot generation on a deepseek4 model.

    ds4-cli [-m TARGET] -p PROMPT [-n N] [--temp T --top-k K --top-p P --min-p M --seed S]
    ds4-cli [-m TARGET] -f FILE | -p - | --ids 0,17,42 [...]      (or the prompt on stdin)

The prompt is rendered with DeepSeek V4's chat template (BOS, <｜User｜>PROMPT<｜Assistant｜>,
then </think> or, with --think, <think>) unless --raw asks for BOS + the text as is. The output
is streamed as text. Greedy by default. Without -m the embedded default pair is used (a small
deepseek4 model trained by ds4rt and its trained DSpark support model, ds4rt/data/,
docs/MODELS.md), with DSpark on unless --no-dspark. docs/CLI.md describes every option.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .cli_common import (
    EXIT_INTERRUPTED,
    INT32_MAX,
    UsageError,
    add_dspark_arguments,
    add_model_arguments,
    add_sampling_arguments,
    generation_options,
    load,
    note,
    read_text_file,
    session_for,
)
from .generation import GenerationResult, StopReason
from .model import Model


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("prompt")
    g.add_argument("-p", "--prompt", help="prompt text; '-' reads it from stdin")
    g.add_argument("-f", "--file", help="read the prompt from FILE ('-': stdin)")
    g.add_argument("--ids", help="prompt as comma-separated token ids instead of text")
    g.add_argument("--raw", action="store_true", help="no chat template: BOS + the prompt text")
    g.add_argument("--json", action="store_true", help="print one JSON record instead of text")
    add_model_arguments(p)
    add_sampling_arguments(p, n_default=64)
    add_dspark_arguments(p)


def _prompt_text(args: argparse.Namespace) -> str:
    if args.prompt == "-":
        return read_text_file("-")
    if args.prompt is not None:
        return str(args.prompt)
    if args.file is not None:
        return read_text_file(args.file)
    if not sys.stdin.isatty():
        text = read_text_file("-")
        if text:
            return text
    raise UsageError("give a prompt: -p TEXT, -f FILE, --ids IDS, or text on stdin")


def _parse_ids(spec: str) -> list[int]:
    ids = []
    for part in spec.replace(" ", "").split(","):
        if not part:
            continue
        try:
            v = int(part)
        except ValueError:
            raise UsageError(f"--ids must be comma-separated integers, not {part!r}") from None
        if not 0 <= v <= INT32_MAX:
            raise UsageError(f"--ids: {v} is outside [0, {INT32_MAX}]")
        ids.append(v)
    if not ids:
        raise UsageError("--ids is empty")
    return ids


def prompt_ids(args: argparse.Namespace, model: Model, text: str | None) -> list[int]:
    if args.ids is not None:
        return _parse_ids(args.ids)
    assert text is not None
    tok = model._need_tokenizer()
    if args.raw:
        return tok.encode(text, add_bos=True)
    messages = ([{"role": "system", "content": args.system}] if args.system else []) + [
        {"role": "user", "content": text}
    ]
    return tok.encode_chat(messages, think="high" if args.think else "none")


def timing_line(r: GenerationResult) -> str:
    return f"ds4-cli: {r.timings.line()} | stop: {r.stop_reason}"


def context_full_note(r: GenerationResult, n_ctx: int) -> None:
    if r.stop_reason is StopReason.CONTEXT_FULL:
        note(f"the context is full ({n_ctx} tokens); -c N allows a longer one")


def record(path: str, r: GenerationResult) -> dict[str, Any]:
    t = r.timings
    return {
        "model": path,
        "prompt_ids": r.prompt_ids,
        "ids": r.ids,
        "text": r.text,
        "stop_reason": str(r.stop_reason),
        "stop_string": r.stop_string,
        "seed": r.seed,
        "timings": {
            "prompt_tokens": t.prompt_tokens,
            "prompt_seconds": t.prompt_seconds,
            "prompt_tokens_per_second": t.prompt_tokens_per_second,
            "generated_tokens": t.generated_tokens,
            "generation_seconds": t.generation_seconds,
            "generation_tokens_per_second": t.generation_tokens_per_second,
        },
        "spec_stats": r.spec_stats,
    }


def run(args: argparse.Namespace) -> int:
    opts = generation_options(args)
    text = None if args.ids is not None else _prompt_text(args)
    loaded = load(args)
    with loaded.model as model:
        session = session_for(loaded, args)
        prompt = prompt_ids(args, model, text)
        out = sys.stdout
        shown = False
        interrupted = False
        log = None
        if args.schedule_log is not None and loaded.dspark is not None:
            try:
                log = open(args.schedule_log, "w", encoding="utf-8")
            except OSError as e:
                raise UsageError(f"--schedule-log {args.schedule_log}: {e.strerror}") from None

        def on_schedule(event: dict[str, Any]) -> None:
            assert log is not None
            log.write(json.dumps(event) + "\n")

        with session.stream(
            prompt, opts, dspark=loaded.dspark, on_schedule=on_schedule if log else None
        ) as stream:
            try:
                for piece in stream:
                    if not args.json and piece.text:
                        out.write(piece.text)
                        out.flush()
                        shown = True
            except KeyboardInterrupt:
                interrupted = True
        if log is not None:
            log.close()
        r = stream.result
        assert r is not None
        if shown:
            out.write("\n")
        if not args.json and model.tokenizer is None:  # nothing to show but the ids
            print(",".join(str(t) for t in r.ids))
        if args.json:
            json.dump(record(loaded.path, r), out, ensure_ascii=False)
            out.write("\n")
        else:
            print(timing_line(r), file=sys.stderr)
        context_full_note(r, session.n_ctx)
        if loaded.dspark is not None and args.stats:
            print(session.spec_stats_line(), file=sys.stderr)
        if loaded.dspark is not None and args.stats_json:
            json.dump(session.spec_stats(), sys.stderr)
            sys.stderr.write("\n")
        out.flush()
    if interrupted:
        print("ds4-cli: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    return 0
