"""The report's figures read as drawn: no legend over the lines (outside the axes), the log minutes
axis in plain numbers, and the effective-n figure with no point from a handful of tokens (buckets under
MIN_BUCKET_TOKENS merged, every bar's tokens written on it). Drawn from the committed Brown report."""

from pathlib import Path

import numpy as np
import pytest

import reports.building.figures as figures
from reports.records import load_results

BROWN = Path(__file__).resolve().parents[1] / "results" / "brown"


@pytest.fixture
def drawn(monkeypatch):
    """The figures' axes as they are saved (laid out and drawn), by figure name."""
    found, save = {}, figures.save_figure

    def keep(fig, directory, name, tight=True):
        fig.tight_layout()
        fig.canvas.draw()
        found[name] = fig.axes
        return save(fig, directory, name, tight)
    monkeypatch.setattr(figures, "save_figure", keep)
    return found


def _legend_outside(ax) -> bool:
    legend = ax.get_legend().get_window_extent()
    return legend.x0 >= ax.get_window_extent().x1


def test_time_to_perplexity_reads_minutes_and_keeps_its_legend_off_the_lines(tmp_path, drawn):
    figures.time_to_perplexity(load_results(BROWN), tmp_path)
    ax = drawn["time_to_perplexity"][0]
    labels = [tick.get_text() for tick in ax.get_xticklabels() + ax.get_xticklabels(minor=True) if tick.get_text()]
    assert "1" in labels and "10" in labels and not any("10^" in label or "$" in label for label in labels)
    assert _legend_outside(ax)


def test_context_size_keeps_its_legend_off_the_lines(tmp_path, drawn):
    figures.context_size(load_results(BROWN), tmp_path)
    assert _legend_outside(drawn["context_size"][0])


def test_effective_n_draws_no_point_from_a_handful_of_tokens(tmp_path, drawn):
    results = load_results(BROWN)
    tokens = np.array(next(row for row in results["rows"] if row["id"] == "infini-gram-kn-5")["effective_n"]["tokens"])
    figures.effective_n(results, tmp_path)
    share, logprob = drawn["effective_n"]
    # Brown: from effective n 9 on 32 tokens, joined to 8's 106
    assert tokens[7] >= figures.MIN_BUCKET_TOKENS > tokens[8:].sum()
    assert [tick.get_text() for tick in logprob.get_xticklabels()] == [str(n) for n in range(1, 8)] + ["8+"]
    assert all(len(line.get_xdata()) == 8 for line in logprob.get_lines())
    counts = [int(text.get_text().replace(",", "")) for text in share.texts]
    assert counts == [*tokens[:7], tokens[7:].sum()] and min(counts) >= figures.MIN_BUCKET_TOKENS


def test_merged_buckets_weigh_each_bucket_by_its_tokens():
    """An empty first bucket left out, two short ones joined, a short rest joined to the last group."""
    labels, tokens, (means,) = figures.merged_buckets(
        [1, 2, 3, 4, 5, 6, 7], np.array([0, 500, 60, 50, 300, 30, 10]), [np.array([0.0, -1, -2, -3, -4, -5, -6])])
    assert labels == ["2", "3-4", "5+"] and tokens.tolist() == [500, 110, 340]
    assert means.tolist() == pytest.approx([-1.0, (60 * -2 + 50 * -3) / 110, (300 * -4 + 30 * -5 + 10 * -6) / 340])
