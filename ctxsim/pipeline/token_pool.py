"""Token counting of many contents over the machine's cores (issue 21: cold replays).

tiktoken holds the GIL while it encodes (two threads were slower than one here), so a cold
session's distinct contents are counted by worker processes. `count_all` is called by
`TiktokenCounter.count_many` with the contents it does not know; it answers None (count them
here) unless all of these hold:
- `CTXSIM_TOKEN_PROCESSES` (default: the CPUs this process may use, `os.process_cpu_count()`)
  is 2 or more; `1` or `0` turns the workers off;
- the contents add up to at least MIN_BYTES (4 MB, about a quarter second of tokenizing):
  below that, handing them over costs more than it saves.
Workers run `tokens.tokenize`, which cuts the pieces the serial counter's `tokenize_all`
cuts, so the counts are the same; each returns the head and tail pieces it counted, for the
caller's piece cache. The results come back in the order of the contents whatever the
schedule (deterministic).

The pool is started on first use and kept while it is used: it stops IDLE_SECONDS (60) after
its last job, so a web or task worker holds no idle counting processes (each holds a BPE table,
~40 MB) between cold replays. Its processes come from a `forkserver`, never a fork of the
caller, which may run threads (gunicorn, the task worker); each loads the BPE table once (about
0.15 s). Like any `multiprocessing` child they import the caller's `__main__` module, which
must therefore be import-safe (manage.py, gunicorn and `python -m` modules are). Should the
pool fail (stopped by the idle timer meanwhile, a worker killed), the contents are counted
here instead: the same counts, more slowly.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from concurrent.futures import CancelledError, Executor, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from . import tokens

PROCESSES_ENV = "CTXSIM_TOKEN_PROCESSES"
MIN_BYTES = 4 * 1024 * 1024
JOBS_PER_PROCESS = 4  # smaller jobs than one per process, so a slow one does not hold the rest
IDLE_SECONDS = 60.0

_POOL: dict[str, Any] = {"executor": None, "size": 0, "busy": 0, "used": 0.0}

Counted = tuple[int, list[tuple[bytes, int]]]


def processes() -> int:
    """How many worker processes counting may use (CTXSIM_TOKEN_PROCESSES, else the CPUs)."""
    raw = os.environ.get(PROCESSES_ENV, "").strip()
    if raw:
        try:
            return max(int(raw), 0)
        except ValueError:
            pass
    cpus = getattr(os, "process_cpu_count", os.cpu_count)()
    return cpus or 1


def _executor(size: int) -> Executor:
    if _POOL["executor"] is None or _POOL["size"] != size:
        shutdown()
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["ctxsim.pipeline.tokens"])
        _POOL["executor"] = ProcessPoolExecutor(max_workers=size, mp_context=context)
        _POOL["size"] = size
    return _POOL["executor"]


def shutdown() -> None:
    """Stop the worker processes (they start again on the next use)."""
    executor = _POOL["executor"]
    _POOL["executor"], _POOL["size"] = None, 0
    if executor is not None:
        executor.shutdown(wait=True, cancel_futures=True)


def _stop_when_idle() -> None:
    """Stop the pool once IDLE_SECONDS pass with no job (a daemon timer, re-armed by use)."""
    def check() -> None:
        if _POOL["busy"] == 0 and time.monotonic() - _POOL["used"] >= IDLE_SECONDS:
            shutdown()

    timer = threading.Timer(IDLE_SECONDS, check)
    timer.daemon = True
    timer.start()


def _count_job(name: str, contents: list[bytes], chunk_bytes: int) -> list[Counted]:
    """In a worker: each content's count and the pieces counted for it."""
    encoding = tokens.get_encoding(name)
    out: list[Counted] = []
    for content in contents:
        pieces: dict[bytes, int] = {}
        out.append((tokens.tokenize(encoding, content, pieces, chunk_bytes),
                    list(pieces.items())))
    return out


def _load(name: str) -> int:
    tokens.get_encoding(name)
    return os.getpid()


def warm_up(name: str) -> None:
    """Start the workers and load the encoding in each now (benchmarks keep this outside
    their timings, as they keep loading the BPE table in the main process)."""
    size = processes()
    if size >= 2:
        executor = _executor(size)
        list(executor.map(_load, [name] * size * 2))
        _POOL["used"] = time.monotonic()
        _stop_when_idle()


def jobs(sizes: list[int], count: int) -> list[list[int]]:
    """Indices of contents split into `count` jobs of about equal bytes: largest first, each
    to the lightest job so far."""
    loads = [0] * count
    out: list[list[int]] = [[] for _ in range(count)]
    for index in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        lightest = min(range(count), key=loads.__getitem__)
        out[lightest].append(index)
        loads[lightest] += sizes[index]
    return [job for job in out if job]


def count_all(name: str, contents: list[bytes], chunk_bytes: int,
              min_bytes: int = MIN_BYTES) -> list[Counted] | None:
    """Each content's count (and its pieces), in order, from the worker processes; None when
    they are turned off or the contents are too few to be worth them."""
    size = processes()
    if size < 2 or sum(map(len, contents)) < min_bytes:
        return None
    split = jobs([len(c) for c in contents], size * JOBS_PER_PROCESS)
    results: list[Counted | None] = [None] * len(contents)
    _POOL["busy"] += 1
    try:
        executor = _executor(size)
        futures = [executor.submit(_count_job, name, [contents[i] for i in job], chunk_bytes)
                   for job in split]
        for job, future in zip(split, futures, strict=True):
            for index, counted in zip(job, future.result(), strict=True):
                results[index] = counted
    except (BrokenProcessPool, CancelledError, RuntimeError, OSError):
        shutdown()
        return None
    finally:
        _POOL["busy"] -= 1
        _POOL["used"] = time.monotonic()
        _stop_when_idle()
    done = [r for r in results if r is not None]
    if len(done) != len(contents):
        raise RuntimeError("a token-counting job returned fewer counts than contents")
    return done
