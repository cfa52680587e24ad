"""What the job system follows: the end of every task ends its bare job (`policy.BARE`)."""

from __future__ import annotations

from django.dispatch import receiver
from django.tasks import TaskResultStatus
from django.tasks.signals import task_finished

from ctxsim.jobs import policy


@receiver(task_finished)
def give_back(sender, task_result, **kwargs) -> None:
    policy.release([task_result.id], failed=task_result.status != TaskResultStatus.SUCCESSFUL)
