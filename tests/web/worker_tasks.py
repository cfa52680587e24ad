"""Tasks the worker tests queue (real tasks a real worker imports by path)."""

from __future__ import annotations

import os

from django.tasks import task


@task(queue_name="replays")
def hog(megabytes: int) -> int:
    """Take `megabytes` of memory at once and touch it."""
    block = bytearray(megabytes * 1024 * 1024)
    block[::4096] = b"x" * len(block[::4096])
    return len(block)


@task(queue_name="replays")
def whoami() -> int:
    """The process that ran the task."""
    return os.getpid()


@task(queue_name="replays")
def kill_myself() -> None:
    os.kill(os.getpid(), 9)


@task(queue_name="replays")
def encodings_loaded() -> list[str]:
    """The token counters the task's process had loaded when the task started."""
    from ctxsim.pipeline import tokens

    return sorted(tokens._COUNTERS)


@task(queue_name="replays")
def collector_state() -> list[int]:
    """The task's process's oldest-generation threshold and how many objects it has frozen."""
    import gc

    return [gc.get_threshold()[2], gc.get_freeze_count()]
