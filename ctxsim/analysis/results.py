"""Insights results kept in the database, per (session, replay settings, cache rule).

Both the page (`services`) and the worker's sweeps (`tasks`) read them, so they live apart from
either. A result is computed once, by whichever asks first; the next asks read it.
"""

from __future__ import annotations

from django.db import IntegrityError, transaction

from ctxsim.analysis.models import InsightsResult
from ctxsim.insights.prices import CacheRule
from ctxsim.insights.report import ProfileInsights, analyse, as_data, from_data
from ctxsim.pipeline.replay import replay
from ctxsim.pipeline.spill import NullSpillSink
from ctxsim.replays import services as replays
from ctxsim.replays.state import ReplaySettings


def rule_key(rule: CacheRule) -> str:
    """Everything of a rule that decides a result (the price too: costs are stored)."""
    return (f"{rule.model}|{rule.lifetime}|{rule.price_per_mtok!r}|{rule.min_tokens}|"
            f"{rule.ttl_seconds}|{rule.write_multiplier!r}|{rule.read_multiplier!r}|{rule.step}")


def insights_for(session, settings: ReplaySettings, rule: CacheRule,
                 canonical=None) -> ProfileInsights:
    """The session's replay under `settings` seen through `rule`: stored, or replayed,
    simulated and stored."""
    key = rule_key(rule)
    found = InsightsResult.objects.filter(session=session, key=settings.key,
                                          rule=key).values_list("data", flat=True).first()
    if found is not None:
        stored = from_data(rule, found)
        if stored is not None:
            return stored
    canonical = canonical or replays.canonical_session(session, settings.counter)
    insights = analyse(replay(canonical, settings.run_config(), sink=NullSpillSink()), rule)
    data = as_data(insights)
    try:
        with transaction.atomic():
            InsightsResult.objects.update_or_create(
                session=session, key=settings.key, rule=key, defaults={"data": data})
    except IntegrityError:  # stored concurrently by another request or worker
        pass
    return insights


def stored_insights(session, keys: list[str], rule: CacheRule) -> dict[str, ProfileInsights]:
    """The results already stored for these settings keys under `rule`, by key (one query)."""
    rows = InsightsResult.objects.filter(session=session, key__in=keys, rule=rule_key(rule))
    out = {}
    for key, data in rows.values_list("key", "data"):
        insights = from_data(rule, data)
        if insights is not None:
            out[key] = insights
    return out
