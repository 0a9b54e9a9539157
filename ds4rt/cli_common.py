"""What the generation and chat modes of ds4-cli share: options, ds4's environment knobs,
llama.cpp flags ds4rt spells differently, loading with a progress bar and details, and the
turning of every user error into one line on stderr (docs/CLI.md)."""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any

from . import data
from .dspark import SCHEDULERS, DSpark
from .generation import GenerationOptions, SchedulerOptions
from .model import BACKENDS, CACHE_POLICIES, LOAD_MODES, NUMERICS, Model

INT32_MAX = 2**31 - 1
UINT64_MAX = 2**64 - 1

# Exit statuses: 1 a runtime error (bad file, ...), 2 a usage error, 128 + signal number for
# Ctrl-C (SIGINT) and a closed output pipe (SIGPIPE), as shells report a process they killed.
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141


class UsageError(Exception):
    """A mistake on the command line: printed as "ds4-cli: error: ..." with exit status 2."""


def int_in(lo: int, hi: int, what: str = "") -> Callable[[str], int]:
    """An argparse type: an integer in [lo, hi] (the range of the C field it fills)."""

    def parse(text: str) -> int:
        try:
            v = int(text, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not lo <= v <= hi:
            extra = f" ({what})" if what else ""
            raise argparse.ArgumentTypeError(f"{v} is outside [{lo}, {hi}]{extra}")
        return v

    parse.__name__ = "integer"
    return parse


def float_in(lo: float, hi: float) -> Callable[[str], float]:
    """An argparse type: a finite number in [lo, hi]."""

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(v) or not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"{text} is outside [{lo:g}, {hi:g}]")
        return v

    parse.__name__ = "number"
    return parse


def seed_arg(text: str) -> int:
    """--seed: -1 (random, as llama.cpp users type it) or an unsigned 64-bit seed."""
    v = int_in(-1, UINT64_MAX, "-1 picks a random seed")(text)
    return v


# llama.cpp options with no ds4rt counterpart of the same name: what to use instead. Checked
# before parsing, so `-ngl 99` says this rather than "unrecognized arguments".
LLAMA_CPP_FLAGS: dict[str, str] = {
    "-ngl": "ds4rt runs the whole model on one backend: use --backend cuda|hip (and --device N)",
    "--n-gpu-layers": "ds4rt runs the whole model on one backend: use --backend cuda|hip",
    "--gpu-layers": "ds4rt runs the whole model on one backend: use --backend cuda|hip",
    "-sm": "ds4rt uses one device: pick it with --device N",
    "--split-mode": "ds4rt uses one device: pick it with --device N",
    "-ts": "ds4rt uses one device: pick it with --device N",
    "--tensor-split": "ds4rt uses one device: pick it with --device N",
    "-mg": "use --device N",
    "--main-gpu": "use --device N",
    "-fa": "ds4rt's attention has one implementation; there is nothing to switch",
    "--flash-attn": "ds4rt's attention has one implementation; there is nothing to switch",
    "--mlock": "ds4rt maps the file read-only and lets the OS page it; there is no --mlock",
    "--no-mmap": "ds4rt always maps the model file (the weights are read in place)",
    "-ctk": "the KV cache layout is the model's own (docs/MODEL.md); there is nothing to set",
    "--cache-type-k": "the KV cache layout is the model's own (docs/MODEL.md)",
    "-ctv": "the KV cache layout is the model's own (docs/MODEL.md)",
    "--cache-type-v": "the KV cache layout is the model's own (docs/MODEL.md)",
    "-cnv": "for a conversation run `ds4-cli chat`",
    "--conversation": "for a conversation run `ds4-cli chat`",
    "-i": "for a conversation run `ds4-cli chat`",
    "--interactive": "for a conversation run `ds4-cli chat`",
    "-if": "for a conversation run `ds4-cli chat`",
    "--interactive-first": "for a conversation run `ds4-cli chat`",
    "-no-cnv": "ds4-cli's generation mode is one-shot already (`ds4-cli chat` converses)",
    "--no-conversation": "ds4-cli's generation mode is one-shot already",
    "-md": "a DSpark support model drafts: --support FILE --dspark",
    "--model-draft": "a DSpark support model drafts: --support FILE --dspark",
    "--draft": "drafts per cycle: --max-draft N",
    "--draft-max": "drafts per cycle: --max-draft N",
    "--draft-n": "drafts per cycle: --max-draft N",
    "--repeat-penalty": "ds4rt samples with temperature, top-k, top-p and min-p only",
    "--repeat-last-n": "ds4rt samples with temperature, top-k, top-p and min-p only",
    "--presence-penalty": "ds4rt samples with temperature, top-k, top-p and min-p only",
    "--frequency-penalty": "ds4rt samples with temperature, top-k, top-p and min-p only",
    "--mirostat": "ds4rt samples with temperature, top-k, top-p and min-p only",
    "--typical": "ds4rt samples with temperature, top-k, top-p and min-p only",
    "-hf": "ds4rt reads local files: download the GGUF, then -m FILE",
    "--hf-repo": "ds4rt reads local files: download the GGUF, then -m FILE",
}


