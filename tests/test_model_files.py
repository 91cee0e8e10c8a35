"""A run's model files hold no code (issue 67): a network's best model and checkpoint are safetensors files
(tensors, and one JSON document of everything else in the header: `neural.training.weights_file`), read
without pickle. A file of the older format (FORMAT 1 and 2: best.pt, checkpoint.pt, torch pickles) is read
by torch's weights_only reader (plain tensors and containers) and converted beside itself; one holding
anything else, possibly code, is refused in one line by every reader of a model or checkpoint (the
loader, `lmbench.load` of a run folder and of a work folder's row, `lmbench score`, `generate`, `eval`,
`nplm neighbors`, `train --resume`, the trainer's resume), nothing of it run."""

from __future__ import annotations

import math
import pathlib
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import lmbench
from lmbench.errors import LMBenchError
from lmbench_cli import main
from neural.training.checkpoint import CHECKPOINT
from tests.helpers import chain_text, corpus_args, write_splits

TINY = ["--n", "3", "--m", "4", "--h", "5", "--device", "cpu", "--threads", "1"]
FORMAT1 = Path(__file__).with_name("data") / "format1"


class Code:
    """What a hostile pickle holds: reading it touches `marker` (any call could run instead)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return pathlib.Path.touch, (self.marker,)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny `lmbench train` run of one epoch, and its corpus files."""
    root = tmp_path_factory.mktemp("model_files")
    files = write_splits(root, train=chain_text(3000, 1), valid=chain_text(400, 2), test=chain_text(400, 3))
    run = root / "run"
    assert main(["train", *corpus_args(files), *TINY, "--epochs", "1", "--out", str(run)]) == 0
    return {"run": run, "files": files}


def hostile_copy(trained, folder: Path, marker: Path, where: str = "top") -> Path:
    """A copy of the trained run whose best model and checkpoint are files of the older format (torch
    pickles, as lmbench wrote before FORMAT 3) carrying code at `where`."""
    from corpora.record import load_recorded
    from neural.training.checkpoint import BEST, CHECKPOINT, read_checkpoint
    shutil.copytree(trained["run"], folder)
    fingerprint = load_recorded(folder).vocab.fingerprint()
    for name, old in ((BEST, "best.pt"), (CHECKPOINT, "checkpoint.pt")):
        state = dict(read_checkpoint(folder / name, fingerprint), format=2)
        if where == "top":
            state["hook"] = Code(marker)
        elif where == "weights":
            state["model"] = {**state["model"], "hook": Code(marker)}
        else:  # inside the configuration
            state["config"] = {**state["config"], "lr": Code(marker)}
        (folder / name).unlink()
        torch.save(state, folder / old)
    return folder


def refused(capsys, call) -> str | None:
    """The one line `call` was refused with (an LMBenchError, or the command line's exit 2); None when it
    was not refused."""
    try:
        code = call()
    except LMBenchError as err:
        line = str(err)
    else:
        out, err = capsys.readouterr()
        if code != 2:
            return None
        lines = [line for line in err.splitlines() if line.startswith("lmbench: error:")]
        assert len(lines) == 1 and "Traceback" not in err, err
        line = lines[0]
    assert "\n" not in line
    return line


def _corpus(run):
    from corpora.record import load_recorded
    return load_recorded(run)


def _work_row(run: Path):
    """The reader of a work folder's network row (`lmbench.load(WORK, row=ID)` after its rows/ID.json)."""
    from reports.api import row_model
    work = run.parent / "work"
    (work / "nplm").mkdir(parents=True)
    shutil.copytree(run, work / "nplm" / "mlp1-abc")
    return row_model(work, {"kind": "network", "id": "mlp1", "fingerprint": "abc"}, _corpus(run), device="cpu",
                     threads=1)


def _load_network(run, **more):
    from neural.training.checkpoint import load_network
    return load_network(run, _corpus(run), device="cpu", **more)


def _resume(run):
    from neural.config import RunConfig
    from neural.training.trainer import train_network
    config = RunConfig(model="nplm", n=3, m=4, h=5, epochs=2, device="cpu", threads=1)
    return train_network(_corpus(run), config, run, resume=True, progress=False)


