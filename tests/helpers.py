"""What many test files need: running the `lmbench` command line in-process, and text corpora written
as the three files of `--corpus text`.

The cache every command writes to is the session's temporary folder (tests/conftest.py), never the
user's; a test that wants a cache of its own sets LMBENCH_CACHE itself.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from lmbench_cli import main

SPLITS = ("train", "valid", "test")


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """`lmbench ARGV` in this process: its exit code, stdout and stderr."""
    code = main([str(word) for word in argv])
    out, err = capsys.readouterr()
    return code, out, err


def write_splits(folder: Path, **texts: str | bytes) -> dict[str, Path]:
    """Each text written as folder/<split>.txt (bytes as they are); returns split -> path."""
    paths = {}
    for split, text in texts.items():
        paths[split] = Path(folder) / f"{split}.txt"
        paths[split].write_bytes(text if isinstance(text, bytes) else text.encode())
    return paths


def corpus_args(paths: dict[str, Path]) -> list[str]:
    """The options that load the files of `write_splits` as the text corpus."""
    return ["--corpus", "text", *[word for split in SPLITS for word in (f"--{split}", str(paths[split]))]]


def chain_text(tokens: int, seed: int, words: int = 80, successors: int = 4) -> str:
    """A stream from a fixed random Markov chain over `words` words w0, w1, ..., each allowing
    `successors` next words, chosen uniformly (a bigram model's perplexity is about `successors`, a
    unigram's near `words`); the chain is the same for every seed, the walk differs."""
    names = np.array([f"w{i}" for i in range(words)])
    table = np.random.default_rng(0).integers(0, words, size=(words, successors))
    choices = np.random.default_rng(seed).integers(0, successors, size=tokens)
    stream = np.zeros(tokens, dtype=int)
    for t in range(1, tokens):
        stream[t] = table[stream[t - 1], choices[t]]
    return " ".join(names[stream]) + "\n"


def zipf_text(length: int, types: int, seed: int) -> str:
    """Words w0 .. w{types-1} drawn independently from a Zipf law."""
    rng = np.random.default_rng(seed)
    p = 1 / np.arange(1, types + 1)
    ids = rng.choice(types, size=length, p=p / p.sum())
    return " ".join(f"w{i}" for i in ids)


def markov_text(length: int, types: int, seed: int) -> str:
    """A first-order Markov source over `types` words with 3 likely successors each, plus 15% words
    drawn from a Zipf law over 20 times as many: repeated trigrams and 4-grams, and a long tail of
    rare words, as in real text."""
    rng = np.random.default_rng(seed)
    successors = rng.integers(0, types, size=(20 * types, 3))
    zipf = 1 / np.arange(1, 20 * types + 1)
    rare = rng.choice(20 * types, size=length, p=zipf / zipf.sum())
    jump = rng.random(length) < 0.15
    pick = rng.choice(3, size=length, p=[0.6, 0.3, 0.1])
    words = [0]
    for t in range(1, length):
        words.append(int(rare[t]) if jump[t] else int(successors[words[-1], pick[t]]))
    return " ".join(f"w{i}" for i in words)


def random_text(seed: int, n: int, words: str = "abcdefghij") -> str:
    """A bigram chain over the letters of `words` with structure: word i tends to be followed by
    i + 1 or i + 3."""
    rng = np.random.default_rng(seed)
    letters = np.array(list(words))
    ids = [0]
    for _ in range(n - 1):
        step = rng.choice([1, 3, int(rng.integers(10))], p=[0.5, 0.3, 0.2])
        ids.append((ids[-1] + step) % len(letters))
    return " ".join(letters[ids])


def close(found, expected, rel: float) -> bool:
    """`found` is `expected` with every float within `rel` of it (relative; floats under 1 absolute), and every
    other value (strings, verdicts, integers, keys, lengths) exactly: for figures recomputed through numpy or
    torch reductions, whose last bits move with the machine's vector units (AVX2 against AVX-512)."""
    if isinstance(expected, float) or isinstance(found, float):
        if not isinstance(found, (int, float)) or not isinstance(expected, (int, float)):
            return False
        return found == expected or abs(found - expected) <= rel * max(1.0, abs(expected))
    if isinstance(expected, dict):
        return (isinstance(found, dict) and found.keys() == expected.keys()
                and all(close(found[k], expected[k], rel) for k in expected))
    if isinstance(expected, (list, tuple)):
        return (isinstance(found, (list, tuple)) and len(found) == len(expected)
                and all(close(a, b, rel) for a, b in zip(found, expected)))
    return found == expected


def quick_work_folder(root: Path) -> dict:
    """A quick `reproduce text` of every n-gram row, MLP1 and the LSTM into root/runs/mine-quick, its corpus
    files in root/corpus/ and its report in root/report/: {"root", "work", "rows" (results.json's, by id),
    "texts" (each split's text), "command" (the arguments that ran it)}."""
    (root / "corpus").mkdir()
    files = write_splits(root / "corpus", train=chain_text(5000, 21), valid=chain_text(700, 22), test=chain_text(700, 23))
    work = root / "runs" / "mine-quick"
    command = ["reproduce", "text", "--quick", "--name", "mine", *corpus_args(files)[2:], "--networks", "mlp1,lstm",
               "--work-dir", str(work), "--report-dir", str(root / "report"), "--threads", "1"]
    assert main(command) == 0
    rows = {row["id"]: row for row in json.loads((root / "report" / "results.json").read_text())["rows"]}
    texts = {split: path.read_text() for split, path in files.items()}
    return {"root": root, "work": work, "rows": rows, "texts": texts, "command": command}


def copied_work_folder(folder: dict, tmp_path: Path) -> dict:
    """A copy of a `quick_work_folder` in tmp_path, and the command that runs it again (its report there too):
    {"work", "command", "report" (its results.json)}."""
    work = tmp_path / "runs" / "mine-quick"
    shutil.copytree(folder["work"], work)
    command = [*folder["command"]]
    command[command.index("--work-dir") + 1] = str(work)
    command[command.index("--report-dir") + 1] = str(tmp_path / "report")
    return {"work": work, "command": command, "report": tmp_path / "report" / "results.json"}
