"""A comparison's rows as Ray tasks (reports.cluster), on an embedded Ray (`--jobs 2`) and on a cluster of
three nodes simulated on this machine (ray.cluster_utils.Cluster: a head and two workers, each its own
raylet, one CPU and a small object store each): the rows run on more than one node with the sequential
run's figures, a node removed while rows train costs nothing but time, a driver killed leaves its
finished rows to the next run, Ctrl-C stops the run's tasks; what cannot run is refused before any row."""

import json
import logging
import re
import signal
import subprocess
import sys
import time

import pytest

from lmbench_cli import main
from tests.helpers import chain_text, write_splits

STORE = 80 * 2**20  # each simulated node's object store (Ray's least is 75 MiB)
# One test process runs this module's tests (under `make test`'s pytest-xdist). Split over two, each built its
# own simulated cluster, and two such clusters at once on one machine broke each other's drivers: CI (and
# `pytest -n 2 --dist loadgroup` here, 3 of 15 failed) saw "OwnerDiedError ... The object's owner has exited"
# for a driver still running, its raylets logging its job's first worker as dead. (An embedded `--jobs` Ray
# beside one cluster ran clean, as did two `--jobs` runs at once.)
pytestmark = pytest.mark.xdist_group("ray_cluster")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    with pytest.MonkeyPatch.context() as patch:  # (set before the nodes start: their workers inherit it)
        patch.setenv("LMBENCH_CACHE", str(folder / "cache"))
        yield write_splits(folder, train=chain_text(6000, 1), valid=chain_text(800, 2), test=chain_text(800, 3))


# rows long enough (their recipes on 20,000 tokens, at most 1e12 FLOPs each: the same updates in every run)
# for a node to be taken away while one trains on it: three networks, nothing else
LONG_ROWS = ("--budget-flops", "1e12", "--networks", "transformer,lstm,gru", "--skip", "ngram", "mix")


def argv(files, folder, *more, quick: bool = True) -> list[str]:
    return ["reproduce", "text", *(["--quick"] if quick else []), "--name", "markov", "--threads", "1", "--work-dir", str(folder / "work"),
            "--report-dir", str(folder / "report"), "--json",
            *[arg for split, path in files.items() for arg in (f"--{split}", str(path))], *more]


def rows_of(folder) -> dict:
    return {row["id"]: row for row in json.loads((folder / "report" / "results.json").read_text())["rows"]}


def cached_rows(folder) -> dict[str, int]:
    """The row cache's entries, by file name: the time each was written."""
    return {path.name: path.stat().st_mtime_ns for path in (folder / "work" / "rows").glob("*.json")}


@pytest.fixture(scope="module")
def sequential(files, tmp_path_factory):
    """The one-process run (no Ray): the figures every placement must give."""
    folder = tmp_path_factory.mktemp("sequential")
    assert main(argv(files, folder)) == 0
    return rows_of(folder)


def test_a_run_without_jobs_or_cluster_imports_nothing_of_ray(files, tmp_path):
    # (a process of its own: another test of this test process may have imported Ray)
    run = (f"import sys; from lmbench_cli import main; code = main({argv(files, tmp_path, '--only', 'ngram')!r}); "
           "sys.exit(3 if 'ray' in sys.modules else code)")
    assert subprocess.run([sys.executable, "-c", run], capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def cluster(files):
    from ray.cluster_utils import Cluster
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "object_store_memory": STORE,
                                                            "include_dashboard": False})
    workers = [cluster.add_node(num_cpus=1, object_store_memory=STORE) for _ in range(2)]
    cluster.wait_for_nodes()
    yield cluster, workers
    cluster.shutdown()


def assert_sequential_figures(rows: dict, sequential: dict) -> None:
    assert rows.keys() == sequential.keys()
    for row_id, row in sequential.items():
        assert rows[row_id].get("fingerprint") == row.get("fingerprint"), row_id  # (none: a row not run)
        for split in ("valid_ppl", "test_ppl"):
            assert rows[row_id][split] == pytest.approx(row[split], rel=1e-5), (row_id, split)


def start_driver(files, folder, address: str, *more, quick: bool = True) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "lmbench_cli",
                             *argv(files, folder, "--cluster", address, *more, quick=quick)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def wait_for_rows(folder, count: int, driver: subprocess.Popen) -> None:
    while len(cached_rows(folder)) < count:
        assert driver.poll() is None, driver.stderr.read()
        time.sleep(0.2)