READERS = {  # each place a model or checkpoint is read
    "load_network best": lambda run, files: _load_network(run),
    "load_network checkpoint": lambda run, files: _load_network(run, which=CHECKPOINT),
    "lmbench.load run folder": lambda run, files: lmbench.load(run, device="cpu", threads=1),
    "work folder row": lambda run, files: _work_row(run),
    "lmbench score": lambda run, files: main(["score", str(run), str(files["test"]), "--threads", "1"]),
    "lmbench generate": lambda run, files: main(["generate", str(run), "--words", "3", "--threads", "1"]),
    "lmbench eval": lambda run, files: main(["eval", str(run), "--device", "cpu", "--threads", "1"]),
    "nplm neighbors": lambda run, files: main(["nplm", "neighbors", str(run), "w1"]),
    "train --resume": lambda run, files: main(["train", *corpus_args(files), *TINY, "--epochs", "2", "--out",
                                               str(run), "--resume"]),
    "trainer resume": lambda run, files: _resume(run),
}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_an_older_file_carrying_code_is_refused_by_every_reader_unrun(trained, tmp_path, capsys, reader):
    marker = tmp_path / "code-ran"
    run = hostile_copy(trained, tmp_path / "run", marker)
    before = sorted(p.name for p in run.iterdir())
    line = refused(capsys, lambda: READERS[reader](run, trained["files"]))
    assert not marker.exists(), f"{reader} ran the file's code"
    assert line is not None and "could run code" in line, line
    assert f"{run}/best.pt" in line or f"{run}/checkpoint.pt" in line or "mlp1-abc/best.pt" in line, line
    assert "train" in line  # the fix: a run trained again writes files that hold none
    assert sorted(p.name for p in run.iterdir()) == before  # nothing converted, nothing written


@pytest.mark.parametrize("where", ["weights", "config"])
def test_code_anywhere_in_an_older_file_is_refused_unrun(trained, tmp_path, capsys, where):
    marker = tmp_path / "code-ran"
    run = hostile_copy(trained, tmp_path / "run", marker, where)
    line = refused(capsys, lambda: _load_network(run))
    assert not marker.exists(), f"code in the file's {where} ran"
    assert line is not None and "could run code" in line, line


@pytest.mark.parametrize("content", [b"", np.random.default_rng(0).bytes(3000), b"PK\x03\x04" + bytes(100),
                                     b"not a model\n"], ids=["empty", "random", "zip header", "text"])
def test_an_older_file_of_random_bytes_is_named_damaged(trained, tmp_path, capsys, content):
    from neural.training.checkpoint import BEST
    run = hostile_copy(trained, tmp_path / "run", tmp_path / "marker")
    (run / "best.pt").write_bytes(content)
    line = refused(capsys, lambda: main(["eval", str(run), "--device", "cpu", "--threads", "1"]))
    assert line and str(run / "best.pt") in line and "delete it and train again" in line, line
    assert not (run / BEST).exists()


def test_a_file_of_the_current_format_is_safetensors_with_its_state_in_the_header(trained):
    from safetensors import safe_open
    from neural.training.checkpoint import BEST, CHECKPOINT, FORMAT
    assert (BEST, CHECKPOINT) == ("best.safetensors", "checkpoint.safetensors") and FORMAT == 3
    import json
    with safe_open(trained["run"] / CHECKPOINT, framework="pt") as f:
        state = json.loads(f.metadata()["lmbench"])
        assert any(name.startswith("model/") for name in f.keys())
    assert state["format"] == 3 and state["family"] == "nplm"


def test_a_foreign_or_altered_safetensors_file_is_named_damaged(trained, tmp_path, capsys):
    from safetensors.torch import save_file
    from neural.training.checkpoint import BEST
    run = tmp_path / "run"
    shutil.copytree(trained["run"], run)
    save_file({"weight": torch.zeros(3)}, run / BEST)  # another program's weights: no lmbench state
    line = refused(capsys, lambda: _load_network(run))
    assert line and str(run / BEST) in line and "delete it and train again" in line, line
    save_file({"weight": torch.zeros(3)}, run / BEST, metadata={"lmbench": '{"model": {"$object": "os.system"}}'})
    line = refused(capsys, lambda: _load_network(run))
    assert line and str(run / BEST) in line and "delete it and train again" in line, line
    (run / BEST).write_bytes((trained["run"] / BEST).read_bytes()[:-50])  # truncated
    line = refused(capsys, lambda: _load_network(run))
    assert line and str(run / BEST) in line, line


