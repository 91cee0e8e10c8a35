"""A comparison's rows as Ray tasks (reports.running.cluster), on an embedded Ray (`--jobs 2`) and on a cluster of
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

from lmbench.errors import LMBenchError
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
    with caplog.at_level(logging.INFO, logger="reports.running.cluster"):
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
    no retries, reports.running.cluster.RETRIES = 0, the run fails here: "row gru: its task was lost 1 times")."""
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
    from reports.running import cluster
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


# The cluster path as docs/parallel.md gives it (issue 69, items 3, 4 and 6): two `ray start` nodes with
# Ray's token authentication, joined; every address either joined or refused in one line, within seconds;
# an embedded Ray's session folder and token said in one line or not at all.

def free_port() -> int:
    import socket
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def ray_command(*words: str) -> list[str]:
    from pathlib import Path
    return [str(Path(sys.executable).parent / "ray"), *words]


LIVE_NODES = """
import sys, ray
ray.init(address=sys.argv[1], log_to_driver=False, logging_level="ERROR")
print(sum(node["Alive"] for node in ray.nodes()))
"""


def wait_for_nodes(address: str, count: int) -> None:
    for _ in range(60):
        done = subprocess.run([sys.executable, "-c", LIVE_NODES, address], capture_output=True, text=True)
        if done.returncode == 0 and done.stdout.split()[-1:] == [str(count)]:
            return
        time.sleep(1)
    raise AssertionError(f"the cluster at {address} never had {count} live nodes: {done.stderr[-2000:]}")


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("lmbench: error: ") and "\n" not in err, err
    return err


@pytest.mark.slow
def test_the_docs_commands_make_a_cluster_of_two_ray_start_nodes_that_runs_the_rows(files, sequential, tmp_path,
                                                                                    monkeypatch, capsys):
    """docs/parallel.md's commands as written, on one machine: the token made on the head, `ray start --head`,
    `ray start --address` (another node), then `--cluster`: the rows run on both nodes with the one-process
    figures. Then, at the same cluster, one line each in place of Ray's 20 s of "InvalidAuthToken" and "no Ray
    cluster answers there": a process without RAY_AUTH_MODE, a wrong token, token mode without a token."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # (the token in ~/.ray/auth_token: this test's own)
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    address = f"127.0.0.1:{free_port()}"
    subprocess.run(ray_command("get-auth-token", "--generate"), check=True, capture_output=True)
    nodes = [subprocess.Popen(ray_command("start", "--head", "--port", address.split(":")[1], "--num-cpus", "1",
                                          "--include-dashboard", "false", "--disable-usage-stats", "--block"),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        wait_for_nodes(address, 1)
        nodes.append(subprocess.Popen(ray_command("start", "--address", address, "--num-cpus", "1",
                                                  "--disable-usage-stats", "--block"),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_for_nodes(address, 2)
        driver = start_driver(files, tmp_path / "joined", address, "--only", "ngram")  # (Ray's token mode is
        assert driver.wait(timeout=600) == 0, driver.stderr.read()  # read once a process: a process of its own)
        rows = rows_of(tmp_path / "joined")
        assert len({row["node"]["ray_node"] for row in rows.values()}) == 2
        for row_id, row in rows.items():
            assert row["test_ppl"] == pytest.approx(sequential[row_id]["test_ppl"], rel=1e-5), row_id

        monkeypatch.delenv("RAY_AUTH_MODE")
        assert main(argv(files, tmp_path / "no-mode", "--cluster", address)) == 2
        assert "asks for Ray's token" in one_line_error(capsys) and not cached_rows(tmp_path / "no-mode")
        monkeypatch.setenv("RAY_AUTH_MODE", "token")
        monkeypatch.setenv("RAY_AUTH_TOKEN", "0123456789abcdef0123456789abcdef")
        assert main(argv(files, tmp_path / "wrong", "--cluster", address)) == 2
        assert "refused this machine's Ray token (from RAY_AUTH_TOKEN)" in one_line_error(capsys)
        monkeypatch.delenv("RAY_AUTH_TOKEN")
        monkeypatch.setenv("HOME", str(tmp_path / "elsewhere"))
        assert main(argv(files, tmp_path / "none", "--cluster", address)) == 2
        assert "RAY_AUTH_MODE=token, and this machine has no Ray token" in one_line_error(capsys)
    finally:
        for node in reversed(nodes):
            node.terminate()
            node.wait(timeout=60)


def test_a_ray_client_address_is_refused_in_one_line(files, tmp_path, capsys):
    """`ray://` passed the check and failed 45 s later naming a missing `ray[client]`."""
    assert main(argv(files, tmp_path, "--cluster", "ray://127.0.0.1:10001")) == 2
    assert "is a Ray Client address" in one_line_error(capsys) and not cached_rows(tmp_path)


def test_an_address_where_something_other_than_ray_answers_is_one_line(files, tmp_path, capsys):
    """A port that accepts and never speaks Ray's protocol (Ray waits 40 s there, then a traceback)."""
    import socket
    import threading
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        threading.Thread(target=lambda: [server.accept() for _ in range(20)], daemon=True).start()
        address = f"127.0.0.1:{server.getsockname()[1]}"
        assert main(argv(files, tmp_path, "--cluster", address)) == 2
    err = one_line_error(capsys)  # (said as no reply to Ray's protocol: Ray's own wait was 40 s, then a timeout)
    assert f"--cluster {address}: no Ray cluster answers there" in err
    assert re.search(r"no reply to Ray's protocol in \d+ s|RpcError", err), err


