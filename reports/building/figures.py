"""The report's figures, drawn from results.json alone (matplotlib, PNG and SVG).

Drawing is most of a report build's time (seconds a figure: each is rendered once per format), so a
folder's figures are drawn again only when what they show may have changed: `drawn_once` keeps, beside
them, a record (figures/drawn.json) of the digest of their inputs and of the code that draws them.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Callable

import os

os.environ.pop("MPLBACKEND", None)  # the figures are files, drawn by Agg whatever backend the shell names (an
import matplotlib  # noqa: E402      # unknown one, MPLBACKEND=bogus, was a traceback at this import)

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator  # noqa: E402
from matplotlib.transforms import Bbox  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from lmbench.files import atomic_write_file, atomic_write_text  # noqa: E402
from reports.experiments import INFINI_GRAM, PAPER_FAMILY, TABLE1_NETWORKS, WITH_COUNTS  # noqa: E402
from reports.records import by_id, flops_per_token, network_of, shape  # noqa: E402


DRAWN = "drawn.json"  # in a figures folder: which inputs drew which files (`drawn_once`)
DRAWING_CODE = Path(__file__)  # this module: a change of it draws every figure again


def drawn_once(directory: Path, name: str, inputs, code: tuple[Path, ...],
               draw: Callable[[], list[Path]]) -> list[Path]:
    """The PNGs `draw()` writes into `directory`, drawn only when the figure set `name` has not been drawn
    there from the same `inputs` (anything JSON can write) by the same `code` (the files of the modules
    that draw it) and matplotlib, with every file it wrote (PNG and SVG) still in place."""
    digest = hashlib.sha256()
    for module in code:
        digest.update(module.read_bytes())
    digest.update(json.dumps([matplotlib.__version__, inputs], sort_keys=True, default=str).encode())
    key, record = digest.hexdigest(), directory / DRAWN
    try:
        drawn = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        drawn = {}
    drawn = drawn if isinstance(drawn, dict) else {}  # (a record that is no such object: drawn again)
    before = drawn.get(name) if isinstance(drawn.get(name), dict) else {}
    if before.get("key") == key and isinstance(before.get("files"), list) and all(
            isinstance(file, str) for file in before["files"]):
        paths = [directory / file for file in before["files"]]
        if all(path.exists() and path.with_suffix(".svg").exists() for path in paths):
            return paths
    paths = draw()
    drawn[name] = {"key": key, "files": [path.name for path in paths]}
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write_text(record, json.dumps(drawn, indent=1, sort_keys=True) + "\n")
    return paths


def save_figure(fig, directory: Path, name: str, tight: bool = True) -> Path:
    """Write the figure as PNG and SVG (`tight`: lay it out first) and close it; returns the PNG. The SVG is
    the same bytes for the same figure (no date, its element ids salted by `name`), so that a report
    rebuilt from unchanged results changes no committed file."""
    directory.mkdir(parents=True, exist_ok=True)
    try:
        if tight:
            fig.tight_layout()
        for suffix in ("png", "svg"):  # through the atomic writer: a full disk leaves no truncated figure
            with plt.rc_context({"svg.hashsalt": name}):
                atomic_write_file(directory / f"{name}.{suffix}", lambda out: fig.savefig(
                    out, format=suffix, dpi=110, metadata={"Date": None} if suffix == "svg" else None))
    finally:
        plt.close(fig)
    return directory / f"{name}.png"


# Distinct colours, one per line of a figure or per word class: tab10's ten, then five of other hues or
# lightness (Dark2 and Set1 after tab10 would repeat its orange, purple, pink and browns); markers cycle at
# another period, so that no two rows look alike.
PALETTE = plt.get_cmap("tab10").colors + ("black", "#000075", "#800000", "#469990", "#f032e6")
ROW_MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def learning_curves(results: dict, directory: Path) -> Path | None:
    rows = [r for r in results["rows"] if r.get("curve")]  # the networks run
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(10, 5))
    for i, row in enumerate(rows):
        curve, colour = row["curve"], PALETTE[i % len(PALETTE)]
        epochs = [point["epoch"] for point in curve]
        ax.plot(epochs, [point["valid_perplexity"] for point in curve], marker=ROW_MARKERS[i % len(ROW_MARKERS)],
                ms=4, color=colour, label=_curve_label(row))
        if all("train_perplexity" in point for point in curve):  # full-softmax training only
            ax.plot(epochs, [point["train_perplexity"] for point in curve], ls="--", color=colour,
                    alpha=0.6, label=f"{row['model']} train")
    ax.set(xlabel="epoch", ylabel="perplexity", yscale="log", title="Learning curves of the networks")
    plain = FuncFormatter(lambda value, _: f"{value:g}")  # 300, not 3 x 10^2; the minor ticks labelled too,
    ax.yaxis.set_minor_locator(LogLocator(subs=(1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9)))  # enough within a decade
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # outside the axes: no curve behind it
    return save_figure(fig, directory, "learning_curves")


OBJECTIVE_LABELS = {"softmax": "full softmax", "importance": "importance sampling", "nce": "NCE",
                    "class": "class-factored softmax", "tree": "tree softmax"}
BASELINE_LINES = {"kn-interp-5": "interpolated KN 5", "class-3-500": "class-based 3-gram, 500",
                  "kn-backoff-5": "KN back-off 5", "del-int": "Del. Int. trigram"}


def _curve_label(row: dict) -> str:
    """A network's validation curve: on all of valid, or on its first valid_tokens tokens."""
    prefix = (row.get("config") or {}).get("valid_tokens")
    return f"{row['model']} valid" + (f" (first {prefix:,} tokens)" if prefix else "")


