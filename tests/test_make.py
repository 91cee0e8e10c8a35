"""The Makefile's run targets pass every variable their comment documents to the command as its option
(`make -n`: the command printed, nothing run): `make compare REPORT_DIR=/tmp/x` writes there."""

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OPTIONS = {"TRAIN": "--train", "VALID": "--valid", "TEST": "--test", "CORPUS": "--corpus-file", "SPLIT": "--corpus-split",
           "NAME": "--name", "NETWORKS": "--networks", "ONLY": "--only", "MIN_COUNT": "--min-count",
           "VOCAB_SIZE": "--vocab-size", "QUICK": "--quick", "SEEDS": "--seeds", "SEEDS_FOR": "--seeds-for",
           "THREADS": "--threads", "MEMORY": "--memory", "TMP_DIR": "--tmp-dir", "REPORT_DIR": "--report-dir",
           "SKIP": "--skip", "EXTRA": "--extra", "BUDGET": "--budget", "BUDGET_FLOPS": "--budget-flops",
           "BUDGET_RULE": "--budget-rule", "JOBS": "--jobs", "CLUSTER": "--cluster",
           "PRECISION": "--precision"}
# (a variable of the run targets: its option of `lmbench reproduce`)
VALUES = {"SPLIT": "0.7,0.2,0.1", "ONLY": "ngram", "QUICK": "1", "SKIP": "network", "EXTRA": "energy", "BUDGET": "2h",
          "BUDGET_FLOPS": "1e15", "BUDGET_RULE": "recipe"}
NEEDED = {"compare": {"TRAIN": "a.txt", "VALID": "b.txt", "TEST": "c.txt"}}


def documented(target: str) -> list[str]:
    """The variables of the comment block above `target:` in the Makefile (a target right below another's
    recipe shares that one's comment: reproduce-ap, reproduce-brown's)."""
    lines = (ROOT / "Makefile").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(f"{target}:"))
    while not lines[at - 1].startswith("#"):  # back over a sibling target's recipe to the shared comment
        at -= 1
    comment = []
    for line in reversed(lines[:at]):
        if not line.startswith("#"):
            break
        comment.append(line)
    return sorted(set(re.findall(r"\b([A-Z][A-Z_]+)=", " ".join(comment))) - {"PYTHONPATH"})


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
@pytest.mark.parametrize("target", ["compare", "reproduce-brown", "reproduce-ap"])
def test_every_documented_variable_reaches_the_command(target, tmp_path):
    variables = documented(target)
    assert {"REPORT_DIR", "SKIP", "EXTRA", "QUICK", "THREADS", "JOBS", "CLUSTER", "PRECISION"} <= set(variables)
    for variable in variables:
        assert variable in OPTIONS, f"{variable}: documented for {target}, and no option known for it here"
        value = VALUES.get(variable, f"/tmp/{variable.lower()}")
        given = {**NEEDED.get(target, {}), variable: value}
        if variable == "CORPUS":
            given = {"CORPUS": value}
        if variable == "SPLIT":
            given = {"CORPUS": "all.txt", "SPLIT": value}
        done = subprocess.run(["make", "-n", "-C", str(ROOT), target, f"VENV={tmp_path}/venv",
                               *(f"{key}={found}" for key, found in given.items())],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        line = next(line for line in done.stdout.replace("\\\n", " ").splitlines() if "lmbench_cli reproduce" in line)
        words = shlex.split(line)
        assert OPTIONS[variable] in words, f"{target} {variable}={value}: {line}"
        if variable != "QUICK":
            assert words[words.index(OPTIONS[variable]) + 1] == value, f"{target} {variable}={value}: {line}"

# Paths as users name them (issue 59, item 13: `make compare TRAIN="my train.txt"` split the path at its space).
AWKWARD_PATHS = ("/tmp/my train.txt", "/tmp/it's here.txt", '/tmp/say "hi".txt', "/tmp/a  b/$HOME;`x`.txt")
PATH_VARIABLES = ("TRAIN", "VALID", "TEST", "CORPUS", "TMP_DIR", "REPORT_DIR", "NAME")


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
@pytest.mark.parametrize("target", ["compare", "reproduce-brown", "reproduce-ap"])
@pytest.mark.parametrize("path", AWKWARD_PATHS)
def test_every_path_variable_reaches_the_command_as_one_word(target, path, tmp_path):
    """Each variable that holds a path (or a name), given a value with spaces, quotes and shell characters,
    is one argument of the command the shell runs, unchanged."""
    for variable in PATH_VARIABLES:
        if variable not in documented(target):
            continue
        given = {**NEEDED.get(target, {}), variable: path}
        if variable == "CORPUS":
            given = {"CORPUS": path}
        done = subprocess.run(["make", "-n", "-C", str(ROOT), target, f"VENV={tmp_path}/venv",
                               *(f"{key}={found}" for key, found in given.items())],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        line = next(line for line in done.stdout.replace("\\\n", " ").splitlines() if "lmbench_cli reproduce" in line)
        words = shlex.split(line)
        at = words.index(OPTIONS[variable])
        assert words[at + 1] == path, f"{target} {variable}={path!r}: {line}"