def check_llama_cpp_flags(argv: Sequence[str], parser: argparse.ArgumentParser) -> None:
    """UsageError naming the ds4rt way for the first llama.cpp-only option in argv (values of
    ds4-cli's own options, such as a prompt "-i", are not options)."""
    takes_value = {
        flag for action in parser._actions if action.nargs != 0 for flag in action.option_strings
    }
    skip = False
    for a in argv:
        if skip:
            skip = False
            continue
        if a == "--":
            return
        flag = a.split("=", 1)[0]
        if flag in LLAMA_CPP_FLAGS:
            raise UsageError(f"{flag} is a llama.cpp option; {LLAMA_CPP_FLAGS[flag]}")
        skip = a in takes_value


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model")
    g.add_argument("-m", "--model", help="target GGUF (default: the embedded tiny model)")
    g.add_argument("--numerics", choices=NUMERICS, default="official")
    g.add_argument("-t", "--threads", type=int_in(0, 4096), default=0, help="CPU threads (0: all)")
    g.add_argument(
        "-c",
        "--ctx",
        "--ctx-size",
        dest="ctx",
        type=int_in(1, 2**31, "tokens"),
        default=4096,
        help="context size in tokens (default 4096)",
    )
    g.add_argument(
        "-b",
        "--batch-size",
        dest="batch",
        type=int_in(1, 4096),
        default=None,
        help="tokens per forward pass (default 32, or the DSpark block + 1 if larger)",
    )
    g.add_argument("--backend", choices=BACKENDS, default="auto", help="where the model runs")
    g.add_argument("--device", type=int_in(0, INT32_MAX), default=0, help="GPU ordinal")
    g.add_argument(
        "--cache",
        choices=CACHE_POLICIES,
        default=None,
        help="Q8->F16 expansion cache policy (default auto; DS4_CUDA_NO_Q8_F16_CACHE=1: off)",
    )
    g.add_argument(
        "--load",
        choices=LOAD_MODES,
        default="map",
        help="map the model file (default; it must not change while in use) or copy it into memory",
    )
    g.add_argument("-v", "--verbose", action="store_true", help="print load details to stderr")


def add_sampling_arguments(p: argparse.ArgumentParser, *, n_default: int) -> None:
    g = p.add_argument_group("generation")
    g.add_argument(
        "-n",
        "--n-predict",
        type=int_in(-1, INT32_MAX, "-1: until end of text or a full context"),
        default=n_default,
        help=f"tokens to generate; -1: until end of text or a full context (default {n_default})",
    )
    g.add_argument("--temp", type=float_in(0.0, 1e6), default=0.0, help="0 = greedy (default)")
    g.add_argument("--top-k", type=int_in(0, INT32_MAX), default=0, help="0 = off")
    g.add_argument("--top-p", type=float_in(1e-9, 1.0), default=1.0, help="1 = off")
    g.add_argument("--min-p", type=float_in(0.0, 1.0), default=0.0, help="0 = off")
    g.add_argument(
        "-s", "--seed", type=seed_arg, default=-1, help="sampler seed; -1: random (default)"
    )
    g.add_argument(
        "--stop",
        "-r",
        "--reverse-prompt",
        dest="stop",
        action="append",
        default=[],
        metavar="TEXT",
        help="stop when the text reaches TEXT (repeatable; TEXT is not printed)",
    )
    g.add_argument(
        "--ignore-eos", action="store_true", help="do not stop at the end-of-sequence token"
    )
    g.add_argument(
        "--special", action="store_true", help="print control tokens (BOS, EOS) in the text"
    )
    g.add_argument("--system", help="system text (chat template)")
    g.add_argument("--think", action="store_true", help="thinking mode (chat template)")