def time_to_perplexity(results: dict, directory: Path) -> Path | None:
    """Validation perplexity against training seconds, one line per network run in MLP1's shape (the
    paper's network with each objective, other families beside it), with n-gram baselines as
    horizontal lines."""
    rows = by_id(results)
    mlp1 = dict(zip(("n", "h", "m", "direct"), TABLE1_NETWORKS["MLP1"]))
    runs = [r for r in results["rows"] if r["family"] and r.get("curve") and shape(r, rows) == mlp1]
    if not runs:
        return None
    fig, ax = plt.subplots(figsize=(9.5, 4.5))
    for run in runs:
        objective = (run.get("config") or {}).get("objective", "softmax")
        seconds = np.cumsum([point["seconds"] for point in run["curve"]])
        ax.plot(seconds / 60, [point["valid_perplexity"] for point in run["curve"]], marker="o", ms=3,
                label=f"{run['id']}: {OBJECTIVE_LABELS.get(objective, objective)}"
                      + (f", valid's first {prefix:,} tokens" if (prefix := run["config"].get("valid_tokens")) else ""))
    for row_id, label in BASELINE_LINES.items():
        if rows.get(row_id, {}).get("valid_ppl"):
            ax.axhline(rows[row_id]["valid_ppl"], ls=":", lw=1, color="grey")
            ax.annotate(f"{label} {rows[row_id]['valid_ppl']:.0f}", (1.0, rows[row_id]["valid_ppl"]),
                        xycoords=("axes fraction", "data"), xytext=(-4, 2), textcoords="offset points",
                        ha="right", fontsize=7, color="dimgrey")
    ax.set(xlabel="training minutes (validation not counted)", ylabel="validation perplexity",
           title=f"Time to perplexity, MLP1 shape (n={mlp1['n']}, h={mlp1['h']}, m={mlp1['m']})")
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(_minutes))  # 1, 10, not 10^0, 10^1
    ax.xaxis.set_minor_formatter(FuncFormatter(  # and 2, 5, 20, 50 between them
        lambda value, _: _minutes(value) if round(value / 10 ** np.floor(np.log10(value))) in (2, 5) else ""))
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # outside the axes: over no curve
    return save_figure(fig, directory, "time_to_perplexity")


def curve_flops(row: dict, vocab_size: int) -> np.ndarray | None:
    """The training FLOPs a network row had spent at each point of its learning curve (its family's
    analytic count per token, `NetworkShape.training_flops`, times the tokens read until then; the tokens
    of an epoch: its tokens/s times its seconds); None for a row whose configuration is not kept."""
    if not row.get("config") or not row.get("curve") or not all(
            "tokens_per_s" in point and "seconds" in point for point in row["curve"]):
        return None
    tokens = np.cumsum([point["tokens_per_s"] * point["seconds"] for point in row["curve"]])
    return flops_per_token(row, vocab_size) * tokens


