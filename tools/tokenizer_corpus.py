"""A deterministic, varied text set for testing and benchmarking the tokenizer.

Everything is built from the strings below and seeded generators, so every run sees the same
texts. `corpus()` gives (name, text) pairs: prose in many languages, source code, emoji, digits
of every length, whitespace runs, samples of every Unicode category in several contexts, CJK /
kana boundaries, combining marks, control characters and added-token strings.
`invalid_utf8_cases()` gives byte strings that are not valid UTF-8. `stress_inputs()` gives the
1 MB pathological inputs. `mixed_text(n)` gives n bytes of mixed text for benchmarks.
"""

from __future__ import annotations

import functools
import glob
import os
import random
import sys
import sysconfig
import unicodedata

PROSE = {
    "english": (
        "The old lighthouse keeper climbed the spiral stairs every evening at dusk. He counted "
        "the steps -- one hundred and twelve -- and wondered, as always, who had built them. "
        "It's a question nobody could answer; the records were lost in the fire of 1887. "
        "\"We'll never know,\" he'd say, and then he'd light the lamp.\n\n"
        "Dr. O'Neil's café opened at 7:30 a.m. (sharp!), serving crème brûlée & naïve jokes. "
        "E-mail: keeper@example.org; URL: https://example.org/a_b-c?d=1&e=%20f#top\n"
    ),
    "italian": (
        "Nel mezzo del cammin di nostra vita mi ritrovai per una selva oscura: così comincia "
        "il poema. Perché l'autore scelse quell'immagine? Forse perché è universale. "
        "Più tardi, all'università, ne discutemmo per ore; c'è chi dice che sia un'allegoria.\n"
        "«Andiamo!» disse Lucia — e tutti uscirono sotto la pioggia d'autunno.\n"
    ),
    "chinese": (
        "我们今天去公园散步，天气非常好。孩子们在草地上奔跑，老人们坐在长椅上聊天。"
        "“你吃饭了吗？”她问道。我回答说：“还没有，等一会儿再吃。”\n"
        "机器学习（Machine Learning）是人工智能的一个分支，2023年发展迅速。"
        "第一章：引言；第二章：方法。价格为￥128.50元，折扣百分之二十。\n"
    ),
    "japanese": (
        "東京は日本の首都です。毎日たくさんの人が電車で通勤しています。"
        "「おはようございます」と彼は言った。コーヒーを一杯ください。\n"
        "カタカナとひらがな、そして漢字が混ざっています。ｶﾀｶﾅ（半角）もあります。"
        "ラーメンは800円でした！すごく美味しかったです。\n"
    ),
    "russian": (
        "Москва — столица России. Зимой здесь бывает очень холодно, а летом — жарко. "
        "«Где ты был вчера?» — спросила она. Он ответил: «Дома, читал книгу».\n"
        "В 2024 году было опубликовано 1 234 567 статей; ёлка, съезд, объём.\n"
    ),
    "arabic": (
        "اللغة العربية هي إحدى أكثر اللغات انتشاراً في العالم. "
        "يتحدث بها أكثر من ٤٠٠ مليون شخص. "
        "قال المعلم: «اقرأ الكتاب، ثم اكتب ملخصاً». "
        "السَّلَامُ عَلَيْكُمْ وَرَحْمَةُ اللهِ.\n"
    ),
    "korean": "안녕하세요! 오늘 날씨가 정말 좋네요. 한국어는 한글로 씁니다. ㄱㄴㄷ ㅏㅓㅗ\n",
    "hindi": "नमस्ते, आप कैसे हैं? हिन्दी देवनागरी लिपि में लिखी जाती है। संख्या: १२३४५\n",
    "greek": "Η Ελλάδα είναι χώρα της νοτιοανατολικής Ευρώπης. Ω, τι ωραία μέρα! ΑΒΓΔ αβγδ ς\n",
    "hebrew": "שלום עולם! עברית נכתבת מימין לשמאל. בְּרֵאשִׁית בָּרָא\n",
    "thai": "ภาษาไทยเป็นภาษาที่ไม่มีการเว้นวรรคระหว่างคำ สวัสดีครับ ๑๒๓\n",
    "vietnamese": "Tiếng Việt có nhiều dấu thanh: à á ả ã ạ, ư ơ đ. Xin chào các bạn!\n",
    "german": "Die Straße ist naß. Größere Übungen für Äpfel und Öl — Grüße aus München!\n",
    "mixed": (
        "Mixing scripts: English, 中文, 日本語, Русский, العربية, हिन्दी in one line. "
        "Prices: $5, €7,50, £3, ¥100, ₹250, ₿0.001. Math: ∑x² ≤ ∫f(x)dx ≠ ∞ ± √2 × π ÷ 3.\n"
        "Arrows ← ↑ → ↓ ⇒ and boxes ┌─┐ │ └─┘ and stars ★☆ and checks ✓✗.\n"
    ),
}