@pytest.mark.slow
def test_jobs_2_runs_rows_on_an_embedded_ray_with_the_sequential_figures_and_resumes_without_training_again(
        files, sequential, tmp_path, caplog):
    """--jobs 2: every row that ran is recorded with the Ray node that ran it, with the one-process run's
    figures, its start said when its task began (the bar moves from there); a run stopped after its n-gram
    rows and resumed with --jobs 2 trains none of them again."""
    with caplog.at_level(logging.INFO, logger="reports.cluster"):
        assert main(argv(files, tmp_path / "beside", "--jobs", "2")) == 0
    rows = rows_of(tmp_path / "beside")
    assert_sequential_figures(rows, sequential)
    assert all(row["node"]["ray_node"] for row in rows.values() if row["kind"] != "mix")
    said = [record.getMessage() for record in caplog.records]
    for row in rows.values():
        if row["kind"] != "mix" and row.get("status") != "not run":
            assert f"row {row['id']}: started on {row['node']['host']}" in said, row["id"]
    assert all("ray_node" not in row["node"] for row in sequential.values())  # (one process: its host only)
    assert main(argv(files, tmp_path / "resumed", "--only", "ngram")) == 0
    finished = cached_rows(tmp_path / "resumed")
    assert main(argv(files, tmp_path / "resumed", "--jobs", "2")) == 0
    assert all(cached_rows(tmp_path / "resumed")[name] == mtime for name, mtime in finished.items())
    assert_sequential_figures(rows_of(tmp_path / "resumed"), sequential)


def test_jobs_starts_its_own_ray_beside_a_cluster_running_on_this_machine(files, cluster, tmp_path):
    """--jobs 2 while a Ray cluster runs here (a user's own, or another test's: CI saw `ray.init()` join it
    through /tmp/ray/ray_current_cluster and fail, "num_cpus ... must not be provided"): the run starts its
    own embedded Ray, none of its rows runs on that cluster's nodes, and the cluster is left running."""
    assert main(argv(files, tmp_path, "--jobs", "2", "--only", "ngram")) == 0
    head, workers = cluster
    theirs = {head.head_node.node_id, *(worker.node_id for worker in workers)}
    ours = {row["node"]["ray_node"] for row in rows_of(tmp_path).values() if "ray_node" in row["node"]}
    assert ours and not ours & theirs


@pytest.mark.slow
def test_rows_run_on_several_nodes_with_the_sequential_runs_figures(files, sequential, cluster, tmp_path):
    """Every row that ran is recorded with its node; they ran on more than one of the three; every
    figure is the one-process run's."""
    assert main(argv(files, tmp_path, "--cluster", cluster[0].address)) == 0
    rows = rows_of(tmp_path)
    assert_sequential_figures(rows, sequential)
    nodes = {row["node"].get("ray_node") for row in rows.values() if row["kind"] != "mix"}
    assert None not in nodes and len(nodes) > 1


@pytest.mark.slow
def test_a_driver_killed_leaves_its_finished_rows_to_the_next_run(files, sequential, cluster, tmp_path):
    driver = start_driver(files, tmp_path, cluster[0].address)
    wait_for_rows(tmp_path, 3, driver)
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    finished = cached_rows(tmp_path)
    assert main(argv(files, tmp_path, "--cluster", cluster[0].address)) == 0
    assert all(cached_rows(tmp_path)[name] == mtime for name, mtime in finished.items())
    assert_sequential_figures(rows_of(tmp_path), sequential)


FREE_CPUS = """
import sys, time, ray
ray.init(address=sys.argv[1], log_to_driver=False, logging_level="ERROR")
for _ in range(300):
    if ray.available_resources().get("CPU", 0) >= ray.cluster_resources()["CPU"]:
        print("free"); break
    time.sleep(0.2)
"""


@pytest.fixture(scope="module")
def longer(files, tmp_path_factory):
    """A train split of 20,000 tokens: LONG_ROWS' networks train there long enough to be caught training."""
    return write_splits(tmp_path_factory.mktemp("longer"), train=chain_text(20000, 1),
                        valid=files["valid"].read_text(), test=files["test"].read_text())


def wait_for_training(folder, driver: subprocess.Popen, networks: int = 3) -> None:
    """Until each of the run's `networks` network rows has its training folder (its task is training)."""
    while len(list((folder / "work" / "nplm").glob("*"))) < networks:
        assert driver.poll() is None, driver.stderr.read()
        time.sleep(0.05)


@pytest.mark.slow
def test_ctrl_c_stops_the_runs_tasks_on_the_cluster_and_keeps_its_finished_rows(longer, cluster, tmp_path):
    """SIGINT to the driver while rows train (its n-gram rows finished, its three networks training: caught
    there, not after the quick rows of a --quick run, which CI once saw all finish before the signal): it
    ends with one line, the cluster's CPUs are all free again (no task of the run left), and the rows
    finished are in the row cache."""
    rows = ("--budget-flops", "1e12", "--networks", "transformer,lstm,gru", "--skip", "mix")
    driver = start_driver(longer, tmp_path, cluster[0].address, *rows, quick=False)
    wait_for_rows(tmp_path, 2, driver)
    wait_for_training(tmp_path, driver)
    driver.send_signal(signal.SIGINT)
    _, errors = driver.communicate(timeout=120)
    assert driver.returncode != 0 and "Traceback" not in errors, errors
    assert len(cached_rows(tmp_path)) >= 2
    free = subprocess.run([sys.executable, "-c", FREE_CPUS, cluster[0].address], capture_output=True, text=True,
                          timeout=180)
    assert free.stdout.strip() == "free", free.stderr


