"""Issue 69, item 9: ARPA values at the edge of a float's range. Cases, by class:

- a log10 value that is finite but whose natural log is not (|log10| above float64's largest / ln 10, about
  7.8e307), in either column (probability, back-off weight), at either order (6): `<s>` at -1e308 was read
  (the finiteness check ran on the log10 values, before the conversion to natural logs) into a model of
  -inf, with a RuntimeWarning on the way; now refused in one line naming the entry;
- a probability far below ARPA's zero (-99) that a natural log still holds, shown by `lmbench score` (4
  values x TSV and --json): `<s>` at -400 ended in an OverflowError as its line's perplexity (10^400)
  was printed; a perplexity beyond a float's range now shows as inf (TSV) and null (JSON).
"""

import json
import warnings

import pytest

from baselines.arpa_reader import read_arpa
from lmbench.errors import LMBenchError
from tests.helpers import run_cli
from tests.test_hostile_round5_streams import VOCAB, arpa_file


@pytest.mark.parametrize("values", [{}, {"p1": "-7.7e307"}, {"p2": "-0.30103"}])
def test_the_file_reads_up_to_the_edge_of_the_conversion(tmp_path, values):
    """The cases below change one value of a file that reads; the edge is the conversion's: -7.7e307 (a
    natural log of -1.77e308) is a float, read as it is."""
    model = read_arpa(arpa_file(tmp_path, **values), VOCAB)
    assert model.order == 2


@pytest.mark.parametrize("field, value, section", [
    ("p1", "-1e308", "1-grams"), ("p1", "-7.9e307", "1-grams"),         # the case, and just past the edge
    ("bow1", "-1e308", "1-grams"), ("bow1", "1e308", "1-grams"), ("bow1", "7.9e307", "1-grams"),
    ("p2", "-1e308", "2-grams")])
def test_a_value_whose_natural_log_overflows_is_refused_in_one_line(tmp_path, field, value, section):
    path = arpa_file(tmp_path, **{field: value})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(LMBenchError) as refused:
            read_arpa(path, VOCAB)
    message = str(refused.value)
    assert "\n" not in message and path in message and value in message and section in message, message
    assert [str(w.message) for w in caught] == []


@pytest.mark.parametrize("value", ["-99", "-300", "-400", "-7.7e307"])
def test_score_shows_a_line_far_below_zero_without_overflowing(tmp_path, capsys, value):
    """`<s>` scored as a word of a line: its perplexity is 10^-value, beyond a float's range from -308 on."""
    text = tmp_path / "lines.txt"
    text.write_text("a b\n<s>\n")
    model = arpa_file(tmp_path, p1=value)
    code, out, err = run_cli(capsys, "score", model, text, "--threads", "1")
    assert code == 0 and "Traceback" not in err, err
    rows = [line.split("\t") for line in out.splitlines()]
    assert rows[0] == ["line", "log10_prob", "tokens", "oov", "perplexity"] and len(rows) == 4
    assert float(rows[2][1]) == float(value)
    assert float(rows[2][4]) == (10.0 ** -float(value) if float(value) > -308 else float("inf"))
    code, out, err = run_cli(capsys, "score", model, text, "--threads", "1", "--json")
    assert code == 0 and "Traceback" not in err, err
    entries = [json.loads(line, parse_constant=pytest.fail) for line in out.splitlines()]
    assert entries[1]["log10_prob"] == float(value)
    assert entries[1]["perplexity"] == (10.0 ** -float(value) if float(value) > -308 else None)