def test_a_cluster_with_no_node_on_this_machine_is_named(cluster, monkeypatch):
    """A driver joins through a node of its own machine; where none runs, `ray.init` waited 60 s and said only
    "Failed to connect". Seen from a machine without one (no raylet found here): the nodes and the fix."""
    import ray._private.services
    from reports.running import cluster as module
    from reports.running.ray_probe import probe
    head, _ = cluster
    assert probe(head.address)["answer"] == "joinable"
    monkeypatch.setattr(ray._private.services, "find_node_ids", lambda: [])
    answer = probe(head.address)
    assert answer["answer"] == "not_a_node" and answer["nodes"]
    monkeypatch.setattr(module, "probe", lambda address: answer)
    with pytest.raises(LMBenchError, match=rf"no node of that cluster runs on this machine \(its nodes: "
                                            rf"{answer['nodes'][0]}.*run `ray start --address {head.address}` here"):
        module.check_address(head.address)


@pytest.mark.parametrize("case", ("RAY_TMPDIR a file", "TMPDIR full"))
def test_jobs_where_rays_session_folder_cannot_be_used_is_one_line_naming_the_variable(files, tmp_path, capsys,
                                                                                        monkeypatch, case):
    """A full TMPDIR gave Ray's RuntimeError traceback after 30 s, a RAY_TMPDIR that is a file one line that
    never named it."""
    import shutil
    if case == "RAY_TMPDIR a file":
        (tmp_path / "a-file").write_text("")
        monkeypatch.setenv("RAY_TMPDIR", str(tmp_path / "a-file"))
        said = f"(RAY_TMPDIR={tmp_path / 'a-file'}) cannot be written"
    else:
        monkeypatch.delenv("RAY_TMPDIR", raising=False)
        monkeypatch.setenv("TMPDIR", str(tmp_path / "full"))
        usage = shutil.disk_usage
        monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(path)._replace(free=0)
                            if str(path).startswith(str(tmp_path / "full")) else usage(path))
        said = f"(TMPDIR={tmp_path / 'full'}) has 0.0 MiB free"
    assert main(argv(files, tmp_path / "run", "--jobs", "2")) == 2
    err = one_line_error(capsys)
    assert said in err and "set RAY_TMPDIR to a writable folder with room" in err
    assert not cached_rows(tmp_path / "run")


@pytest.mark.slow
def test_a_jobs_run_says_nothing_of_rays_token_and_keeps_it_on(files, tmp_path):
    """Every --jobs run printed Ray's "Token authentication is enabled for this Ray cluster" line: quiet
    now, and the embedded Ray still starts with its token (made in ~/.ray/auth_token where none was)."""
    import os
    env = {key: value for key, value in os.environ.items() if not key.startswith("RAY_AUTH")}
    env["HOME"] = str(tmp_path / "home")
    done = subprocess.run([sys.executable, "-m", "lmbench_cli", *argv(files, tmp_path, "--jobs", "2", "--only",
                                                                     "ngram")],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "Token authentication" not in done.stderr and "token" not in done.stdout.lower()
    assert (tmp_path / "home" / ".ray" / "auth_token").is_file()
