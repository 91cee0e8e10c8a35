"""A comparison's rows as tasks of Ray: `reproduce --jobs K` (an embedded Ray on this machine, K rows at
once) and `reproduce --cluster ADDRESS` (a running cluster: `ray start --head` on one machine, `ray start
--address` on the others; docs/parallel.md).

The corpus goes to the object store once (`ray.put`). Each n-gram or network row is a task that declares
what it needs (CPU threads; half a GPU for a network where the cluster has GPUs; an n-gram row's counts
as memory), runs `RowRunner.run` (reports.running.row_runner) on whichever node Ray places it, and returns its record and its
log-probabilities to this process, which alone writes the row cache, results.json and the report: a
worker node needs the project installed and nothing else, no shared folder and no corpus file. A
network trains in the run's work folder where the node sees it (this machine, a shared disk), so that a
task run again resumes from its checkpoint; elsewhere in the node's own temporary space (resumed if the
task runs again there, else trained afresh). Mixtures are cheap and read their parts' saved
log-probabilities: they run here, once their parts are in. The longest rows are sent first.

A task whose worker process or node dies is run again (`RETRIES`, Ray's own retries); an error of the
row itself (NaN, a bad option) is raised here as it would be in one process. Ctrl-C cancels this run's
tasks, the rows finished so far being cached already. An address where no Ray answers, a row asking
more of a resource than any node has, or a `--jobs K` whose rows this machine's memory cannot hold, is
refused in one line before any row runs. `OnRay` is the scheduler (reports.running.schedule) of those two options;
only reports.running.pipeline imports this module, and only for them: a default run imports nothing of Ray.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import ray
from ray.util.queue import Queue
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from lmbench.errors import LMBenchError
from lmbench.memory import available_memory
from reports.experiments import Row
from reports.running.row_runner import RowJob, RowRunner
from reports.running.schedule import RowCache
from reports.work_folder import WorkFolder

log = logging.getLogger(__name__)

RETRIES = 3  # runs of a task again after its worker process or node died
NETWORK_GPU_SHARE = 0.5  # a network row's share of a GPU where the cluster has GPUs (two small networks a GPU)
# What one row's task holds, roughly: a Python with numpy and torch imported (measured: about 0.5 GB
# resident once a network trains, docs/parallel.md), then an n-gram row's counts (its orders' tables, by
# train token). An estimate: to refuse a --jobs K that cannot fit, and to declare an n-gram task's memory.
WORKER_BYTES = 600 * 2**20
NGRAM_BYTES_PER_TOKEN = 400
CONNECT_SECONDS = 10  # to reach a cluster's address
RAY_TEMP_BYTES = 64 * 2**20  # an embedded Ray's session folder (its logs, sockets, port files) at least
PROBE_SECONDS = 15  # for Ray's GCS there to answer (reports.running.ray_probe: about 2 s where it does)
WAIT_SECONDS = 0.5  # the driver's wait for a task between two looks at Ctrl-C
OBJECT_STORE_BYTES = 100 * 2**20  # an embedded Ray's object store at least (the corpus, the rows' log-probabilities)
TOKEN_LOGGER = "ray._private.authentication.authentication_token_setup"  # its line at each local start
QUIET = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)  # every ray.init here


def row_memory(row: Row, train_tokens: int) -> int:
    """The bytes a row's task is expected to hold: `WORKER_BYTES`, and an n-gram row's counts."""
    return WORKER_BYTES + (NGRAM_BYTES_PER_TOKEN * train_tokens if row.kind == "ngram" else 0)


# The signals whose handlers a command sets (lmbench_cli: 128 + the signal's number, one line, the staging
# folders cleaned up) and that `ray.init` replaces with its own (SIGTERM: its handler exits through Ray's stack
# dump, 134): set back as they were once Ray has started (issue 69).
KEPT_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT")
                     if hasattr(signal, name))


@contextmanager
def signal_handlers_kept():
    """The handlers of KEPT_SIGNALS as they were before the block, set back after it (in the main thread,
    the only one that may set them)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {signum: signal.getsignal(signum) for signum in KEPT_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in before.items():
            if handler is not None and signal.getsignal(signum) is not handler:
                signal.signal(signum, handler)


def start_ray(address: str | None, slots: int, per_row: int, store_bytes: int) -> None:
    """Join the cluster at --cluster's `address`, or (None) start an embedded Ray here holding `slots` rows of
    `per_row` threads each; one line naming the address where no Ray answers there."""
    if address is None:
        start_embedded(slots * per_row, store_bytes)
        return
    check_address(address)
    try:
        with signal_handlers_kept():
            ray.init(address=address, **QUIET)
    except Exception as error:  # (Ray raises ConnectionError, RuntimeError or ValueError, by case)
        detail = str(error).strip().splitlines()[0] if str(error).strip() else "no detail"
        raise LMBenchError(f"--cluster {address}: no Ray cluster answers there ({type(error).__name__}: {detail}); "
                           "start one with `ray start --head` on that machine, or give the address it printed") from None


def start_embedded(cpus: int, store_bytes: int) -> None:
    """A Ray of this process's own on this machine (`--jobs K`; bench/ray_start.py times it): address
    "local", so that it starts one even where another Ray runs here (`ray.init()` would join the one
    /tmp/ray/ray_current_cluster or RAY_ADDRESS names, and refuse `num_cpus` there). Token authentication
    on, as Ray starts a new local cluster by default (RAY_AUTH_MODE unset), without Ray's line saying so at
    every run; its session folder checked first (`check_ray_temp`), and a start that fails
    anyway said in one line."""
    check_ray_temp()
    try:
        with signal_handlers_kept(), logger_quiet(TOKEN_LOGGER):
            ray.init(address="local", num_cpus=cpus, object_store_memory=store_bytes, **QUIET)
    except (OSError, RuntimeError, ValueError) as error:
        detail = (str(error).strip().splitlines() or ["no detail"])[0]
        raise LMBenchError(f"--jobs: Ray did not start here ({type(error).__name__}: {detail}); its session folder "
                           f"is {ray_temp()[1]}: set RAY_TMPDIR to a writable folder with room if that is the cause") from None


@contextmanager
def logger_quiet(name: str):
    """The logger `name` says nothing below an error in the block."""
    logger = logging.getLogger(name)
    before = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(before)


def ray_temp() -> tuple[Path, str]:
    """The folder where Ray keeps this machine's session files, by Ray's own rule (RAY_TMPDIR, else TMPDIR on
    Linux, else /tmp; then ray/ in it), and its name for a message: with the variable that chose it."""
    for variable in ("RAY_TMPDIR", *(("TMPDIR",) if sys.platform.startswith("linux") else ())):
        if variable in os.environ:
            folder = Path(os.environ[variable]) / "ray"
            return folder, f"{folder} ({variable}={os.environ[variable]})"
    return Path("/tmp/ray"), "/tmp/ray"


def check_ray_temp() -> None:
    """Refuse in one line, naming the variable, a Ray session folder that cannot be made or written, or on a
    file system with less than RAY_TEMP_BYTES free (Ray then fails after 30 s with a traceback)."""
    folder, named = ray_temp()
    fix = "set RAY_TMPDIR to a writable folder with room (Ray keeps its session files there)"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder):
            pass
        free = shutil.disk_usage(folder).free
    except OSError as error:
        raise LMBenchError(f"--jobs: Ray's session folder {named} cannot be written ({error.strerror or error}): "
                           f"{fix}") from None
    if free < RAY_TEMP_BYTES:
        raise LMBenchError(f"--jobs: Ray's session folder {named} has {free / 2**20:.1f} MiB free, Ray needs about "
                           f"{RAY_TEMP_BYTES // 2**20} MiB: free space there, or {fix}")