@pytest.mark.parametrize("name", ["nplm", "lstm", "transformer"])
def test_an_older_file_lmbench_wrote_is_converted_beside_itself(tmp_path, name):
    """FORMAT 1 files (tests/data/format1: a window network's checkpoint holds numpy's random state) are
    read by torch's weights_only reader and written as FORMAT 3 beside themselves; the converted files
    then load alone, to the same scores."""
    from neural.training.checkpoint import BEST, CHECKPOINT, FORMAT, load_network, read_checkpoint
    from tests.test_pinned_scores import corpus
    data = corpus()
    shutil.copytree(FORMAT1 / name, tmp_path / "old")
    old = load_network(tmp_path / "old", data, device="cpu").score(*data.stream_for("test"))
    assert (tmp_path / "old" / BEST).exists() and (tmp_path / "old" / "best.pt").exists()
    checkpoint = read_checkpoint(tmp_path / "old" / CHECKPOINT, data.vocab.fingerprint())
    assert (tmp_path / "old" / CHECKPOINT).exists() and checkpoint["format"] == FORMAT
    for file in ("best.pt", "checkpoint.pt"):
        (tmp_path / "old" / file).unlink()
    again = read_checkpoint(tmp_path / "old" / CHECKPOINT, data.vocab.fingerprint())
    assert same(again, checkpoint)
    converted = load_network(tmp_path / "old", data, device="cpu").score(*data.stream_for("test"))
    assert np.array_equal(converted, old)


def test_a_format_2_run_folder_scores_and_resumes_as_it_was(trained, tmp_path, capsys):
    """best.pt and checkpoint.pt as lmbench wrote them before FORMAT 3 (torch.save of the same dicts): the
    run scores as trained, converted beside them, and resumes."""
    from neural.training.checkpoint import BEST, CHECKPOINT, load_network, read_state
    run = tmp_path / "run"
    shutil.copytree(trained["run"], run)
    for name, old in ((BEST, "best.pt"), (CHECKPOINT, "checkpoint.pt")):
        torch.save(dict(read_state(run / name), format=2), run / old)
        (run / name).unlink()
    corpus = _corpus(run)
    expected = load_network(trained["run"], corpus, device="cpu").score(*corpus.stream_for("test"))
    assert np.array_equal(load_network(run, corpus, device="cpu").score(*corpus.stream_for("test")), expected)
    assert (run / BEST).exists() and not (run / CHECKPOINT).exists()  # (converted as it is read)
    assert main(["train", *corpus_args(trained["files"]), *TINY, "--epochs", "2", "--out", str(run), "--resume"]) == 0
    assert (run / CHECKPOINT).exists() and read_state(run / CHECKPOINT)["state"]["epoch"] == 2


def test_an_older_file_of_another_run_is_refused_unconverted(tmp_path):
    """Converted only once found to be the run's: a resume refused (another vocabulary) writes nothing."""
    from neural.training.checkpoint import CHECKPOINT, read_checkpoint
    shutil.copytree(FORMAT1 / "nplm", tmp_path / "old")
    with pytest.raises(LMBenchError, match="another vocabulary") as refusal:
        read_checkpoint(tmp_path / "old" / CHECKPOINT, "another fingerprint")
    assert str(tmp_path / "old" / "checkpoint.pt") in str(refusal.value)
    assert sorted(p.name for p in (tmp_path / "old").iterdir()) == ["best.pt", "checkpoint.pt"]


def test_a_folder_that_cannot_be_written_still_loads_an_older_file_unconverted(tmp_path, monkeypatch, caplog):
    import errno
    from neural.training import checkpoint
    from tests.test_pinned_scores import corpus
    data = corpus()
    shutil.copytree(FORMAT1 / "nplm", tmp_path / "old")

    def read_only(obj, path, advice=None):
        raise OSError(errno.EROFS, "Read-only file system", str(path))
    monkeypatch.setattr(checkpoint, "atomic_save", read_only)
    model = checkpoint.load_network(tmp_path / "old", data, device="cpu")
    assert np.isfinite(model.score(*data.stream_for("test"))).all()
    assert not (tmp_path / "old" / checkpoint.BEST).exists() and "not converted" in caplog.text


# --- the flattener: any state of a run, as JSON and tensors ----------------------------------------------------