def perplexity_against_compute(results: dict, directory: Path) -> Path | None:
    """Validation perplexity (log) against training FLOPs (log), one line per network row from its learning
    curve, KN 5 and the ∞-gram (+ KN 5) as horizontal lines, and on each line the first point below KN 5:
    "beats KN 5 after X FLOPs"."""
    rows = by_id(results)
    vocab = results["corpus_summary"]["vocab_size"]
    runs = [(row, flops) for row in results["rows"] if row.get("family") and row.get("curve") and not row.get("mix")
            and (flops := curve_flops(row, vocab)) is not None]
    if not runs:
        return None
    fig, ax = plt.subplots(figsize=(10, 5))
    kn5 = rows.get("kn-interp-5", {}).get("valid_ppl")
    for i, (row, flops) in enumerate(runs):
        valid = np.array([point["valid_perplexity"] for point in row["curve"]])
        colour = PALETTE[i % len(PALETTE)]
        ax.plot(flops, valid, marker=ROW_MARKERS[i % len(ROW_MARKERS)], ms=4, color=colour, label=row["model"])
        below = np.flatnonzero(valid < kn5) if kn5 else []
        if len(below):
            first = below[0]
            ax.plot(flops[first], valid[first], marker="*", ms=13, color=colour, markeredgecolor="black", zorder=5)
            ax.annotate(f"{flops[first]:.1e}", (flops[first], valid[first]), xytext=(4, -11),
                        textcoords="offset points", fontsize=7, color=colour)
    for row_id, label, above in (("kn-interp-5", "interpolated KN 5", True), ("infini-gram-kn-5", "∞-gram + KN 5", False)):
        if rows.get(row_id, {}).get("valid_ppl"):  # (KN 5 labelled above its line, the ∞-gram's just below it, below)
            ax.axhline(rows[row_id]["valid_ppl"], ls=":", lw=1, color="grey")
            ax.annotate(f"{label} {rows[row_id]['valid_ppl']:.1f}", (0.0, rows[row_id]["valid_ppl"]),
                        xycoords=("axes fraction", "data"), xytext=(4, 2 if above else -9), textcoords="offset points",
                        fontsize=7, color="dimgrey")
    ax.set(xscale="log", yscale="log", xlabel="training FLOPs (forward and backward, the families' analytic counts)",
           ylabel="validation perplexity",
           title="Perplexity against compute (a star: the first epoch below interpolated KN 5, its FLOPs)")
    plain = FuncFormatter(lambda value, _: f"{value:g}")
    ax.yaxis.set_minor_locator(LogLocator(subs=(1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9)))
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # outside the axes: over no curve
    return save_figure(fig, directory, "perplexity_against_compute")


def _minutes(value: float, _=None) -> str:
    """A tick of the log minutes axis as a plain number: 0.5, 1, 2, 10."""
    return f"{value:g}"


FAMILY_MARKERS = {"NPLM": "o", "NPLM mixed with Del. Int.": "s", "Del. Int.": "D"}
OTHER_MARKERS = ("^", "v", "P", "X", "<", ">")


FAMILY_NAMES = {PAPER_FAMILY: "NPLM", "energy": "Energy network"}


def _family(row, rows: dict[str, dict]) -> str:
    """The marker group of a table row: a network alone (its family), a network mixed (its family,
    mixed with the other parts), else the model's name."""
    record = rows[row["id"]]
    network = network_of(record, rows)
    if network is None:
        return row["model"]
    name = FAMILY_NAMES.get(network["family"], network["family"])
    partners = [rows[part]["model"] for part in record["parts"] if part != network["id"]]
    return f"{name} mixed with {' + '.join(partners)}" if partners else name


def _row_label(row) -> str:
    """A table row in a few words: its model (or class count) and n."""
    name = row["model"] if pd.isna(row["c"]) else f"class-based, {int(row['c'])} classes"
    return f"{name}, n={int(row['n'])}"


