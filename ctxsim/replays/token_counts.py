"""Token counts kept in the database, so no process tokenizes what another already counted.

Two kinds, one API: counts of a session's stored contents live on their `Content` rows (SPEC §3:
persisted with the session, by content hash); counts of what replays made (previews, stubs,
summaries, placeholders) live in `DerivedTokenCount`, by digest. `load_counts` hands a counter
what is stored, `save_counts` stores what a replay of that session had to tokenize.
"""

from __future__ import annotations

import hashlib

from ctxsim.pipeline import messages as pm
from ctxsim.replays.db import insert_rows, update_rows
from ctxsim.replays.models import DerivedTokenCount
from ctxsim.transcripts.models import Content, Message, Session


def load_counts(row: Session, canonical: pm.Session, counter, *, contents: bool = True,
                derived_after: int = 0) -> int:
    """Prime `counter` with the stored counts of the session's contents (unless `contents` is
    false: it has them already) and with its derived counts stored after id `derived_after`.
    Returns the id of the last derived count taken, to pass next time."""
    if contents:
        _load_content_counts(row, canonical, counter)
    rows = DerivedTokenCount.objects.filter(
        session=row, counter=counter.name, pk__gt=derived_after
    ).order_by("pk").values_list("pk", "digest", "tokens")
    pairs, last = [], derived_after
    for pk, digest, tokens in rows:
        pairs.append((bytes.fromhex(digest), tokens))
        last = pk
    counter.prime_digests(pairs)
    return last


def save_counts(row: Session, canonical: pm.Session, counter, fresh: dict[bytes, int], *,
                contents: bool = True) -> None:
    """Store the counts `counter` now knows for the session's contents that have none for it
    yet (unless `contents` is false: this process stored them after an earlier whole replay,
    which counts every content), and the `fresh` derived counts (by digest) a replay of this
    session tokenized."""
    if contents:
        _save_content_counts(row, canonical, counter)
    if fresh:
        insert_rows(DerivedTokenCount, ("session", "counter", "digest", "tokens"),
                    [(row.pk, counter.name, d.hex(), t) for d, t in fresh.items()],
                    ignore_conflicts=True)


def _load_content_counts(row: Session, canonical: pm.Session, counter) -> None:
    stored = dict(
        Message.objects.filter(session=row)
        .values_list("content__sha256", f"content__token_counts__{counter.name}")
        .distinct()
    )
    known = []
    seen: set[bytes] = set()
    for m in canonical.messages:
        if m.content in seen:
            continue
        seen.add(m.content)
        tokens = stored.get(hashlib.sha256(m.content).hexdigest())
        if isinstance(tokens, int):
            known.append((m.content, tokens))
    counter.prime(known)


def _save_content_counts(row: Session, canonical: pm.Session, counter) -> None:
    """Two queries however many contents: the session's contents without a count for this
    counter (id, hash and the counts they have), then one UPDATE per row in one executemany."""
    missing = {
        sha: (pk, counts)
        for pk, sha, counts in Message.objects.filter(session=row)
        .exclude(**{"content__token_counts__has_key": counter.name})
        .values_list("content_id", "content__sha256", "content__token_counts")
    }
    if not missing:
        return
    updates, done = [], set()
    for m in canonical.messages:
        sha = hashlib.sha256(m.content).hexdigest()
        if sha in missing and sha not in done:
            done.add(sha)
            tokens = counter.cached(m.content)
            if tokens is not None:
                pk, counts = missing[sha]
                updates.append((pk, {**(counts or {}), counter.name: tokens}))
    update_rows(Content, ("token_counts",), updates)
