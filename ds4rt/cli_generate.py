"""ds4-cli generation mode: one-shot generation on a deepseek4 model.

    ds4-cli [-m TARGET] -p PROMPT [-n N] [--temp T --top-k K --top-p P --min-p M --seed S]
    ds4-cli [-m TARGET] --ids 0,17,42 [-n N] ...

The prompt is rendered with DeepSeek V4's chat template (BOS, <｜User｜>PROMPT<｜Assistant｜>,
then </think> or, with --think, <think>) unless --raw asks for BOS + the text as is. The output
is streamed as text through the model's tokenizer. Greedy by default. Without -m the embedded
default pair is used (a small deepseek4 model trained by ds4rt and its trained DSpark support
model, ds4rt/data/, docs/MODELS.md), with DSpark on unless --no-dspark; with -m, DSpark needs
--dspark and --support.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from . import data
from .dspark import SCHEDULERS, DSpark
from .errors import Ds4rtError
from .model import NUMERICS, Model


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("generation")
    g.add_argument("-m", "--model", help="target GGUF (default: the embedded trained model)")
    g.add_argument("-p", "--prompt", help="prompt text")
    g.add_argument("--ids", help="prompt as comma-separated token ids instead of text")
    g.add_argument("--raw", action="store_true", help="no chat template: BOS + the prompt text")
    g.add_argument("--system", help="system text (chat template)")
    g.add_argument("--think", action="store_true", help="thinking mode (chat template)")
    g.add_argument(
        "-n", "--n-predict", type=int, default=64, help="tokens to generate (default 64)"
    )
    g.add_argument("--temp", type=float, default=0.0, help="temperature; 0 = greedy (default)")
    g.add_argument("--top-k", type=int, default=0)
    g.add_argument("--top-p", type=float, default=1.0)
    g.add_argument("--min-p", type=float, default=0.0)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--numerics", choices=NUMERICS, default="official")
    g.add_argument("-t", "--threads", type=int, default=0, help="CPU threads (default: all)")
    g.add_argument("-c", "--ctx", type=int, default=4096, help="context size in tokens")
    g.add_argument(
        "--ignore-eos", action="store_true", help="do not stop at the end-of-sequence token"
    )
    g.add_argument("--json", action="store_true", help="print a JSON record instead of text")
    d = p.add_argument_group("DSpark speculative decoding")
    d.add_argument(
        "--support",
        help="DSpark support GGUF (ds4 or llama.cpp dflash layout); "
        "default without -m: the embedded one",
    )
    d.add_argument(
        "--dspark",
        action="store_true",
        help="decode speculatively with the support model (the default without -m)",
    )
    d.add_argument(
        "--no-dspark", action="store_true", help="plain decoding, also for the embedded pair"
    )
    d.add_argument(
        "--confidence",
        type=float,
        default=0.5,
        help="confidence threshold in [0, 1]; 0 disables pruning (default 0.5)",
    )
    d.add_argument("--scheduler", choices=SCHEDULERS, default="adaptive")
    d.add_argument(
        "--max-draft", type=int, default=0, help="drafts per cycle (default: the block size)"
    )
    d.add_argument(
        "--stats", action="store_true", help="print the speculative stats line at the end"
    )
    d.add_argument("--stats-json", action="store_true", help="print the stats as JSON at the end")


def _prompt_ids(args: argparse.Namespace, model: Model) -> list[int]:
    if args.ids is not None:
        try:
            return [int(x) for x in args.ids.replace(" ", "").split(",") if x]
        except ValueError as e:
            raise SystemExit(
                f"ds4-cli: error: --ids must be comma-separated integers ({e})"
            ) from None
    tok = model._need_tokenizer()
    if args.raw:
        return tok.encode(args.prompt, add_bos=True)
    messages = ([{"role": "system", "content": args.system}] if args.system else []) + [
        {"role": "user", "content": args.prompt}
    ]
    return tok.encode_chat(messages, think="high" if args.think else "none")


def run(args: argparse.Namespace) -> int:
    if args.prompt is None and args.ids is None:
        print("ds4-cli: error: give a prompt with -p TEXT or --ids IDS", file=sys.stderr)
        return 2
    path = args.model or data.default_target()
    try:
        model = Model(path, numerics=args.numerics, n_threads=args.threads)
        prompt = _prompt_ids(args, model)
        dspark = None
        if data.dspark_default(args.model, args.dspark, args.no_dspark):
            support = args.support or (None if args.model else data.default_support())
            if support is None:
                print("ds4-cli: error: --dspark needs --support with -m", file=sys.stderr)
                return 2
            dspark = DSpark(model, support)
        elif args.support and not args.no_dspark:
            print(
                "ds4-cli: note: --support given without --dspark: decoding without speculation",
                file=sys.stderr,
            )
        block = dspark.block_size if dspark else 0
        session = model.session(n_ctx=args.ctx, max_batch=max(32, block + 1))
        stream = model.tokenizer.stream() if model.tokenizer and not args.json else None

        def show(token: int) -> None:
            if stream is not None:
                sys.stdout.write(stream.push(token))
                sys.stdout.flush()

        t0 = time.perf_counter()
        out = session.generate(
            prompt,
            max_tokens=args.n_predict,
            temperature=args.temp,
            top_k=args.top_k,
            top_p=args.top_p,
            min_p=args.min_p,
            seed=args.seed,
            stop_at_eos=not args.ignore_eos,
            on_token=show,
            dspark=dspark,
            confidence_threshold=args.confidence,
            scheduler=args.scheduler,
            scheduler_options={"max_draft": args.max_draft},
        )
        dt = time.perf_counter() - t0
        if stream is not None:
            sys.stdout.write(stream.flush() + "\n")
    except Ds4rtError as e:
        print(f"ds4-cli: error: {e}", file=sys.stderr)
        return 1
    if dspark is not None and args.stats:
        print(session.spec_stats_line(), file=sys.stderr)
    if dspark is not None and args.stats_json:
        json.dump(session.spec_stats(), sys.stderr)
        sys.stderr.write("\n")
    if args.json:
        text = model.detokenize(out) if model.tokenizer else None
        rec = {"model": path, "prompt_ids": prompt, "ids": out, "text": text, "seconds": dt}
        json.dump(rec, sys.stdout, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        if stream is None:  # no tokenizer in the file: show the ids
            print(",".join(str(t) for t in out))
        print(
            f"ds4-cli: {len(prompt)} prompt + {len(out)} generated tokens in {dt:.3f} s",
            file=sys.stderr,
        )
    return 0
