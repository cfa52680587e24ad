"""Review writes and what the session page shows of them.

Every write locks the session row first (`select_for_update`, a no-op on SQLite, which serialises
writers anyway) and stamps its activity line while holding the lock. Two reviewers acting on one
session at the same moment are therefore applied one after the other: nothing is lost, and the
activity list's order (`created_at`, then `pk`) is the order the writes took effect.
"""

from __future__ import annotations

import functools
import logging
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError, transaction
from django.utils import timezone

from ctxsim.reviews.models import BODY_MAX_CHARS, Activity, Comment
from ctxsim.transcripts.models import ReviewStatus, Session

logger = logging.getLogger(__name__)

ACTIVITY_SHOWN = 100  # the session page shows the latest entries; older ones stay stored
SNIPPET_CHARS = 80


class ReviewError(ValueError):
    """A write refused for a reason the user can fix (shown next to the form)."""


def _lock(session: Session | int) -> Session:
    pk = session.pk if isinstance(session, Session) else session
    return Session.objects.select_for_update().only("pk", "review_status").get(pk=pk)


def _snippet(body: str) -> str:
    line = " ".join(body.split())
    return line if len(line) <= SNIPPET_CHARS else line[: SNIPPET_CHARS - 1] + "…"


def record(session: Session | int, actor, kind: str, detail: str = "", comment=None) -> Activity:
    """Append one activity line (in its own transaction unless the caller has one)."""
    with transaction.atomic():
        locked = _lock(session)
        return Activity.objects.create(
            session=locked, actor=actor if _is_user(actor) else None, kind=kind,
            detail=detail[:300], comment=comment, created_at=timezone.now(),
        )


def _is_user(actor) -> bool:
    return actor is not None and getattr(actor, "is_authenticated", False)


def record_uploads(sessions: Iterable[Session], user=None, source_name: str = "") -> None:
    """An "upload" line for each newly imported session. Never fails the import it follows: the
    sessions are already committed, and a missing activity line is not worth losing them for."""
    rows = [
        Activity(session=s, actor=user if _is_user(user) else None, kind=Activity.Kind.UPLOAD,
                 detail=(f"from {source_name}" if source_name else "")[:300],
                 created_at=timezone.now())
        for s in sessions
    ]
    try:
        with transaction.atomic():
            Activity.objects.bulk_create(rows)
    except DatabaseError:
        logger.exception("could not record the upload activity of %d session(s)", len(rows))


def clean_body(body: str) -> str:
    text = (body or "").replace("\r\n", "\n").replace("\r", "\n").strip()
    if not text:
        raise ReviewError("Write a comment first.")
    if len(text) > BODY_MAX_CHARS:
        raise ReviewError(f"A comment holds at most {BODY_MAX_CHARS:,} characters.")
    return text


def add_comment(
    session: Session, author, body: str, *, call_index: int | None = None,
    message_index: int | None = None, parent: Comment | None = None,
) -> Comment:
    """A new thread on the anchor, or a reply to `parent`'s thread (same anchor as the thread)."""
    text = clean_body(body)
    if parent is not None:
        if parent.session_id != session.pk:
            raise ReviewError("That comment belongs to another session.")
        root = parent.parent or parent
        call_index, message_index = root.call_index, root.message_index
    else:
        root = None
        if message_index is not None and call_index is None:
            raise ReviewError("A message comment needs its call.")
        if call_index is not None and not 0 <= call_index <= session.model_call_count:
            raise ReviewError("This session has no such model call.")
        if message_index is not None and not 0 <= message_index < session.message_count:
            raise ReviewError("This session has no such message.")
    with transaction.atomic():
        _lock(session)
        comment = Comment.objects.create(
            session=session, author=author, body=text, parent=root, call_index=call_index,
            message_index=message_index, created_at=timezone.now(),
        )
        kind = Activity.Kind.REPLY if root else Activity.Kind.COMMENT
        Activity.objects.create(
            session=session, actor=author, kind=kind, comment=comment, created_at=timezone.now(),
            detail=f"on {comment.anchor_label}: {_snippet(text)}"[:300],
        )
    return comment