def paper_vs_ours(results: dict, table, directory: Path) -> Path | None:
    """Our test perplexity against the paper's for every row of the paper's table: a scatter with the
    rows' kinds as markers (left), and one line per row, paper to ours, labelled (right)."""
    if "test paper" not in table:  # a user's corpus: no paper table
        return None
    both = table[(~table["extra"]) & table["test paper"].notna() & table["test ours"].notna()]
    if both.empty:
        return None
    records = by_id(results)
    families = list(dict.fromkeys(_family(row, records) for _, row in both.iterrows()))
    others = iter(OTHER_MARKERS)
    style = {family: (FAMILY_MARKERS.get(family) or next(others, "o"), f"C{i % 10}")
             for i, family in enumerate(families)}
    fig, (scatter, lines) = plt.subplots(1, 2, figsize=(11, 6.5), gridspec_kw={"width_ratios": [1, 1.15]})

    for family in families:
        rows = both[[_family(row, records) == family for _, row in both.iterrows()]]
        marker, colour = style[family]
        scatter.scatter(rows["test paper"], rows["test ours"], marker=marker, color=colour, s=36, label=family)
    low = min(both["test paper"].min(), both["test ours"].min()) * 0.97
    high = max(both["test paper"].max(), both["test ours"].max()) * 1.03
    scatter.plot([low, high], [low, high], color="grey", lw=0.8, label="ours = paper")
    scatter.set(xlim=(low, high), ylim=(low, high), xlabel="paper test perplexity",
                ylabel="our test perplexity", title="Every row of the paper's table")
    scatter.set_aspect("equal")
    scatter.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2)  # below: no point behind it

    positions = np.arange(len(both))[::-1]  # the table's order, top to bottom
    for y, (_, row) in zip(positions, both.iterrows()):
        marker, colour = style[_family(row, records)]
        lines.plot([row["test paper"], row["test ours"]], [y, y], color=colour, lw=1.2)
        lines.scatter(row["test paper"], y, marker=marker, facecolors="white", edgecolors=colour, s=36, zorder=3)
        lines.scatter(row["test ours"], y, marker=marker, color=colour, s=36, zorder=3)
        lines.annotate(f"{100 * (row['test ours'] / row['test paper'] - 1):+.1f}%", (1.0, y),
                       xycoords=("axes fraction", "data"), xytext=(4, 0), textcoords="offset points",
                       va="center", fontsize=8.5)
    lines.set_yticks(positions, [_row_label(row) for _, row in both.iterrows()], fontsize=9)
    lines.set_ylim(-0.7, len(both) - 0.3)
    lines.grid(axis="x", color="0.9")
    lines.set(xlabel="test perplexity: paper (open) to ours (filled); ours / paper - 1 at the right",
              title="Row by row")
    fig.suptitle("QUICK run, not a measurement: paper vs ours (test)" if results.get("settings", {}).get("quick")
                 else "Paper vs ours (test)")
    return save_figure(fig, directory, "paper_vs_ours")


def context_size(results: dict, directory: Path) -> Path | None:
    rows = by_id(results)
    series = {"Kneser-Ney back-off": [f"kn-backoff-{n}" for n in (3, 4, 5)],
              "Kneser-Ney interpolated": [f"kn-interp-{n}" for n in (3, 4, 5)],
              "NPLM h50 m30 (MLP7, MLP5)": ["mlp7", "mlp5"]}
    fig, ax = plt.subplots(figsize=(8, 4))
    drawn = False
    for label, ids in series.items():
        points = [(shape(rows[i], rows)["n"], rows[i]["test_ppl"]) for i in ids if i in rows and rows[i].get("test_ppl")]
        if points:
            ax.plot(*zip(*points), marker="o", label=label)
            drawn = True
    if not drawn:
        plt.close(fig)
        return None
    ax.set(xlabel="n (context size + 1)", ylabel="test perplexity", title="Perplexity against context size")
    ax.set_xticks([3, 4, 5])
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # outside the axes: over no line
    return save_figure(fig, directory, "context_size")


MIN_BUCKET_TOKENS = 100  # the fewest test tokens an effective-n point of the figure stands on