def check_address(address: str) -> None:
    """Join-or-refuse, within seconds: refuse in one line an address where nothing listens (Ray itself waits
    a long while there), `auto` without RAY_ADDRESS, a Ray Client address (`ray://`), a cluster that refuses
    this process's token or that this machine runs no node of, or something other than Ray answering there
    (`reports.running.ray_probe` asks it). Said before the corpus is read (reports.cli) and again when Ray starts."""
    if address == "auto" and not os.environ.get("RAY_ADDRESS"):
        raise LMBenchError("--cluster auto joins the cluster RAY_ADDRESS names, and RAY_ADDRESS is not set: give "
                           "--cluster HOST:6379 (the address `ray start --head` printed), or set RAY_ADDRESS")
    named = f"--cluster {address}"
    if address == "auto":
        address = os.environ["RAY_ADDRESS"]
        named += f" (RAY_ADDRESS={address})"
    if address.startswith("ray://"):
        raise LMBenchError(f"{named} is a Ray Client address, which this suite does not use (its driver joins the "
                           "cluster from one of the cluster's own machines): run lmbench on a node of the cluster "
                           "with --cluster HEAD:6379, the address `ray start --head` printed (docs/parallel.md)")
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=CONNECT_SECONDS).close()
    except (OSError, ValueError) as error:
        raise LMBenchError(f"{named}: no Ray cluster answers there ({error}); start one with `ray "
                           "start --head` on that machine, or give the HOST:PORT it printed") from None
    token_mode = os.environ.get("RAY_AUTH_MODE", "").lower() == "token"
    if token_mode and token_source() is None:  # (Ray's client would abort the process)
        raise LMBenchError(f"{named}: RAY_AUTH_MODE=token, and this machine has no Ray token: put the head's "
                           "token (`ray get-auth-token` on the head prints it) in ~/.ray/auth_token or RAY_AUTH_TOKEN")
    answer = probe(address)
    if answer["answer"] == "token" and token_mode:
        raise LMBenchError(f"{named} refused this machine's Ray token (from {token_source()}): use the head's "
                           "(`ray get-auth-token` on the head prints it), in ~/.ray/auth_token or RAY_AUTH_TOKEN")
    if answer["answer"] == "token":
        raise LMBenchError(f"{named} asks for Ray's token (its head started with token authentication) and this "
                           "process sends none: set RAY_AUTH_MODE=token, with the head's token in ~/.ray/auth_token "
                           "or RAY_AUTH_TOKEN (docs/parallel.md)")
    if answer["answer"] == "not_a_node":
        raise LMBenchError(f"{named}: no node of that cluster runs on this machine (its nodes: "
                           f"{', '.join(answer['nodes'])}), and a driver joins through a node of its own machine: "
                           f"run `ray start --address {address}` here first, or lmbench on one of its nodes")
    if answer["answer"] != "joinable":
        raise LMBenchError(f"{named}: no Ray cluster answers there ({answer['detail']}); start one with `ray "
                           "start --head` on that machine, or give the HOST:PORT it printed")