def add_dspark_arguments(p: argparse.ArgumentParser) -> None:
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
        type=float_in(0.0, 1.0),
        default=0.5,
        help="confidence threshold in [0, 1]; 0 disables pruning (default 0.5)",
    )
    d.add_argument(
        "--scheduler",
        choices=SCHEDULERS,
        default=None,
        help="adaptive (default), always, off (DS4_DSPARK_SCHEDULER=0: always)",
    )
    d.add_argument(
        "--max-draft", type=int_in(0, 16), default=0, help="drafts per cycle (0: the block size)"
    )
    d.add_argument(
        "--stats",
        action="store_true",
        help="print the speculative stats line at the end (DS4_DSPARK_STATS=1)",
    )
    d.add_argument("--stats-json", action="store_true", help="print the stats as JSON at the end")
    d.add_argument(
        "--schedule-log",
        metavar="FILE",
        default=None,
        help="write the scheduler's plan of every speculative cycle and why (JSON lines)",
    )


def env_on(name: str) -> bool:
    """ds4's reading of a switch: set, non-empty and not "0"."""
    v = os.environ.get(name)
    return v is not None and v not in ("", "0")


def apply_environment(args: argparse.Namespace) -> None:
    """ds4's environment knobs, where the command line did not decide (docs/CLI.md)."""
    if getattr(args, "cache", None) is None:
        args.cache = "off" if env_on("DS4_CUDA_NO_Q8_F16_CACHE") else "auto"
    if hasattr(args, "scheduler") and args.scheduler is None:
        off = os.environ.get("DS4_DSPARK_SCHEDULER") == "0"  # ds4's scheduler off: always draft
        args.scheduler = "always" if off else "adaptive"
    if hasattr(args, "stats") and env_on("DS4_DSPARK_STATS"):
        args.stats = True


def generation_options(args: argparse.Namespace) -> GenerationOptions:
    try:
        return GenerationOptions(
            max_tokens=args.n_predict,
            temperature=args.temp,
            top_k=args.top_k,
            top_p=args.top_p,
            min_p=args.min_p,
            seed=args.seed,
            stop_at_eos=not args.ignore_eos,
            stop=tuple(args.stop),
            skip_special=not args.special,
            confidence_threshold=args.confidence,
            scheduler=SchedulerOptions(mode=args.scheduler, max_draft=args.max_draft),
        )
    except (TypeError, ValueError) as e:
        raise UsageError(str(e)) from None