CODE = {
    "python": (
        "import os\nfrom typing import Optional\n\n\nclass Cache:\n"
        '    """A tiny LRU cache."""\n\n    def __init__(self, size: int = 128) -> None:\n'
        "        self.size = size\n        self._d: dict[str, bytes] = {}\n\n"
        "    def get(self, key: str) -> Optional[bytes]:\n"
        "        if key not in self._d:\n            return None\n"
        "        value = self._d.pop(key)\n        self._d[key] = value  # move to end\n"
        "        return value\n\n\nif __name__ == '__main__':\n"
        '    c = Cache(size=0x10)\n    print(f"{c.size=} {1_000_000:,}")\n'
    ),
    "c": (
        "#include <stdio.h>\n#include <stdint.h>\n\n"
        "static uint32_t hash(const char *s) {\n    uint32_t h = 2166136261u;\n"
        "    while (*s) { h ^= (uint8_t)*s++; h *= 16777619u; }\n    return h;\n}\n\n"
        "int main(int argc, char **argv) {\n\tfor (int i = 1; i < argc; i++)\n"
        '\t\tprintf("%s -> %08x\\n", argv[i], hash(argv[i]));\n\treturn 0;\n}\n'
    ),
    "javascript": (
        "const fetchJSON = async (url, { retries = 3 } = {}) => {\n"
        "  for (let i = 0; i < retries; ++i) {\n    try {\n"
        "      const res = await fetch(url);\n"
        "      if (!res.ok) throw new Error(`HTTP ${res.status}`);\n"
        "      return await res.json();\n    } catch (e) {\n      console.warn(e?.message ?? e);\n"
        "    }\n  }\n  return null;\n};\nexport default fetchJSON;\n"
    ),
    "rust": (
        "use std::collections::HashMap;\n\n#[derive(Debug, Clone)]\npub struct Vocab<'a> {\n"
        "    ids: HashMap<&'a str, u32>,\n}\n\nimpl<'a> Vocab<'a> {\n"
        "    pub fn get(&self, s: &str) -> Option<u32> { self.ids.get(s).copied() }\n}\n"
        "fn main() -> Result<(), Box<dyn std::error::Error>> {\n"
        '    let v: Vec<_> = (0..10).map(|x| x * x).collect();\n    println!("{:?}", v);\n'
        "    Ok(())\n}\n"
    ),
    "go": (
        'package main\n\nimport (\n\t"fmt"\n\t"strings"\n)\n\nfunc main() {\n'
        '\twords := strings.Fields("the quick  brown\\tfox")\n\tfor i, w := range words {\n'
        '\t\tfmt.Printf("%d: %q\\n", i, w)\n\t}\n}\n'
    ),
    "sql": (
        "SELECT u.id, u.name, COUNT(o.id) AS n_orders\nFROM users u\n"
        "LEFT JOIN orders o ON o.user_id = u.id\nWHERE u.created_at >= '2024-01-01'\n"
        "GROUP BY u.id, u.name\nHAVING COUNT(o.id) > 5\nORDER BY n_orders DESC;\n"
    ),
    "html": (
        '<!DOCTYPE html>\n<html lang="en">\n'
        '<head><meta charset="utf-8"><title>T&amp;C</title></head>\n'
        "<body>\n  <div class=\"a b\" id='x'>&lt;hello&gt; &nbsp; &#128512;</div>\n"
        "  <script>if (a < b && c > d) { x = 1; }</script>\n</body>\n</html>\n"
    ),
    "shell": (
        "#!/usr/bin/env bash\nset -euo pipefail\nfor f in *.txt; do\n"
        '  n=$(wc -l < "$f")\n  echo "${f%.txt}: $n lines" >&2\ndone\n'
        "grep -rn 'TODO\\|FIXME' src/ | sort -u | head -n 20\n"
    ),
    "json": (
        '{\n  "name": "ds4rt",\n  "version": "0.1.0",\n  "values": [1, 2.5, -3e10, true, null],\n'
        '  "nested": {"a": {"b": {"c": "\\u00e9\\n"}}},\n  "empty": {}\n}\n'
    ),
    "yaml_make": (
        "build:\n  - name: compile\n    run: |\n      make -j$(nproc) CFLAGS='-O2 -Wall'\n"
        "all: lib.so\n\nlib.so: a.o b.o\n\t$(CC) -shared -o $@ $^\n\n"
        "%.o: %.c\n\t$(CC) -c $< -o $@\n"
    ),
    "latex": (
        "\\begin{equation}\n  E = mc^2 \\quad \\text{and} \\quad "
        "\\sum_{i=1}^{n} i = \\frac{n(n+1)}{2}\n"
        "\\end{equation}\n"
    ),
}