def token_source() -> str | None:
    """Where Ray's client takes this machine's token from (Ray's own order), or None where it has none."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return "RAY_AUTH_TOKEN"
    path = Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")
    if path.is_file():
        return f"RAY_AUTH_TOKEN_PATH={path}" if os.environ.get("RAY_AUTH_TOKEN_PATH") else str(path)
    return None


def probe(address: str) -> dict:
    """reports.running.ray_probe's answer for the address, in a process of its own (Ray's client lines discarded), at
    most PROBE_SECONDS: past that, nothing that speaks Ray answered."""
    try:
        done = subprocess.run([sys.executable, "-m", "reports.running.ray_probe", address], capture_output=True, text=True,
                              timeout=PROBE_SECONDS, cwd=Path(__file__).resolve().parents[2])
    except subprocess.TimeoutExpired:
        return {"answer": "no_ray", "detail": f"no reply to Ray's protocol in {PROBE_SECONDS} s"}
    lines = done.stdout.strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        return {"answer": "no_ray", "detail": f"Ray's client ended with status {done.returncode}"}


def task_options(row: Row, per_row: int, train_tokens: int, gpus: bool) -> dict:
    """What a row's task declares to Ray: its threads, half a GPU for a network where the cluster has
    GPUs, an n-gram row's counts as memory; run again where its worker or node dies."""
    options = {"num_cpus": per_row, "max_retries": RETRIES, "retry_exceptions": False}
    if row.kind == "network" and gpus:
        options["num_gpus"] = NETWORK_GPU_SHARE
    if row.kind == "ngram":
        options["memory"] = row_memory(row, train_tokens) - WORKER_BYTES
    return options


