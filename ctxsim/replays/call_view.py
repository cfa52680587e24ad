"""The call view: which rows of a call the page renders and which fold, the cached pack every
process shares, and finding one's way in a long call (filters, search).

A late call of a long session sends thousands of messages, nearly all unchanged: rendered in
full they made a 10 MB page, so only what changed is shown and the rest folds into counted rows.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import compress
from operator import not_
from typing import Any
from urllib.parse import urlencode

from ctxsim.replays import analysis, recorded, services
from ctxsim.replays.cache import REPLAYS, ReplayKey
from ctxsim.replays.message_list import Fold, render_rows
from ctxsim.replays.models import ReplayRun
from ctxsim.replays.page import call_rows, report_lines
from ctxsim.transcripts import terms
from ctxsim.transcripts.models import Session

# The call view shows what changed at the call: rows changed by its stages, removed or injected,
# with WINDOW rows of context on each side, the first HEAD and last TAIL rows (the task and the
# newest messages); runs of other rows fold into one counted row (`Fold`), loaded FOLD_PAGE rows
# at a time. A late call of a long session sends thousands of messages, nearly all unchanged:
# rendered in full they made a 10 MB page.
WINDOW = 2
HEAD = 2
TAIL = 3
FOLD_MIN = 4  # a shorter run of quiet rows is shown rather than folded
FOLD_PAGE = 200
CARRIED_SHOWN = 150  # rows changed at earlier calls shown while a call has at most this many
# A run of more rows changed alike at the call (a compaction removing 10,000 messages) shows
# its first and last RUN_EDGE rows; the rest folds, saying what happened to them.
RUN_EDGE = 5


# --- the call view, cached across requests and processes ------------------------------------


def changed_here(row: analysis.MessageRow) -> bool:
    """Rewritten, spilled, removed or injected by this call's stages (not carried from an
    earlier call)."""
    return row.status != "unchanged" and not row.carried


def shown_positions(rows: Sequence[analysis.MessageRow], keep: Iterable[int] = ()) -> list[bool]:
    """Which rows the call view renders: the changed ones with their window (and those changed
    at earlier calls, up to CARRIED_SHOWN of them), the head and tail, `keep` (e.g. commented
    messages), and every run of quiet rows shorter than FOLD_MIN."""
    return shown_of([r.status for r in rows], [r.carried for r in rows], keep)


def shown_of(statuses: Sequence[str], carried: Sequence[bool],
             keep: Iterable[int] = ()) -> list[bool]:
    """`shown_positions` of rows given by their statuses and carried flags: the work goes
    to the rows not unchanged (a step at 16,000 calls aligns some 28,000 rows)."""
    n = len(statuses)
    shown = [False] * n
    changed = list(compress(range(n), map("unchanged".__ne__, statuses)))  # in C
    flags = list(map(carried.__getitem__, changed))
    # Rows rewritten or removed at earlier calls are shown too while a call has few of them;
    # a late call of a long session carries thousands (stubs, spills), and those fold.
    marked = compress(changed, map(not_, flags)) if sum(flags) > CARRIED_SHOWN else changed
    for i in _run_edges(list(marked), statuses):
        low, high = max(0, i - WINDOW), min(n, i + WINDOW + 1)
        shown[low:high] = [True] * (high - low)
    for j in [*range(min(HEAD, n)), *range(max(0, n - TAIL), n), *keep]:
        if 0 <= j < n:
            shown[j] = True
    # A run of quiet rows shorter than FOLD_MIN is shown: gaps between shown rows.
    at = list(compress(range(n), shown))
    for a, b in zip([-1, *at], [*at, n], strict=True):
        if 1 < b - a <= FOLD_MIN:
            shown[a + 1:b] = [True] * (b - a - 1)
    return shown


def _run_edges(marked: list[int], statuses: Sequence[str]) -> Iterable[int]:
    """`marked` (ascending positions) without the middle of every run of consecutive
    positions of one status longer than 2 * (RUN_EDGE + WINDOW) + FOLD_MIN: the rows
    `shown_of` shows with their window."""
    run: list[int] = []
    for i in marked:
        if run and (i != run[-1] + 1 or statuses[i] != statuses[run[-1]]):
            yield from _edges(run)
            run = []
        run.append(i)
    yield from _edges(run)


def _edges(run: list[int]) -> list[int]:
    # Longer, the rows between its edges' windows are more than a fold's least.
    long_run = 2 * (RUN_EDGE + WINDOW) + FOLD_MIN
    return run if len(run) <= long_run else run[:RUN_EDGE] + run[-RUN_EDGE:]


def folds_of(rows: Sequence[analysis.MessageRow], shown: Sequence[bool]) -> list[Fold]:
    """The runs of rows not shown, each with its number of rows and tokens."""
    return folds_from([r.tokens or r.raw_tokens for r in rows], shown,
                      [r.status for r in rows])


def folds_from(weights: Sequence[int], shown: Sequence[bool],
               statuses: Sequence[str] = ()) -> list[Fold]:
    """`folds_of` rows given by their tokens (or raw tokens when they send none); with their
    `statuses`, a fold of rows all changed alike says how (`Fold.status`)."""
    at = list(compress(range(len(shown)), shown))
    return [Fold(a + 1, b, sum(weights[a + 1:b]), _common(statuses[a + 1:b]))
            for a, b in zip([-1, *at], [*at, len(shown)], strict=True) if b - a > 1]


def _common(statuses: Sequence[str]) -> str | None:
    """The status every row has, when it is one and not "unchanged"."""
    if not statuses or statuses[0] == "unchanged":
        return None
    return statuses[0] if statuses.count(statuses[0]) == len(statuses) else None


@dataclass
class CallPack:
    """What the call view shows that depends only on the replay (not on who looks): figures,
    stage reports and the rendered rows that are shown, with the folds between them. Plain
    data, so Django's cache can share it between worker processes; comment boxes are added per
    viewer (and a commented message inside a fold is rendered then, see `unfold`)."""

    index: int
    raw_tokens: int
    sent_tokens: int
    sent_count: int
    error: str | None
    counts: dict[str, int]
    reports: list[dict[str, Any]]
    rows: list[tuple[int, int | None, str]]
    # Per row, what the call view's filter reads (`marks`), as columns: a tuple per row of a
    # 28,000-row call made the shared cache's copy a step's slowest part (issue 31).
    statuses: list[str]
    roles: list[str]
    row_tools: list[tuple[str, ...]]

    @property
    def marks(self) -> list[tuple[int, str, str, tuple[str, ...]]]:
        """Per row: (row index, status, role, tool names)."""
        return list(zip(range(len(self.statuses)), self.statuses, self.roles, self.row_tools,
                        strict=True))

    def first_of(self, among: set[int] | None = None) -> dict[str, int]:
        """The first row of each status (what a count badge links to), among these rows."""
        first: dict[str, int] = {}
        for index in sorted(among) if among is not None else range(len(self.statuses)):
            first.setdefault(self.statuses[index], index)
        return first

    def tools(self) -> list[str]:
        return sorted({name for names in set(self.row_tools) for name in names})
    folds: list[Fold] = field(default_factory=list)
    origins: list[int | None] = field(default_factory=list)  # every row's, by position
    # The call's recorded request beside what is sent (claude-code-requests sessions).
    recorded: dict[str, Any] | None = None


def call_pack(session: Session, settings: services.ReplaySettings, run: ReplayRun,
              index: int, user: Any = None) -> CallPack:
    """The call view of call `index` (from the cache when any process made it before); a
    replay it needs takes one of `user`'s replay slots (`services.call_detail`)."""
    return REPLAYS.call_pack(ReplayKey.of(session, run.key, index), settings.query(),
                             lambda: make_pack(session, settings, run, index, user))