def set_resolved(comment: Comment, user, resolved: bool) -> bool:
    """Resolve or reopen the comment's thread; False when it already was (nothing recorded)."""
    root_id = comment.parent_id or comment.pk
    with transaction.atomic():
        _lock(comment.session_id)
        root = Comment.objects.select_for_update().get(pk=root_id)
        if root.resolved == resolved:
            return False
        now = timezone.now()
        root.resolved = resolved
        root.resolved_by = user if resolved else None
        root.resolved_at = now if resolved else None
        root.save(update_fields=["resolved", "resolved_by", "resolved_at"])
        Activity.objects.create(
            session_id=root.session_id, actor=user, comment=root, created_at=now,
            kind=Activity.Kind.RESOLVE if resolved else Activity.Kind.REOPEN,
            detail=f"on {root.anchor_label}: {_snippet(root.body)}"[:300],
        )
    return True


def set_status(session: Session, user, status: str) -> bool:
    """Change the review status (who and when are kept); False when it was already that."""
    if status not in ReviewStatus.values:
        raise ReviewError("Choose one of the review statuses.")
    with transaction.atomic():
        locked = _lock(session)
        before = locked.review_status
        if before == status:
            return False
        now = timezone.now()
        Session.objects.filter(pk=session.pk).update(
            review_status=status, review_status_by=user, review_status_at=now
        )
        Activity.objects.create(
            session=locked, actor=user, kind=Activity.Kind.STATUS, created_at=now,
            detail=f"{ReviewStatus(before).label} → {ReviewStatus(status).label}",
        )
    session.review_status, session.review_status_by, session.review_status_at = status, user, now
    return True


# --- what the pages show -------------------------------------------------------------------


@dataclass
class Review:
    """The review side of a session page at one call (threads are root comments carrying their
    replies as `thread_replies`)."""

    session: Session
    call_index: int | None
    can_write: bool
    can_manage: bool
    session_threads: list[Comment] = field(default_factory=list)
    call_threads: list[Comment] = field(default_factory=list)
    message_threads: dict[int, list[Comment]] = field(default_factory=dict)
    message_counts: dict[int, int] = field(default_factory=dict)
    chart_counts: dict[int, int] = field(default_factory=dict)
    open_count: int = 0  # unresolved threads anywhere in the session
    statuses: list[tuple[str, str]] = field(default_factory=lambda: list(ReviewStatus.choices))

    @functools.cached_property
    def activity(self) -> list[Activity]:
        """The session's latest activity, read when shown (a call step never shows it)."""
        return activity_for(self.session)


def threads(comments: Iterable[Comment]) -> list[Comment]:
    """Root comments in order, each with `thread_replies` (its replies in order)."""
    roots: list[Comment] = []
    replies: dict[int, list[Comment]] = defaultdict(list)
    for c in comments:
        if c.parent_id is None:
            roots.append(c)
        else:
            replies[c.parent_id].append(c)
    for root in roots:
        root.thread_replies = replies.get(root.pk, [])
    return roots


def review_for(session: Session, membership, call_index: int | None) -> Review:
    comments = list(
        Comment.objects.filter(session=session).select_related("author", "resolved_by")
    )
    review = Review(session, call_index, membership.can_write, membership.can_manage)
    review.open_count = sum(c.parent_id is None and not c.resolved for c in comments)
    review.chart_counts = dict(Counter(c.call_index for c in comments if c.call_index is not None))
    at_call = [c for c in comments if c.call_index == call_index and call_index is not None]
    review.message_counts = dict(
        Counter(c.message_index for c in at_call if c.message_index is not None)
    )
    review.session_threads = threads(c for c in comments if c.call_index is None)
    review.call_threads = threads(c for c in at_call if c.message_index is None)
    by_message: dict[int, list[Comment]] = defaultdict(list)
    for c in at_call:
        if c.message_index is not None:
            by_message[c.message_index].append(c)
    review.message_threads = {index: threads(cs) for index, cs in by_message.items()}
    return review


def activity_for(session: Session, limit: int = ACTIVITY_SHOWN) -> list[Activity]:
    latest = Activity.objects.filter(session=session).select_related("actor")
    latest = latest.order_by("-created_at", "-pk")[:limit]
    return list(reversed(latest))


def page_context(session: Session, membership, call_index: int | None) -> dict[str, Any]:
    """What the session page needs from reviews (the view merges it into its context)."""
    review = review_for(session, membership, call_index)
    return {"review": review, "can_write": review.can_write, "can_manage": review.can_manage}


def anchor_threads(session: Session, call_index: int | None,
                   message_index: int | None) -> list[Comment]:
    """The threads on one anchor (a thread block of the page)."""
    comments = Comment.objects.filter(
        session=session, call_index=call_index, message_index=message_index
    ).select_related("author", "resolved_by")
    return threads(comments)