def check_resources(rows: list[Row], options: dict[str, dict], where: str) -> None:
    """Refuse, in one line naming it, a resource a row asks more of than any node has (its task would
    wait for ever)."""
    nodes = [node["Resources"] for node in ray.nodes() if node.get("Alive")]
    for row in rows:
        for option, resource in (("num_cpus", "CPU"), ("num_gpus", "GPU"), ("memory", "memory")):
            need = options[row.id].get(option, 0)
            most = max((node.get(resource, 0) for node in nodes), default=0)
            if need > most:
                shown = (lambda count: f"{count / 2**30:.1f} GiB") if resource == "memory" else (lambda count: f"{count:g}")
                advice = f"give --threads {int(most)} or fewer" if resource == "CPU" and most >= 1 else "add a node that has it"
                raise LMBenchError(f"row {row.id} needs {shown(need)} {resource} on one node, and {where} has at most "
                                   f"{shown(most)} on any node: {advice} (or run without --cluster/--jobs)")


@ray.remote
def run_row_task(runner: RowRunner, corpus, job: RowJob, starts) -> tuple[dict, dict]:
    """A row run on a node of the cluster by `runner` (reports.running.row_runner), the corpus from the object store; its
    start told to the driver through `starts` (a ray.util.queue.Queue: the row's id and this host)."""
    try:
        starts.put((job.row.id, platform.node()))
    except ray.exceptions.RayError:  # (the driver's queue gone: the bar is an aid, never a row's failure)
        pass
    work = runner.work
    if not work.path.is_dir():  # not this node's to see: its own temporary space
        work = WorkFolder(Path(tempfile.gettempdir()) / "lmbench-rows" / runner.digest)
    result, logprobs = replace(runner, corpus=corpus, work=work).run(job)
    result["node"] = {"host": platform.node(), "ray_node": ray.get_runtime_context().get_node_id()}
    return result, logprobs


@dataclass
class OnRay:
    """The rows as tasks of Ray (module docstring): `jobs` rows at once on an embedded Ray of this machine, or
    on the running cluster at `cluster`; `per_row`: each row's CPU threads; `expected`: each row's expected
    seconds (the longest are sent first)."""
    jobs: int
    cluster: str | None
    per_row: int
    expected: dict = field(default_factory=dict)

    def run(self, jobs: list[RowJob], rows: RowCache, results: dict) -> None:
        """Put every row's record into `results`: read from the row cache, or run as a Ray task (a mixture
        here, once its parts are in), written to the row cache as it comes back."""
        to_run, mixtures = [], []
        for job in jobs:
            waiting = {j.row.id for j in to_run + mixtures}
            if any(part in waiting for part in job.row.parts):
                mixtures.append(job)  # after its parts
            elif (cached := rows.read(job)) is not None:
                results[job.row.id] = cached
            elif job.row.kind == "mix":
                mixtures.append(job)
            else:
                to_run.append(job)
        if not to_run:  # (nothing for Ray: the mixtures left run here)
            run_ready_mixtures(mixtures, rows, results)
            return
        to_run.sort(key=lambda j: -(self.expected.get(j.row.id) or 0.0))  # the longest first: the run ends soonest
        corpus = rows.runner.corpus
        train_tokens = len(corpus.train)
        slots = min(self.jobs, len(to_run))  # never more rows at once than rows to run
        if self.cluster is None:
            largest = max(row_memory(job.row, train_tokens) for job in to_run)
            have = available_memory()
            if slots * largest > have:
                raise LMBenchError(f"--jobs {self.jobs}: {slots} rows at once would hold about "
                                   f"{slots * largest / 2**30:.1f} GiB and this machine has {have / 2**30:.1f} GiB "
                                   f"available: give --jobs {max(1, have // largest)} or fewer")
        corpus_bytes = sum(corpus.split(split).nbytes for split in ("train", "valid", "test"))
        start_ray(self.cluster, slots, self.per_row, max(OBJECT_STORE_BYTES, 4 * corpus_bytes))
        try:
            self._run_tasks(to_run, mixtures, rows, results)
        finally:
            ray.shutdown()

    def _run_tasks(self, to_run: list[RowJob], mixtures: list[RowJob], rows: RowCache, results: dict) -> None:
        progress = rows.progress
        gpus = ray.cluster_resources().get("GPU", 0) > 0
        train_tokens = len(rows.runner.corpus.train)
        options = {job.row.id: task_options(job.row, self.per_row, train_tokens, gpus) for job in to_run}
        check_resources([job.row for job in to_run], options, f"the cluster at {self.cluster}" if self.cluster
                        else "this machine's Ray")
        run_ready_mixtures(mixtures, rows, results)  # (those whose parts were cached)
        # what a task needs of the run: the runner at the rows' threads, the corpus apart (in the object store)
        corpus_ref = ray.put(rows.runner.corpus)
        runner_ref = ray.put(replace(rows.runner, corpus=None, threads=self.per_row))
        # the rows' starts, for the bar: an actor on this process's node (a node removed takes none of it),
        # holding no CPU a row's task would need
        starts = Queue(actor_options={"num_cpus": 0, "scheduling_strategy": NodeAffinitySchedulingStrategy(
            ray.get_runtime_context().get_node_id(), soft=True)})
        pending = {run_row_task.options(**options[job.row.id]).remote(runner_ref, corpus_ref, job, starts): job
                   for job in to_run}
        log.info("reproduce: %d rows as Ray tasks on %d node(s), %d CPU thread(s) each, %d at once here at most",
                 len(to_run), sum(bool(node.get("Alive")) for node in ray.nodes()), self.per_row,
                 min(self.jobs, len(to_run)))

        def take(ref) -> None:
            job = pending.pop(ref)
            try:
                result, logprobs = ray.get(ref)
            except ray.exceptions.RayTaskError as error:  # the row's own error, as one process would raise it
                raise error.cause if isinstance(error.cause, BaseException) else error from None
            except ray.exceptions.RayError as error:  # its worker or node lost more times than it is retried
                detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
                raise LMBenchError(f"row {job.row.id}: its task was lost {RETRIES + 1} times ({type(error).__name__}: "
                                   f"{detail.split('. ')[0]}); the rows finished are cached: run the same "
                                   "command again") from None
            results[job.row.id] = rows.store(job, result, logprobs)
            progress.ran(job.row.id)
            log.info("row %s: ran on %s (%.0f s): valid %.1f test %.1f", job.row.id, result["node"]["host"],
                     result["seconds"], result["valid_ppl"], result["test_ppl"])
            run_ready_mixtures(mixtures, rows, results)

        try:
            with signals_noted() as noted:
                while pending and not noted:
                    done, _ = ray.wait(list(pending), num_returns=1, timeout=WAIT_SECONDS)
                    for row_id, host in started_rows(starts):
                        progress.started(row_id)
                        log.info("row %s: started on %s", row_id, host)
                    progress.tick()
                    if done:
                        take(done[0])
            if noted:  # a terminating signal: the command's own handler, set back, ends the run as it ends the command
                if noted[0] != signal.SIGINT:
                    signal.raise_signal(noted[0])
                raise KeyboardInterrupt  # Ctrl-C (even where ignored when the run started), or a handler that returned
        except BaseException:  # Ctrl-C, a terminating signal, a row that failed: this run's other tasks stop
            for ref in pending:
                ray.cancel(ref, force=True)
            raise