def same(a, b) -> bool:
    """a and b equal, of the same types all the way down (NaN equal to NaN, tensors and arrays by dtype,
    shape and bits; a state_dict's OrderedDict as a dict)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(type(k) is type(j) for k, j in zip(a, b)) and all(
            same(a[k], b[k]) for k in a)
    if type(a) is not type(b):
        return False
    if isinstance(a, torch.Tensor):
        bits = (lambda t: t.contiguous().view(-1).view(torch.uint8)) if a.numel() else (lambda t: t)
        return a.dtype == b.dtype and a.shape == b.shape and torch.equal(bits(a), bits(b))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def awkward():
    weight = torch.randn(4, 3)
    net = torch.nn.Linear(3, 2)
    optimizer = torch.optim.AdamW(net.parameters())
    net(torch.randn(5, 3)).sum().backward()
    optimizer.step()
    np.random.seed(7)
    return {
        "none": None, "bools": [True, False], "ints": [0, -1, 2 ** 70, -(2 ** 63)], "floats": [0.1, -0.0, 1e308, 5e-324,
                                                                                               math.inf, -math.inf,
                                                                                               math.nan],
        "str": "ünïcode \"quoted\" $tensor", "tuple": (1, (2, "three"), []), "empty": {}, "empty tuple": (),
        "int keys": {0: "a", 1: {"b": 2}}, "mixed keys": {1: "x", "1": "y", None: 1, 2.5: 2, (1, 2): 3, False: 4},
        "$tensor": {"$dict": "a key like a tag"},
        "tensors": {"float": weight, "tied": weight, "view": weight[1:3], "transposed": weight.t(),
                    "bf16": torch.randn(3, 2).to(torch.bfloat16), "scalar": torch.tensor(2.5, dtype=torch.float64),
                    "empty": torch.zeros(0, 5), "bytes": torch.ByteTensor([0, 255]), "bool": torch.tensor([True, False]),
                    "long": torch.tensor([2 ** 62, -1]), "half": torch.tensor([65504.0], dtype=torch.float16),
                    "nan": torch.tensor([math.nan, math.inf])},
        "numpy": np.arange(6, dtype=np.uint32).reshape(2, 3), "numpy scalar": np.float64(0.1),
        "numpy 0-d": np.array(3, dtype=np.int16), "numpy empty": np.zeros((0, 2), dtype=">f8"),
        "numpy bool": np.bool_(True), "numpy big-endian": np.arange(3, dtype=">i4"), "numpy rng": np.random.get_state(),
        "torch rng": torch.get_rng_state(), "generator": torch.Generator().manual_seed(3).get_state(),
        "optimizer": optimizer.state_dict(),
    }


def test_every_value_of_a_run_state_round_trips_exactly(tmp_path):
    from neural.training.weights_file import flatten, read, rebuilt, write
    value = awkward()
    skeleton, tensors = flatten(value)
    import json
    assert json.loads(json.dumps(skeleton, allow_nan=False)) == skeleton  # plain JSON, no NaN literal
    assert same(rebuilt(skeleton, tensors), value)
    write(value, tmp_path / "state.safetensors")
    back = read(tmp_path / "state.safetensors")
    assert same(back, value)
    back["tensors"]["tied"].add_(1)  # tied tensors are saved apart (safetensors keeps no shared storage)
    assert not torch.equal(back["tensors"]["tied"], back["tensors"]["float"])
    np.random.set_state(back["numpy rng"])
    drawn = np.random.random(3)
    np.random.set_state(value["numpy rng"])
    assert np.array_equal(drawn, np.random.random(3))


@pytest.mark.parametrize("bad", [object(), {"a": [1, {2: pathlib.Path("x")}]}, np.array([1, "a"], dtype=object),
                                 {("a", object()): 1}, {1j: 2}, 3 + 4j],
                         ids=["object", "path-in-a-dict", "object-array", "object-in-a-key", "complex-key", "complex"])
# (ids named: str() of an object holds its address, which differs between pytest-xdist's processes, and a
# collection that differs fails the whole run)
def test_anything_else_is_refused_at_save(bad):
    from neural.training.weights_file import flatten
    with pytest.raises(TypeError, match="cannot be saved"):
        flatten(bad)


def test_a_skeleton_with_an_unknown_tag_is_refused():
    from neural.training.weights_file import rebuilt
    tensors = {"x": torch.zeros(8, dtype=torch.uint8), "f": torch.zeros(2)}
    for skeleton in ({"$object": "os.system"}, {"$tensor": "missing"}, {"$float": "pi"}, {"$tuple": 3},
                     {"$dict": [[1]]}, {"$dict": [[[1], 2]]}, {"a": 1, "$tensor": "x"}, {"$numpy": ["x", "|O", [1]]},
                     {"$numpy": ["x", "<f8", [3]]}, {"$numpy": ["f", "<f4", [2]]}, {"$numpy": "x"},
                     {"$scalar": ["x", "nonsense"]}, [{"$float": 1.0}]):
        with pytest.raises(ValueError):
            rebuilt(skeleton, tensors)