EMOJI = [
    "😀😃😄😁",
    "👨‍👩‍👧‍👦 family",
    "👩🏽‍💻 coder",
    "🏳️‍🌈 flag",
    "🇮🇹🇯🇵🇺🇸",
    "1️⃣ #️⃣ *️⃣",
    "❤️ ❤ ♥️",
    "👍🏻👍🏼👍🏽👍🏾👍🏿",
    "🧑‍🤝‍🧑 a🤖b 🫠🫡",
    "text😀text 😀 text",
    "\u200d\u200d solo ZWJ \u200c ZWNJ \ufe0f VS16 \ufeff BOM",
]

ADDED_SAMPLES = [
    "<｜User｜>hi<think>",
    "<｜begin▁of▁sentence｜><｜User｜>Hello<｜Assistant｜></think>",
    "<think>reasoning</think>answer<｜end▁of▁sentence｜>",
    "a<think>b</think>c",
    "<｜User｜<｜User｜>｜>",
    "<<think>>",
    "<｜User｜><｜User｜><｜User｜>",
    "<｜Use",
    '｜DSML｜invoke name="f"｜DSML｜',
    "<｜/table>｜DSML｜",
    "<｜place▁holder▁no▁799｜> noise",
    "<|EOT|> end",
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>x<｜tool▁call▁end｜>",
    " <think> spaced </think> ",
    "\n<｜User｜>\n",
    "<dsml:foo></dsml:foo>",
    "<｜fim▁begin｜>def f():<｜fim▁hole｜><｜fim▁end｜>",
]


def _digits() -> list[tuple[str, str]]:
    out = []
    rng = random.Random(1)
    for n in range(1, 13):
        d = "".join(rng.choice("0123456789") for _ in range(n))
        for ctx in ("{}", "x{}y", " {} ", "a {}.", "({})", "{}%", "-{}", "v{}.{}"):
            out.append((f"digits{n}", ctx.format(d, d)))
    others = "٠١٢٣٤٥٦٧٨٩ ۱۲۳ १२३ ০১২ ๑๒๓ １２３４ ²³¹ ½¼¾ ⅠⅡⅫ ⑴⑵ ①②③ 〇 𝟎𝟏𝟐 ๐"
    out.append(("digits-other-scripts", others))
    out.append(
        ("digits-mixed", "abc123def4567ghi89012jk 3.14159 1e-10 0xFF 1,234,567.89 2024-05-06")
    )
    return out


WS_CHARS = [" ", "\t", "\n", "\r", "\x0b", "\x0c", "\x85", "\u00a0", "\u2028", "\u3000", "\u2003"]


