"""The one store of per-session results (`SessionResult`), per (session, run key, cache rule).

The cache & information-loss page and the sweeps (`services`, `tasks`) read and write its
insights report; the team overview (`ctxsim.overview`) its figures, whose computation stores
the report beside them (it replays the session anyway), so a session the overview computed
opens its insights page without a replay. A result is computed once, by whichever asks
first; the next asks read it.

A row the overview queued is claimed by the job attempt that computes it (`claim`); what the
row's job says decides whether it is still pending (`figures_state`), so a worker that died
leaves no row of its own to settle: `ctxsim.jobs.lifecycle` settles the job.
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q

from ctxsim.analysis.choices import cache_choice
from ctxsim.analysis.models import SessionResult
from ctxsim.insights.prices import CacheRule
from ctxsim.insights.report import ProfileInsights, analyse, as_data, from_data
from ctxsim.jobs.models import PENDING, Job, Status
from ctxsim.pipeline.replay import replay
from ctxsim.pipeline.spill import NullSpillSink
from ctxsim.replays import services as replays
from ctxsim.replays.state import ReplaySettings

# What a row's figures are while the job computing them is queued or running.
DONE, FAILED, WAITING, MISSING = "done", "failed", "pending", "missing"


def rule_key(rule: CacheRule) -> str:
    """Everything of a rule that decides a result (the price too: costs are stored)."""
    return (f"{rule.model}|{rule.lifetime}|{rule.price_per_mtok!r}|{rule.min_tokens}|"
            f"{rule.ttl_seconds}|{rule.write_multiplier!r}|{rule.read_multiplier!r}|{rule.step}")


def insights_for(session, settings: ReplaySettings, rule: CacheRule,
                 canonical=None) -> ProfileInsights:
    """The session's replay under `settings` seen through `rule`: stored, or replayed,
    simulated and stored."""
    key = rule_key(rule)
    found = SessionResult.objects.filter(session=session, key=settings.key, rule=key,
                                         data__isnull=False).values_list("data",
                                                                         flat=True).first()
    if found is not None:
        stored = from_data(rule, found)
        if stored is not None:
            return stored
    canonical = canonical or replays.canonical_session(session, settings.counter)
    insights = analyse(replay(canonical, settings.run_config(), sink=NullSpillSink()), rule)
    store_data(session.pk, settings.key, key, as_data(insights))
    return insights


def stored_headline(session, settings: ReplaySettings) -> dict[str, Any] | None:
    """The headline of the cache & information-loss page the session page links to (these
    settings under the default cache rule), when its report is stored: hit rate, cost with
    and without the cache, re-reads and lost references. None when not stored yet."""
    rule = cache_choice({})[0].rule()
    found = stored_insights(session, [settings.key], rule).get(settings.key)
    if found is None:
        return None
    return {"hit_percent": 100 * found.hit_rate, "cost": found.cost,
            "no_cache_cost": found.no_cache_cost,
            "rereads": len(found.loss.rereads), "lost": len(found.loss.lost)}


def store_data(session_id: int, key: str, rule: str, data: dict[str, Any]) -> None:
    """Write a row's insights report (its figures, if any, stay as they are)."""
    try:
        with transaction.atomic():
            SessionResult.objects.update_or_create(session_id=session_id, key=key, rule=rule,
                                                   defaults={"data": data})
    except IntegrityError:  # stored concurrently by another request or worker
        pass


def stored_insights(session, keys: list[str], rule: CacheRule) -> dict[str, ProfileInsights]:
    """The results already stored for these settings keys under `rule`, by key (one query)."""
    rows = SessionResult.objects.filter(session=session, key__in=keys, rule=rule_key(rule),
                                        data__isnull=False)
    out = {}
    for key, data in rows.values_list("key", "data"):
        insights = from_data(rule, data)
        if insights is not None:
            out[key] = insights
    return out


def figures_state(version: int, current: int, figures: Any, message: str,
                  job_status: str | None, job_message: str = "") -> tuple[str, str]:
    """What a row's figures are (`DONE`, `FAILED`, `WAITING` for its job, `MISSING`: to be
    queued) and, when failed, why. Figures of another version are not read."""
    if version == current and figures is not None:
        return DONE, ""
    if version == current and message:
        return FAILED, message
    if job_status in PENDING:
        return WAITING, ""
    if job_status == Status.FAILED:  # its job was lost for good (or failed) before it
        return FAILED, job_message or "its job failed"
    return MISSING, ""


def claim(row_id: int, job: Job, current: int) -> bool:
    """Take a row for this attempt of `job`, unless its figures are stored or another live
    attempt holds it. One compare-and-set on (job, attempt) as read: however many copies try
    at once, one wins."""
    row = SessionResult.objects.filter(pk=row_id).values(
        "figures", "figures_version", "message", "job_id", "attempt").first()
    if row is None or (row["figures_version"] == current
                       and (row["figures"] is not None or row["message"])):
        return False
    holder, attempt = row["job_id"], row["attempt"]
    if holder is not None and attempt is not None and not (
            holder == job.pk and attempt < job.attempts):
        # Claimed by another attempt: free only once that attempt is over.
        other = Job.objects.filter(pk=holder).values("status", "attempts").first()
        if other is not None and other["status"] == Status.RUNNING and (
                other["attempts"] == attempt):
            return False
    seen = Q(job__isnull=True) if holder is None else Q(job_id=holder)
    seen &= Q(attempt__isnull=True) if attempt is None else Q(attempt=attempt)
    return bool(SessionResult.objects.filter(seen, pk=row_id).update(job=job.pk,
                                                                     attempt=job.attempts))


def store_figures(row_id: int, job: Job, version: int, figures: dict[str, Any] | None,
                  message: str = "", data: dict[str, Any] | None = None) -> bool:
    """Write a claimed row's figures (or why they failed) and its insights report, while the
    row is still this attempt's."""
    fields: dict[str, Any] = {"figures": figures, "figures_version": version,
                              "message": message[:2000]}
    if data is not None:
        fields["data"] = data
    return bool(SessionResult.objects.filter(pk=row_id, job_id=job.pk,
                                             attempt=job.attempts).update(**fields))
