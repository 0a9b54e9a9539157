"""The fixed training text of the tiny tokenizer: English prose and a little code.

Written for this project and embedded here so that every machine trains on exactly the same bytes
(nothing is read from the Python installation or the network). Changing this text changes the
tiny vocabulary and therefore every generated model: treat it as frozen.
"""

TEXT = """\
The small model in this file is not trained on anything. Its weights are random numbers, drawn
from a generator with a fixed seed, and its vocabulary comes from a few paragraphs of plain text.
That is enough for a test: the shapes are right, the names are right, and every path through the
network is taken at least once. A runtime that reads this file and produces the same numbers as
an independent implementation has most of its plumbing in order.

Tokens are pieces of text. The tokenizer first splits a line into words, numbers, punctuation and
runs of spaces, and then merges bytes into longer pieces by following a ranked list of rules. The
rule with the lowest rank is applied first, again and again, until no rule matches any neighbouring
pair. Whatever is left is written as single bytes, so every string can be encoded and nothing is
ever lost when the tokens are decoded again.

When the assistant thinks, it writes its reasoning between two markers, and when it answers, it
writes the answer after the second marker. The user asks a question; the assistant reads the
question, thinks about it for a while, and then replies. A tool call is written with its own marker
so that the program around the model can find it, run the tool, and give the result back.

Speculative decoding guesses several tokens at once. A small drafter proposes a block of tokens, the
large target model checks the whole block in one pass, and every token that the target agrees with
is kept. When the guess is wrong, the state is rolled back to the last accepted token and the next
cycle starts from there. The output is exactly what the target alone would have written; only the
time it takes is different.

There are 24 hours in a day, 60 minutes in an hour and 3600 seconds in an hour. In 2026 the model
had 43 layers, 256 experts and a vocabulary of 129280 tokens; its hidden size was 4096 and its
window held 128 positions. Numbers such as 3.14159, 2.71828 and 1e-6 appear in the code below.

def rms_norm(x, weight, eps=1e-6):
    # Divide by the root mean square, then scale each feature.
    scale = 1.0 / math.sqrt(sum(v * v for v in x) / len(x) + eps)
    return [v * scale * w for v, w in zip(x, weight)]


def softmax(values):
    top = max(values)
    exps = [math.exp(v - top) for v in values]
    total = sum(exps)
    return [e / total for e in exps]


class Cache:
    \"\"\"Keeps the last rows of a sliding window and counts what was compressed.\"\"\"

    def __init__(self, window, width):
        self.window = window
        self.width = width
        self.rows = []
        self.compressed = 0

    def push(self, row):
        if len(row) != self.width:
            raise ValueError("row has the wrong width")
        self.rows.append(row)
        if len(self.rows) > self.window:
            self.rows.pop(0)

    def __len__(self):
        return len(self.rows)


int main(int argc, char **argv) {
    int count = 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-') {
            printf("option: %s\\n", argv[i]);
            continue;
        }
        count += 1;
    }
    return count > 0 ? 0 : 1;
}

Reading a file is simple: open it, check the magic number and the version, read the number of
tensors and the number of keys, and then read each key with its type. A key that is not needed is
skipped, but it must still be parsed, because the next key starts where this one ends. After the
keys come the tensor descriptions: a name, the number of dimensions, the size of each dimension,
the type, and the offset of the data. The data itself starts at the next aligned position.

Good tests are small, fast and honest. They compare against something that was written by someone
else, they say clearly what they check, and they fail loudly when something is wrong. A test that
always passes is worse than no test at all, because it makes people believe something that is not
true. If a check cannot run on this machine, the test says so and is skipped, and the reason is
printed where everyone can read it.
"""