def _whitespace() -> list[tuple[str, str]]:
    out = []
    rng = random.Random(2)
    fixed = ["  ", "\t", "\n", "\r\n", " \n", "\n ", " \t", "\t ", "\n\n", " \r\n "]
    for n in range(1, 21):
        runs = [" " * n, "\t" * n, "\n" * n, "\r\n" * (n // 2 + 1)]
        runs += [(fixed[k] * n)[:n] for k in range(len(fixed))]
        runs += ["".join(rng.choice(WS_CHARS[:4]) for _ in range(n)) for _ in range(3)]
        runs += ["".join(rng.choice(WS_CHARS) for _ in range(n)) for _ in range(2)]
        for i, r in enumerate(runs):
            ctx = ("a{}b", "{}x", "x{}", "{}", "1{}2", "!{}?", "中{}文", "a{}\n", "{}😀")[i % 9]
            out.append((f"ws{n}-{i}", ctx.format(r)))
            out.append((f"ws{n}-{i}-end", "word" + r))
    return out


def _categories() -> list[tuple[str, str]]:
    """Samples of every general category (stdlib unicodedata) in several contexts."""
    by_cat: dict[str, list[str]] = {}
    for cp in range(0x110000):
        if 0xD800 <= cp < 0xE000:
            continue
        by_cat.setdefault(unicodedata.category(chr(cp)), []).append(chr(cp))
    out = []
    rng = random.Random(3)
    contexts = [
        "{}",
        "a{}",
        "{}a",
        " {}",
        "{} ",
        "1{}",
        "{}1",
        "!{}",
        "{}!",
        "{}{}",
        "\n{}",
        "中{}",
    ]
    for cat in sorted(by_cat):
        chars = by_cat[cat]
        picks = chars[:3] + chars[-3:] + rng.sample(chars, min(24, len(chars)))
        text = "".join(rng.choice(contexts).format(c, c) for c in picks)
        out.append((f"category-{cat}", text))
    return out


def _cjk_boundaries() -> list[tuple[str, str]]:
    edges = [
        0x4DFF,
        0x4E00,
        0x4E01,
        0x9FA4,
        0x9FA5,
        0x9FA6,
        0x9FFF,
        0x303F,
        0x3040,
        0x3041,
        0x3099,
        0x309B,
        0x309F,
        0x30A0,
        0x30FB,
        0x30FC,
        0x30FF,
        0x3100,
        0xFF66,
        0x3005,
    ]
    out = []
    chars = [chr(c) for c in edges]
    out.append(("cjk-edges", "".join(chars)))
    out.append(("cjk-edges-spaced", " ".join(chars)))
    out.append(("cjk-mixed", "漢字abc漢字123漢字 漢字!漢字\n漢字ー〜カナ、。「かな」"))
    out.append(("cjk-latin", "".join(c + "x" for c in chars)))
    return out


COMBINING = [
    "e\u0301 e\u0301\u0302\u0303 \u0301start",
    " \u0301 1\u0301 !\u0301 a\u0301b",
    "Z\u0351\u0358\u036b\u0309a\u0334\u0324l\u0315g\u0329o\u0337",
    "क्षत्रिय हिन्दी ि ी",
    "\u1100\u1161\u11a8 한글",
    "\u0e01\u0e34\u0e48 \u0e31",
    "a\u20dd \u20e3 \u0488\u0489",
]


def _controls() -> list[tuple[str, str]]:
    c0 = "".join(chr(c) for c in range(0x20))
    c1 = "".join(chr(c) for c in range(0x7F, 0xA0))
    return [
        ("controls-c0", c0),
        ("controls-c1", c1),
        ("controls-mixed", "a\x00b\x01 c\x1b[31mred\x1b[0m\x7f\x1c\x1d\x1e\x1f end"),
        ("controls-in-words", "".join(f"w{chr(c)}x " for c in range(0x20))),
        ("nul", "\x00"),
        ("private-use", "\ue000\uf8ff \U000f0000 a\ue000b"),
        ("unassigned", "\u0378 \U0001fffe \U0010ffff a\u0378b"),
        ("noncharacters", "\ufdd0\ufffe\uffff"),
        ("tags", "\U000e0001\U000e0041\U000e007f"),
        ("format", "a\u00adb \u200b \u2060 \u061c \u200e\u200f"),
    ]


@functools.cache
def corpus() -> tuple[tuple[str, str], ...]:
    """The whole text set: (name, text) pairs."""
    items: list[tuple[str, str]] = []
    items += [(f"prose-{k}", v) for k, v in PROSE.items()]
    items += [(f"code-{k}", v) for k, v in CODE.items()]
    items += [(f"emoji-{i}", v) for i, v in enumerate(EMOJI)]
    items += [(f"added-{i}", v) for i, v in enumerate(ADDED_SAMPLES)]
    items += _digits()
    items += _whitespace()
    items += _categories()
    items += _cjk_boundaries()
    items += [(f"combining-{i}", v) for i, v in enumerate(COMBINING)]
    items += _controls()
    items += [("empty", ""), ("one-space", " "), ("one-newline", "\n"), ("one-letter", "a")]
    return tuple(items)


def invalid_utf8_cases() -> list[tuple[str, bytes]]:
    """Byte strings that are not valid UTF-8 (each with valid text around)."""
    bad = [
        b"\x80",
        b"\xbf\x80",
        b"\xc0\x80",
        b"\xc1\xbf",
        b"\xe0\x80\x80",
        b"\xe0\x9f\xbf",
        b"\xed\xa0\x80",
        b"\xed\xbf\xbf",
        b"\xf0\x80\x80\x80",
        b"\xf4\x90\x80\x80",
        b"\xf5\x80\x80\x80",
        b"\xff\xfe",
        b"\xe4\xbd",
        b"\xf0\x9f\x98",
        b"\xc3",
        b"\xe4\xbd\xe4\xbd\xa0",
        b"\xf0\x9f\x98\x80\x80",
        b"\xc3\x28",
        b"\xe2\x28\xa1",
        b"\xf8\x88\x80\x80\x80",
    ]
    out = []
    for i, b in enumerate(bad):
        for ctx in (b"%s", b"a%sb", b" %s ", b"%s\xe4\xbd\xa0", b"1%s2", b"<think>%s"):
            out.append((f"invalid-{i}-{ctx!r}", ctx.replace(b"%s", b)))
    rng = random.Random(4)
    for i in range(20):
        out.append((f"invalid-random-{i}", bytes(rng.randrange(256) for _ in range(64))))
    return out


def stdlib_sources(limit: int | None = None) -> list[tuple[str, str]]:
    """Top-level .py files of this Python's standard library: all, or `limit` of them evenly
    spaced in name order."""
    libdir = sysconfig.get_paths()["stdlib"]
    files = sorted(glob.glob(os.path.join(libdir, "*.py")))
    if limit is not None and limit < len(files):
        files = [files[i * len(files) // limit] for i in range(limit)]
    out = []
    for f in files:
        with open(f, encoding="utf-8", errors="replace") as fh:
            out.append((f"stdlib-{os.path.basename(f)}", fh.read()))
    return out


def stress_inputs(size: int = 1 << 20) -> list[tuple[str, str]]:
    """Pathological inputs of `size` characters (about 1 MB)."""
    rng = random.Random(5)
    letters = "abcdefghijklmnopqrstuvwxyz"
    return [
        ("letters-no-spaces", "".join(rng.choice(letters) for _ in range(size))),
        ("one-letter-repeated", "a" * size),
        ("spaces", " " * size),
        ("newlines", "\n" * size),
        ("space-newline", " \n" * (size // 2)),
        ("tabs-then-letter", "\t" * size + "x"),
        ("digits", "".join(rng.choice("0123456789") for _ in range(size))),
        ("punctuation", "".join(rng.choice("!?.,;:-_()[]{}<>") for _ in range(size))),
        ("cjk", "".join(chr(rng.randrange(0x4E00, 0x9FA6)) for _ in range(size // 3))),
        ("emoji-zwj", "👨\u200d👩\u200d👧" * (size // 18)),
        ("marker-prefixes", "<｜" * (size // 4)),
    ]


def mixed_text(n_bytes: int = 1 << 20) -> str:
    """About n_bytes of mixed text: prose of every language, code, emoji and stdlib source,
    interleaved in a fixed pseudo-random order, cut at a character boundary."""
    rng = random.Random(6)
    parts = list(PROSE.values()) + list(CODE.values()) + EMOJI
    sources = [t for _, t in stdlib_sources()]
    out, size = [], 0
    while size < n_bytes:
        if rng.random() < 0.5 and sources:
            src = rng.choice(sources)
            start = rng.randrange(max(1, len(src) - 4000))
            piece = src[start : start + rng.randrange(500, 4000)]
        else:
            piece = rng.choice(parts)
        out.append(piece)
        size += len(piece.encode("utf-8"))
    return "".join(out).encode("utf-8")[:n_bytes].decode("utf-8", "ignore")


if __name__ == "__main__":
    total = sum(len(t.encode("utf-8")) for _, t in corpus())
    print(f"{len(corpus())} texts, {total} bytes; Python {sys.version.split()[0]}")