def merged_buckets(n: list[int], tokens: np.ndarray, means: list) -> tuple[list[str], np.ndarray, list[np.ndarray]]:
    """The effective-n buckets as the figure draws them: left to right, each group of buckets closed once
    it holds MIN_BUCKET_TOKENS tokens (a short rest joins the last group; empty buckets before a group
    are left out), each series' means weighted by the buckets' tokens: no point from a handful of
    tokens. Returns each group's label ("7", "13-14", "8+": to the last bucket, 16 or more), tokens and
    means."""
    groups, current = [], []
    for bucket, count in enumerate(tokens):
        if count == 0 and not current:
            continue
        current.append(bucket)
        if tokens[current].sum() >= MIN_BUCKET_TOKENS:
            groups.append(current)
            current = []
    if current:
        groups[-1:] = [groups[-1] + current] if groups else [current]
    last = len(n) - 1
    labels = [f"{n[group[0]]}+" if group[-1] == last else str(n[group[0]]) if len(group) == 1
              else f"{n[group[0]]}-{n[group[-1]]}" for group in groups]
    counts = np.array([tokens[group].sum() for group in groups])
    merged = [np.array([(np.asarray(series, dtype=float)[group] * tokens[group]).sum() / max(tokens[group].sum(), 1)
                        for group in groups]) for series in means]
    return labels, counts, merged


def effective_n(results: dict, directory: Path) -> Path | None:
    """The ∞-gram row's test tokens by effective n (issue 37): the share of tokens in each bucket (its
    count written on it), and per bucket the mean log-probability of KN 5 alone, of ∞-gram + KN 5, and,
    where the run has them, of the best network alone (chosen on valid, among those mixed with the
    counts) and of its mixture with KN 5 and the ∞-gram (where the counts still win). Buckets of fewer
    than MIN_BUCKET_TOKENS tokens are merged with their neighbours ("13-14", "8+": `merged_buckets`)."""
    rows = by_id(results)
    row = rows.get(INFINI_GRAM)
    if not row or not row.get("effective_n"):
        return None
    profile = row["effective_n"]
    with_counts = {mixed["parts"][0]: mixed for mixed in rows.values()
                   if mixed.get("mix") == WITH_COUNTS and mixed.get("effective_n")}
    networks = [rows[network] for network in with_counts if rows.get(network, {}).get("valid_ppl") is not None]
    best = min(networks, key=lambda network: (network["valid_ppl"], network["id"]), default=None)
    lines = [(profile["kn_mean_logprob"], "interpolated KN 5"), (profile["mixed_mean_logprob"], "∞-gram + KN 5")]
    if best is not None:
        mixed = with_counts[best["id"]]
        lines += [(mixed["effective_n"]["network_mean_logprob"], best["model"]),
                  (mixed["effective_n"]["mixed_mean_logprob"], mixed["model"])]
    names, tokens, means = merged_buckets(profile["n"], np.array(profile["tokens"]),
                                          [profile["p_inf_nonzero"], *(series for series, _ in lines)])
    n = np.arange(len(names))
    fig, (share, logprob) = plt.subplots(2, 1, figsize=(7, 5.5), sharex=True)
    share.bar(n, tokens / tokens.sum(), color="0.6", label="share of test tokens")
    share.plot(n, means[0] * tokens / tokens.sum(), "o-", color="C2", label="... with P∞(w) > 0")
    for position, count, height in zip(n, tokens, tokens / tokens.sum()):
        share.annotate(f"{count:,}", (position, height), xytext=(0, 2), textcoords="offset points", ha="center",
                       va="bottom", fontsize=6.5)
    share.set(ylabel="share of test tokens", ylim=(0, 1.18 * (tokens / tokens.sum()).max()),
              title=f"Test tokens by the ∞-gram's effective n\n(each bar's tokens written on it; buckets merged "
                    f"to at least {MIN_BUCKET_TOKENS})")
    share.title.set_fontsize(10)
    share.legend(fontsize=8, loc="upper right")
    for series, (_, label) in zip(means[1:], lines):
        logprob.plot(n, series, marker="o", label=label)
    logprob.set(xlabel="effective n (length of the matched suffix + 1; 16: 16 or more)",
                ylabel="mean log-probability")
    logprob.set_xticks(n, names)
    logprob.legend(fontsize=8)
    return save_figure(fig, directory, "effective_n")


SHOWN_WORDS = 120  # the most frequent words of the embedding drawn in the word-vector figure
LABEL_OFFSETS = [(3, 2, "left", "bottom"), (3, -2, "left", "top"), (-3, 2, "right", "bottom"),
                 (-3, -2, "right", "top"), (0, 5, "center", "bottom"), (0, -5, "center", "top")]