def make_pack(session: Session, settings: services.ReplaySettings, run: ReplayRun,
              index: int, user: Any = None) -> CallPack:
    """The call view of call `index`, made here and shared with no cache (the worker keeps
    it as its job's row, which the web process caches when it reads it)."""
    detail = services.call_detail(session, settings, run, index, user)
    reports = [{k: v for k, v in r.items() if k != "report"} for r in report_lines(detail.call)]
    view = detail.view
    shown = shown_of(view.statuses, view.carried)
    positions = [i for i, s in enumerate(shown) if s]
    return CallPack(
        index=index,
        raw_tokens=detail.call.raw_tokens,
        sent_tokens=detail.call.sent_tokens,
        sent_count=len(detail.call.sent),
        error=detail.call.error,
        counts=view.counts,
        reports=reports,
        rows=render_rows(call_rows(detail, positions), session_id=session.pk,
                         call_index=index, query=settings.query()),
        folds=folds_from(view.weights, shown, view.statuses),
        origins=view.origins,
        statuses=view.statuses,
        roles=view.roles,
        row_tools=view.tool_names(),
        recorded=recorded.compare(session.meta, detail.call, index),
    )


def rows_html(session: Session, settings: services.ReplaySettings, run: ReplayRun, index: int,
              positions: Sequence[int], user: Any = None,
              reach: terms.Terms | None = None) -> list[tuple[int, int | None, str]]:
    """Rows at `positions` of call `index`, rendered as the call view renders its rows (with
    `reach`, each shown far enough to hold those terms, see `page.call_rows`)."""
    detail = services.call_detail(session, settings, run, index, user)
    valid = [p for p in positions if 0 <= p < len(detail.view.rows)]
    return render_rows(call_rows(detail, valid, reach), session_id=session.pk, call_index=index,
                       query=settings.query())