def started_rows(starts) -> list[tuple[str, str]]:
    """The (row, host) pairs the tasks put into `starts` since the last look; none where the queue is
    gone (its node lost: the bar then moves as rows finish)."""
    try:
        return starts.get_nowait_batch(starts.qsize())
    except ray.exceptions.RayError:
        return []


@contextmanager
def signals_noted():
    """KEPT_SIGNALS noted in a list while the driver waits on Ray, the loop stopping at its next look (`ray.wait`
    may take Ctrl-C itself and let the wait go on: CI saw a run interrupted so finish with exit 0; a command's
    SIGTERM raised inside it came out as a plain KeyboardInterrupt, exit 130); the caller raises the first one
    again once the handlers are set back (Ctrl-C as KeyboardInterrupt, even where it was ignored when the run
    started, as a shell's background job has it). Outside the main thread (where no handler can be set), and
    for a terminating signal ignored, nothing is noted."""
    noted: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield noted
        return
    watched = [signum for signum in KEPT_SIGNALS
               if signum == signal.SIGINT or signal.getsignal(signum) is not signal.SIG_IGN]
    previous = {signum: signal.signal(signum, lambda signum, frame: noted.append(signum)) for signum in watched}
    try:
        yield noted
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def run_ready_mixtures(mixtures: list[RowJob], rows: RowCache, results: dict) -> None:
    """Run here (or read) each mixture whose parts are all in `results`, in order."""
    for job in list(mixtures):
        if all(part in results for part in job.row.parts):
            mixtures.remove(job)
            rows.run_or_read(job, results, wait=True)