BUSY_NODES = """
import sys, time, ray
from ray._private.state import available_resources_per_node
ray.init(address=sys.argv[1], log_to_driver=False, logging_level="ERROR")
while True:
    print(" ".join(node for node, free in available_resources_per_node().items() if free.get("CPU", 0) < 1),
          flush=True)
    time.sleep(0.05)
"""


def busy_worker(cluster, driver: subprocess.Popen, folder):
    """A worker node (not the head) whose task of the driver's run is training its network: once every
    network row's training folder is there (three rows on three one-CPU nodes: one each), the first worker
    still busy."""
    head, workers = cluster
    probe = subprocess.Popen([sys.executable, "-c", BUSY_NODES, head.address], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
    try:
        for line in probe.stdout:
            assert driver.poll() is None, driver.stderr.read()
            busy = [worker for worker in workers if worker.node_id in line.split()]
            if busy and len(list((folder / "work" / "nplm").glob("*"))) == 3:
                return busy[0]
    finally:
        probe.kill()
        probe.wait()


@pytest.mark.slow
def test_a_node_removed_while_rows_train_and_the_run_finishes_with_the_same_figures(longer, cluster, tmp_path,
                                                                                      tmp_path_factory):
    """(Last of the cluster's tests: it takes a node away.) A worker node is removed while a row's task runs
    on it: the task runs again on the nodes left (Ray's retries), and the run gives the same figures (with
    no retries, reports.cluster.RETRIES = 0, the run fails here: "row gru: its task was lost 1 times")."""
    folder = tmp_path_factory.mktemp("long-sequential")
    assert main(argv(longer, folder, *LONG_ROWS, quick=False)) == 0
    sequential = rows_of(folder)
    driver = start_driver(longer, tmp_path, cluster[0].address, *LONG_ROWS, quick=False)
    removed = busy_worker(cluster, driver, tmp_path)
    cluster[0].remove_node(removed)
    _, errors = driver.communicate(timeout=600)
    assert driver.returncode == 0, errors
    rows = rows_of(tmp_path)
    assert_sequential_figures(rows, sequential)
    assert removed.node_id not in {row["node"]["ray_node"] for row in rows.values() if row["kind"] == "network"}


@pytest.mark.parametrize("address", ("127.0.0.1:9", "no-such-host.invalid:6379", "localhost:notaport"))
def test_a_cluster_that_does_not_answer_is_one_line_before_any_row(files, tmp_path, capsys, address):
    assert main(argv(files, tmp_path, "--cluster", address)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"lmbench: error: --cluster {address}: no Ray cluster answers there") and "\n" not in err
    assert not cached_rows(tmp_path)


@pytest.mark.parametrize("address", ("garbage", "127.0.0.1:9"))
def test_cluster_auto_where_ray_address_does_not_answer_is_one_line_before_any_row(files, tmp_path, capsys, monkeypatch,
                                                                                   address):
    """RAY_ADDRESS=garbage with --cluster auto went past the early check (a fresh round's case)."""
    monkeypatch.setenv("RAY_ADDRESS", address)
    assert main(argv(files, tmp_path, "--cluster", "auto")) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"lmbench: error: --cluster auto (RAY_ADDRESS={address}): no Ray cluster answers there")
    assert "\n" not in err and not cached_rows(tmp_path)


def test_cluster_auto_without_ray_address_is_one_line(files, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert main(argv(files, tmp_path, "--cluster", "auto")) == 2
    assert "RAY_ADDRESS is not set" in capsys.readouterr().err
    assert not cached_rows(tmp_path)


def test_jobs_beyond_what_the_memory_holds_is_refused_before_any_row(files, tmp_path, capsys, monkeypatch):
    """(Issue 59, item 11) never more rows at once than rows to run (64 asked of a table of fewer n-gram
    rows), and a K whose rows this machine cannot hold refused, naming the K that fits."""
    from reports import cluster
    monkeypatch.setattr(cluster, "available_memory", lambda: 2 * cluster.WORKER_BYTES)
    assert main(argv(files, tmp_path, "--jobs", "64", "--only", "ngram")) == 2
    err = capsys.readouterr().err.strip()
    at_once = int(re.search(r"--jobs 64: (\d+) rows at once would hold about", err).group(1))
    assert 2 < at_once < 64 and "give --jobs 1 or fewer" in err and "\n" not in err
    assert not cached_rows(tmp_path)


def test_a_row_needing_more_cpus_than_any_node_has_is_refused_before_any_row(files, tmp_path, capsys):
    """On a cluster whose one node has one CPU, a row of --threads 2 could never be placed (its task would
    wait for ever): one line naming the resource and the fix."""
    from ray.cluster_utils import Cluster
    small = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "object_store_memory": STORE,
                                                          "include_dashboard": False})
    try:
        assert main([*argv(files, tmp_path, "--cluster", small.address, "--only", "ngram"), "--threads", "2"]) == 2
    finally:
        small.shutdown()
    err = capsys.readouterr().err
    assert "needs 2 CPU on one node" in err and "has at most 1 on any node" in err and "--threads 1" in err
    assert not cached_rows(tmp_path)