def unfold(pack: CallPack, keep_origins: Iterable[int],
           render: Any) -> tuple[list[tuple[int, int | None, str]], list[Fold]]:
    """The pack's rows and folds with the rows of `keep_origins` (commented messages) taken
    out of their folds; `render(positions)` renders those rows (only called when one is)."""
    wanted = set(keep_origins)
    if not wanted:
        return pack.rows, pack.folds
    # The rows of those origins (found in C), then the ones inside a fold.
    hits = compress(range(len(pack.origins)), map(wanted.__contains__, pack.origins))
    starts = [f.start for f in pack.folds]
    extra = [i for i in hits
             if (k := bisect_right(starts, i) - 1) >= 0 and i < pack.folds[k].end]
    if not extra:
        return pack.rows, pack.folds
    rows = sorted([*pack.rows, *render(extra)], key=lambda r: r[0])
    shown = [False] * len(pack.origins)
    for position, _origin, _html in rows:
        shown[position] = True
    folds = []
    for f in pack.folds:  # split each fold around the rows now shown, keeping its tokens' share
        start = None
        for i in range(f.start, f.end + 1):
            if i < f.end and not shown[i]:
                start = i if start is None else start
            elif start is not None:
                folds.append(Fold(start, i, None, f.status))
                start = None
    return rows, folds


# --- finding one's way in a long call ---------------------------------------------------------


@dataclass(frozen=True)
class CallFilter:
    """Which rows of the call view to show: all or only the changed ones, one role, one tool,
    those holding a text (`q`, anywhere in the content or a tool call, any case). View state
    only: it never changes the replay, so it travels beside the replay state."""

    show: str = "all"  # all | changed
    role: str = ""
    tool: str = ""
    q: str = ""

    FIELDS = ("show", "role", "tool", "q")

    @classmethod
    def from_query(cls, query) -> CallFilter:
        show = query.get("show") if query.get("show") in ("all", "changed") else "all"
        return cls(show, (query.get("role") or "").strip()[:40],
                   (query.get("tool") or "").strip()[:200], (query.get("q") or "").strip()[:200])

    @property
    def active(self) -> bool:
        return self != CallFilter()

    def pairs(self) -> list[tuple[str, str]]:
        """The query pairs of what differs from showing everything."""
        out = [("show", self.show)] if self.show != "all" else []
        return out + [(k, getattr(self, k)) for k in ("role", "tool", "q") if getattr(self, k)]

    def query_suffix(self) -> str:
        """`&…` to append to a page URL's query, or "" when nothing is filtered."""
        return f"&{urlencode(self.pairs())}" if self.active else ""

    def keeps(self, status: str, role: str, tools: tuple[str, ...]) -> bool:
        return ((self.show != "changed" or status != "unchanged")
                and (not self.role or role == self.role)
                and (not self.tool or self.tool in tools))