def _class_colours(classes: list[int] | None, count: int) -> tuple[list, str]:
    """A colour for each of `count` words, and the caption's line saying what it means: one colour per
    exchange class holding two or more of them (the largest classes first; colours repeat past the
    palette), dark grey for a word alone in its class; one colour for all when `classes` is None or no
    two of the words share a class (the most frequent words often each have a class of their own)."""
    if classes is None:
        return ["C0"] * count, ""
    classes = classes[:count]
    shared = [c for c, size in Counter(classes).most_common() if size >= 2]
    if not shared:
        return ["C0"] * count, "no two of these words share a class of the exchange clustering: one colour"
    colour_of = {c: PALETTE[i % len(PALETTE)] for i, c in enumerate(shared)}
    return ([colour_of.get(c, "dimgrey") for c in classes],
            f"colour: the word's class in the exchange clustering ({len(shared)} classes shared by two or more "
            "of them), dark grey: no other word here shares it")


def _label_points(ax, points: np.ndarray, labels: list[str], colours: list, fontsize: float) -> int:
    """Label the points in order, each at the first of LABEL_OFFSETS where its text stays inside the
    axes and covers neither a point nor a label placed before; a label that fits nowhere is left out
    (its point stays). The axes' limits and position must be final. Returns the number of labels drawn."""
    renderer = ax.figure.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    dots = [Bbox.from_bounds(x - 2, y - 2, 4, 4) for x, y in ax.transData.transform(points)]  # pixels
    placed = []
    for (x, y), label, colour in zip(points, labels, colours):
        for dx, dy, ha, va in LABEL_OFFSETS:
            text = ax.annotate(label, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va,
                               fontsize=fontsize, color=colour, parse_math=False)
            box = text.get_window_extent(renderer)
            inside = frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
            if inside and not any(box.overlaps(other) for other in placed + dots):
                placed.append(box)
                break
            text.remove()
    return len(placed)


def word_vectors(results: dict, directory: Path) -> Path | None:
    """PCA and t-SNE of the learned word features C of the SHOWN_WORDS most frequent words, coloured by
    their exchange class when results carry the classes (embedding["classes"], aligned with words)."""
    embedding = results.get("embedding")
    if not embedding or len(embedding["words"]) < 10:
        return None
    from sklearn.manifold import TSNE

    words = embedding["words"][:SHOWN_WORDS]
    vectors = np.asarray(embedding["vectors"][:SHOWN_WORDS], dtype=np.float64)
    colours, colouring = _class_colours(embedding.get("classes"), len(words))
    centred = vectors - vectors.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    pca = centred @ vt[:2].T
    tsne = TSNE(n_components=2, perplexity=min(30, len(words) - 1), init="pca", random_state=0,
                metric="cosine").fit_transform(vectors)
    fig, axes = plt.subplots(2, 1, figsize=(9, 16))
    fig.subplots_adjust(left=0.02, right=0.98, bottom=0.02, top=0.93, hspace=0.1)
    fig.suptitle(f"{embedding['row']} word vectors C, the {len(words)} most frequent words\n{colouring}",
                 fontsize=11)
    for ax, points, title in [(axes[0], pca, "PCA"), (axes[1], tsne, "t-SNE (cosine)")]:
        ax.scatter(points[:, 0], points[:, 1], s=10, c=colours)
        low, high = points.min(axis=0), points.max(axis=0)
        pad = 0.06 * (high - low)
        ax.set(xlim=(low[0] - pad[0], high[0] + pad[0]), ylim=(low[1] - pad[1], high[1] + pad[1]),
               xticks=[], yticks=[])
        labelled = _label_points(ax, points, words, colours, fontsize=8.5)
        ax.set_title(f"{title}: {labelled} of {len(words)} words labelled (the rest would overlap)", fontsize=10)
    return save_figure(fig, directory, "word_vectors", tight=False)


def draw_all(results: dict, table, directory: Path) -> list[Path]:
    """The report's figures of `results` (and its `table`, which follows from them), drawn once."""
    def draw() -> list[Path]:
        drawn = [learning_curves(results, directory), time_to_perplexity(results, directory),
                 perplexity_against_compute(results, directory),
                 paper_vs_ours(results, table, directory),
                 context_size(results, directory), word_vectors(results, directory), effective_n(results, directory)]
        return [path for path in drawn if path is not None]
    return drawn_once(directory, "report", results, (DRAWING_CODE,), draw)
