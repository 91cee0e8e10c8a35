"""Benchmark on Brown: the deleted-interpolation trigram, the exchange clustering and class models.

    NLTK_DATA=... PYTHONPATH=. python bench/cluster_bench.py [--classes 150 500] [--max-iters 20] [--json]
    PYTHONPATH=. python bench/cluster_bench.py --tiny     # the test suite's seconds-long run

Prints (and with --json, writes to stdout as one JSON object):
- deleted interpolation: counting, EM (valid components + EM) and scoring seconds, EM iterations,
  train/valid/test perplexity (Bengio et al. 2003 table 1: 31 / 352 / 336);
- for each C: clustering seconds, peak RSS (each clustering runs in its own child process, so the
  figure is that clustering's peak, including the loaded corpus), passes, words moved per pass and
  the final objective; the clustering is written to the cache, where `ClassNgram` finds it;
- for each C: the class trigram perplexities, the class-sequence model being the deleted-
  interpolation trigram over class ids (the suite's Kneser-Ney back-off takes its place after merge).
Timings are wall-clock on a shared machine: noisy.
"""

from __future__ import annotations

import argparse
import json
import logging
import resource
import subprocess
import sys
import time


def peak_rss_mb() -> float:
    """This process's peak resident memory: VmHWM (reset by exec, so a child's own peak), else
    getrusage's ru_maxrss (which on Linux carries over the parent's peak at fork)."""
    try:
        for line in open("/proc/self/status", encoding="utf-8"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def load_corpus(tiny: bool):
    """Brown, or under --tiny the bench scripts' tiny corpus (bench/tiny_corpus.py)."""
    if tiny:
        from tiny_corpus import tiny_corpus
        return tiny_corpus()
    from corpora.brown import load_brown
    return load_brown()


def measure_clustering(num_classes: int, max_iters: int, tiny: bool) -> dict:
    """Child-process work: cluster Brown train, save to the cache, report time and peak RSS."""
    from baselines.clustering import cache_path, cluster

    corpus = load_corpus(tiny)
    started = time.perf_counter()
    clustering = cluster(corpus.vocab, corpus.train, num_classes, max_iters=max_iters)
    seconds = time.perf_counter() - started
    clustering.save(cache_path(corpus, num_classes, max_iters))
    return {"classes": num_classes, "classes_used": clustering.num_classes,
            "seconds": round(seconds, 2),
            "peak_rss_mb": round(peak_rss_mb(), 1),
            "passes": clustering.info["iterations"], "moves": clustering.info["moves"],
            "objective_start": clustering.info["objective"][0],
            "objective_final": clustering.info["objective"][-1]}


def perplexities(model, corpus) -> dict:
    from lmbench.model import split_perplexity

    started = time.perf_counter()
    result = {f"{split}_perplexity": round(split_perplexity(model, corpus, split), 3)
              for split in ("train", "valid", "test")}
    result["score_seconds"] = round(time.perf_counter() - started, 3)
    return result


def deleted_interpolation(corpus) -> dict:
    from baselines.deleted_interpolation import DeletedInterpolationTrigram

    model = DeletedInterpolationTrigram().fit(corpus)
    return {"count_seconds": round(model.timings["count_seconds"], 3),
            "em_seconds": round(model.timings["em_seconds"], 3),
            "em_iterations": len(model.em_history) - 1, **perplexities(model, corpus)}


def class_trigram(corpus, num_classes: int, max_iters: int) -> dict:
    from baselines.class_ngram import ClassNgram
    from baselines.deleted_interpolation import DeletedInterpolationTrigram

    started = time.perf_counter()
    model = ClassNgram(DeletedInterpolationTrigram, num_classes, max_iters=max_iters).fit(corpus)
    return {"classes": num_classes, "class_model": "deleted-interpolation trigram",
            "fit_seconds": round(time.perf_counter() - started, 3), **perplexities(model, corpus)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", type=int, nargs="+", default=[150, 500])
    parser.add_argument("--max-iters", type=int, default=20, help="exchange passes at most")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--tiny", action="store_true", help="the tiny corpus of bench/tiny_corpus.py instead of "
                        "Brown, 4 and 8 classes, 3 passes: a seconds-long run (the test suite's)")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)  # one clustering, JSON out
    args = parser.parse_args()
    if args.tiny:
        args.classes, args.max_iters = [4, 8], 3
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
    if args.child is not None:
        print(json.dumps(measure_clustering(args.child, args.max_iters, args.tiny)))
        return

    corpus = load_corpus(args.tiny)
    report = {"corpus": corpus.name, "vocab_size": len(corpus.vocab),
              "deleted_interpolation": deleted_interpolation(corpus),
              "clustering": [], "class_trigram": []}
    print("deleted interpolation:", report["deleted_interpolation"], file=sys.stderr)
    for num_classes in args.classes:
        child = subprocess.run([sys.executable, __file__, "--child", str(num_classes),
                                "--max-iters", str(args.max_iters), *(["--tiny"] if args.tiny else [])],
                               stdout=subprocess.PIPE, check=True, text=True)
        report["clustering"].append(json.loads(child.stdout.strip().splitlines()[-1]))
        print("clustering:", report["clustering"][-1], file=sys.stderr)
        report["class_trigram"].append(class_trigram(corpus, num_classes, args.max_iters))
        print("class trigram:", report["class_trigram"][-1], file=sys.stderr)
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print(f"deleted interpolation: {report['deleted_interpolation']}")
        for row in report["clustering"]:
            print(f"clustering C={row['classes']}: {row['seconds']} s, peak RSS {row['peak_rss_mb']} MB, "
                  f"{row['passes']} passes, objective {row['objective_final']:.1f}")
        for row in report["class_trigram"]:
            print(f"class trigram C={row['classes']}: train/valid/test perplexity "
                  f"{row['train_perplexity']} / {row['valid_perplexity']} / {row['test_perplexity']}")


if __name__ == "__main__":
    main()