def search_rows(detail: services.CallDetail, text: str) -> set[int]:
    """The rows of one call whose whole content or tool calls hold every term of `text` (any
    case, any order, "quoted phrases" as phrases: as the search inside contents reads it)."""
    parsed = find_terms(text)
    found = set()
    for position, row in enumerate(detail.view.rows):
        m = row.message
        haystack = "\n".join([m.text, *(f"{c.name} {c.arguments}" for c in m.tool_calls)])
        if parsed is not None and parsed.matches(haystack):
            found.add(position)
    return found


def find_terms(text: str) -> terms.Terms | None:
    """The terms of a Find or a search hit's words (None when there are none to look for)."""
    try:
        parsed = terms.parse(text, indexed=False)
    except terms.SearchError:
        return None
    return parsed if parsed.terms else None


@dataclass(frozen=True)
class Landing:
    """Where a search hit lands in its call: the message to scroll to (`at`, its index in the
    session) and the words to highlight (`hl`, a query as the search reads it). View state of
    one page load: the call's links do not carry it on."""

    at: int | None = None
    hl: str = ""

    FIELDS = ("at", "hl")

    @classmethod
    def from_query(cls, query) -> Landing:
        at = query.get("at") or ""
        return cls(int(at) if at.isascii() and at.isdigit() and len(at) < 10 else None,
                   (query.get("hl") or "").strip()[:terms.MAX_QUERY_CHARS])

    def query_suffix(self) -> str:
        pairs = [("at", str(self.at))] if self.at is not None else []
        pairs += [("hl", self.hl)] if self.hl else []
        return f"&{urlencode(pairs)}" if pairs else ""

    def positions(self, pack: CallPack) -> list[int]:
        """The call view's rows of the landed message (none when the call does not send it)."""
        if self.at is None:
            return []
        return [i for i, origin in enumerate(pack.origins) if origin == self.at]


def highlighted(view: CallFilter, landing: Landing) -> list[str]:
    """The terms the call view highlights: a search hit's, else its Find's."""
    parsed = find_terms(landing.hl) or find_terms(view.q)
    return parsed.texts if parsed is not None else []


# Rows of a Find shown as far as its words, at most (a Find of "the" in a long call keeps the
# rows as the call view cut them).
REACH_ROWS = 200


def reach_targets(pack: CallPack, view: CallFilter, landing: Landing,
                  found: set[int] | None) -> tuple[set[int], terms.Terms | None]:
    """The rows to show as far as the words they were found by, and those words: the landed
    message's (a search hit), else the rows the call's Find found (up to REACH_ROWS)."""
    landed = find_terms(landing.hl)
    if landed is not None and landing.positions(pack):
        return set(landing.positions(pack)), landed
    if found and len(found) <= REACH_ROWS:
        return set(found), find_terms(view.q)
    return set(), None


def reaching_rows(rows: list[tuple[int, int | None, str]], targets: set[int],
                  reach: terms.Terms | None, render: Any) -> list[tuple[int, int | None, str]]:
    """`rows` with those at `targets` rendered again by `render(positions, reach)`, long
    enough to show the words of `reach` (a quiet row collapses after a few hundred bytes)."""
    targets = targets & {row[0] for row in rows}
    if not targets or reach is None:
        return rows
    kept = [row for row in rows if row[0] not in targets]
    return sorted([*kept, *render(sorted(targets), reach)], key=lambda r: r[0])


def filtered_rows(pack: CallPack, view: CallFilter, found: set[int] | None = None,
                  render: Any = None):
    """The rows the filter keeps (`found`: the search's rows, when it searched): the pack's,
    and with `render(positions)` also those its call view folds away (issue 21)."""
    kept = {index for index, status, role, tools in pack.marks
            if view.keeps(status, role, tools) and (found is None or index in found)}
    rows = [row for row in pack.rows if row[0] in kept]
    missing = sorted(kept - {row[0] for row in rows})
    if missing and render is not None:
        rows = sorted([*rows, *render(missing)], key=lambda r: r[0])
    return rows