def fmt_bytes(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


class ProgressBar:
    """A one-line bar on a terminal, redrawn at most ten times a second, erased at the end."""

    WIDTH = 30

    def __init__(self, out: IO[str], label: str):
        self.out = out
        self.label = label
        self.last = 0.0
        self.shown = False

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if self.shown and done < total and now - self.last < 0.1:
            return
        self.last = now
        frac = done / total if total else 1.0
        fill = int(frac * self.WIDTH)
        bar = "#" * fill + "-" * (self.WIDTH - fill)
        sizes = f"{fmt_bytes(done)} / {fmt_bytes(total)}"
        self.out.write(f"\r{self.label} [{bar}] {frac * 100:5.1f}% {sizes}\x1b[K")
        self.out.flush()
        self.shown = True

    def finish(self) -> None:
        if self.shown:
            self.out.write("\r\x1b[K")
            self.out.flush()
            self.shown = False


@dataclass
class Loaded:
    model: Model
    dspark: DSpark | None
    path: str


def _progress_for(label: str) -> ProgressBar | None:
    return ProgressBar(sys.stderr, label) if sys.stderr.isatty() else None


def load(args: argparse.Namespace) -> Loaded:
    """The target (and, with --dspark, the support model), with a progress bar when stderr is a
    terminal and, with -v, the details on stderr."""
    path = args.model or data.default_target()
    bar = _progress_for(f"loading {os.path.basename(path)}")
    try:
        model = Model(
            path,
            numerics=args.numerics,
            n_threads=args.threads,
            cache=args.cache,
            backend=args.backend,
            device=args.device,
            progress=bar,
            load=getattr(args, "load", "map"),
        )
    finally:
        if bar is not None:
            bar.finish()
    dspark = None
    if data.dspark_default(
        getattr(args, "model", None),
        getattr(args, "dspark", False),
        getattr(args, "no_dspark", False),
    ):
        support = args.support or (None if args.model else data.default_support())
        if support is None:
            model.close()
            raise UsageError("--dspark with -m needs --support FILE (the support model)")
        dspark = DSpark(model, support)
    elif getattr(args, "support", None):
        note("--support given without --dspark: decoding without speculation")
    if args.verbose:
        print_details(model, dspark, args)
    return Loaded(model, dspark, path)


def session_for(loaded: Loaded, args: argparse.Namespace) -> Any:
    block = loaded.dspark.block_size if loaded.dspark else 0
    batch = args.batch if args.batch is not None else max(32, block + 1)
    return loaded.model.session(n_ctx=args.ctx, max_batch=batch)


def print_details(model: Model, dspark: DSpark | None, args: argparse.Namespace) -> None:
    i = model.info
    mem = i["memory"]
    c = i["cache"]
    per_session = mem["state_fixed"] + mem["state_per_1k"] * args.ctx // 1024
    lines = [
        f"model {model.path}: {i['n_layer']} layers, n_embd {i['n_embd']}, n_vocab "
        f"{i['n_vocab']}, {i['n_expert']} experts ({i['n_expert_used']} used), "
        f"{fmt_bytes(i['file_bytes'])} on disk",
        f"backend {i['backend']}"
        + (f" (device {i['device']})" if i["device"] >= 0 else "")
        + f", {i['n_threads']} threads, numerics {i['numerics']}",
        f"memory: weights {fmt_bytes(mem['weights'])} ({fmt_bytes(mem['weights_owned'])} "
        f"copied, the rest read in place from the mapped file), session state "
        f"{fmt_bytes(mem['state_fixed'])} + {fmt_bytes(mem['state_per_1k'])} per 1k tokens "
        f"({fmt_bytes(per_session)} at -c {args.ctx}), scratch {fmt_bytes(mem['scratch'])}, "
        f"graphs {fmt_bytes(mem['graphs'])}",
        f"cache: {c['requested']} -> {'on' if c['active'] else 'off'}"
        + (f" ({c['reason']})" if c["reason"] else ""),
    ]
    if dspark is not None:
        d = dspark.info
        prior = d["acceptance_prior"]  # where the scheduler starts (docs/DSPARK.md, "Scheduler")
        lines.append(
            f"DSpark support {dspark.path}: {d['layout']} layout, {d['n_stages']} stages, "
            f"block {d['block_size']}, target layers {d['target_layers']}, "
            + (
                "acceptance prior " + " ".join(f"{a:.2f}" for a in prior)
                if prior
                else "no acceptance prior (the scheduler starts uninformed)"
            )
        )
    for line in lines:
        print(f"ds4-cli: {line}", file=sys.stderr)


def note(text: str) -> None:
    print(f"ds4-cli: note: {text}", file=sys.stderr)


def read_text_file(path: str) -> str:
    """A prompt file ("-": stdin) as text: UTF-8, one trailing newline dropped."""
    if path == "-":
        raw = sys.stdin.buffer.read()
        where = "stdin"
    else:
        with open(path, "rb") as f:
            raw = f.read()
        where = path
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"{where} is not UTF-8 text (byte {e.start})") from None
    return text[:-1] if text.endswith("\n") else text
