"""The report's figures, drawn from results.json alone (matplotlib, PNG and SVG)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def _save(fig, directory: Path, name: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    for suffix in ("png", "svg"):
        fig.savefig(directory / f"{name}.{suffix}", dpi=110)
    plt.close(fig)
    return directory / f"{name}.png"


def learning_curves(results: dict, directory: Path) -> Path | None:
    curves = [(r["model"], r["curve"]) for r in results["rows"] if r["kind"] == "nplm" and r.get("curve")]
    if not curves:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, curve in curves:
        epochs = [point["epoch"] for point in curve]
        line, = ax.plot(epochs, [point["valid_perplexity"] for point in curve], marker="o", label=f"{name} valid")
        if all("train_perplexity" in point for point in curve):  # full-softmax training only
            ax.plot(epochs, [point["train_perplexity"] for point in curve], ls="--", color=line.get_color(),
                    alpha=0.6, label=f"{name} train")
    ax.set(xlabel="epoch", ylabel="perplexity", yscale="log", title="NPLM learning curves")
    ax.legend(fontsize=7, ncol=2)
    return _save(fig, directory, "learning_curves")


OBJECTIVE_LABELS = {"softmax": "full softmax", "importance": "importance sampling", "nce": "NCE",
                    "class": "class-factored softmax"}
BASELINE_LINES = {"kn-interp-5": "interpolated KN 5", "class-3-500": "class-based 3-gram, 500",
                  "kn-backoff-5": "KN back-off 5", "del-int": "Del. Int. trigram"}


def time_to_perplexity(results: dict, directory: Path) -> Path | None:
    """Validation perplexity against training seconds, one line per objective of the MLP1 network,
    with n-gram baselines as horizontal lines."""
    rows = {r["id"]: r for r in results["rows"]}
    mlp1 = rows.get("mlp1")
    if not mlp1:
        return None
    shape = {key: mlp1[key] for key in ("n", "h", "m", "direct")}
    runs = [r for r in results["rows"] if r["kind"] == "nplm" and r.get("curve")
            and all(r[key] == value for key, value in shape.items())]
    if not runs:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for run in runs:
        objective = (run.get("config") or {}).get("objective", "softmax")
        seconds = np.cumsum([point["seconds"] for point in run["curve"]])
        ax.plot(seconds / 60, [point["valid_perplexity"] for point in run["curve"]], marker="o", ms=3,
                label=f"{run['model']}: {OBJECTIVE_LABELS.get(objective, objective)}")
    for row_id, label in BASELINE_LINES.items():
        if rows.get(row_id, {}).get("valid_ppl"):
            ax.axhline(rows[row_id]["valid_ppl"], ls=":", lw=1, color="grey")
            ax.annotate(f"{label} {rows[row_id]['valid_ppl']:.0f}", (1.0, rows[row_id]["valid_ppl"]),
                        xycoords=("axes fraction", "data"), xytext=(-4, 2), textcoords="offset points",
                        ha="right", fontsize=7, color="dimgrey")
    ax.set(xlabel="training minutes (validation not counted)", ylabel="validation perplexity",
           title=f"Time to perplexity, MLP1 shape (n={shape['n']}, h={shape['h']}, m={shape['m']})")
    ax.set_xscale("log")
    ax.legend(fontsize=8)
    return _save(fig, directory, "time_to_perplexity")


def paper_vs_ours(table, directory: Path) -> Path | None:
    both = table[(~table["extra"]) & table["test paper"].notna() & table["test ours"].notna()]
    if both.empty:
        return None
    fig, ax = plt.subplots(figsize=(5.5, 5.5))
    ax.scatter(both["test paper"], both["test ours"])
    for _, row in both.iterrows():
        label = row["model"] if row["c"] is None or row["c"] != row["c"] else f"class {int(row['c'])}"
        label += "" if row["n"] is None else f" n{int(row['n'])}"
        ax.annotate(label, (row["test paper"], row["test ours"]), fontsize=6, xytext=(3, 3),
                    textcoords="offset points")
    low = min(both["test paper"].min(), both["test ours"].min()) * 0.95
    high = max(both["test paper"].max(), both["test ours"].max()) * 1.05
    ax.plot([low, high], [low, high], color="grey", lw=0.8, label="ours = paper")
    ax.set(xlabel="paper test perplexity", ylabel="our test perplexity", title="Paper vs ours (test)")
    ax.legend()
    return _save(fig, directory, "paper_vs_ours")


def context_size(results: dict, directory: Path) -> Path | None:
    rows = {r["id"]: r for r in results["rows"]}
    series = {"Kneser-Ney back-off": [f"kn-backoff-{n}" for n in (3, 4, 5)],
              "Kneser-Ney interpolated": [f"kn-interp-{n}" for n in (3, 4, 5)],
              "NPLM h50 m30 (MLP7, MLP5)": ["mlp7", "mlp5"]}
    fig, ax = plt.subplots(figsize=(6, 4))
    drawn = False
    for label, ids in series.items():
        points = [(rows[i]["n"], rows[i]["test_ppl"]) for i in ids if i in rows and rows[i].get("test_ppl")]
        if points:
            ax.plot(*zip(*points), marker="o", label=label)
            drawn = True
    if not drawn:
        plt.close(fig)
        return None
    ax.set(xlabel="n (context size + 1)", ylabel="test perplexity", title="Perplexity against context size")
    ax.set_xticks([3, 4, 5])
    ax.legend()
    return _save(fig, directory, "context_size")


def word_vectors(results: dict, directory: Path) -> Path | None:
    """PCA and t-SNE of the learned word features C of the frequent words."""
    embedding = results.get("embedding")
    if not embedding or len(embedding["words"]) < 10:
        return None
    from sklearn.manifold import TSNE

    words = embedding["words"]
    vectors = np.asarray(embedding["vectors"], dtype=np.float64)
    centred = vectors - vectors.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    pca = centred @ vt[:2].T
    tsne = TSNE(n_components=2, perplexity=min(30, len(words) - 1) / 1.0, init="pca", random_state=0,
                metric="cosine").fit_transform(vectors)
    fig, axes = plt.subplots(1, 2, figsize=(14, 7))
    for ax, points, title in [(axes[0], pca, "PCA"), (axes[1], tsne, "t-SNE (cosine)")]:
        ax.scatter(points[:, 0], points[:, 1], s=4, alpha=0.5)
        for word, (x, y) in zip(words, points):
            ax.annotate(word, (x, y), fontsize=5)
        ax.set_title(f"{embedding['row']} word vectors C, {len(words)} most frequent words: {title}")
        ax.set_xticks([])
        ax.set_yticks([])
    return _save(fig, directory, "word_vectors")


def draw_all(results: dict, table, directory: Path) -> list[Path]:
    drawn = [learning_curves(results, directory), time_to_perplexity(results, directory),
             paper_vs_ours(table, directory),
             context_size(results, directory), word_vectors(results, directory)]
    return [path for path in drawn if path is not None]
