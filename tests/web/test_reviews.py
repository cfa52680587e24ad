"""Team review on the session page: comments, threads, resolve, permalinks, status, activity."""

from __future__ import annotations

import json
import re
import threading

import pytest
from django.urls import reverse

from ctxsim.reviews import services
from ctxsim.reviews.models import Activity, Comment
from ctxsim.transcripts.models import ReviewStatus, Session
from tests.factories import spilling_session

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def page(client, session, call=None) -> str:
    query = f"?call={call}" if call is not None else ""
    response = client.get(reverse("session-detail", args=[session.pk]) + query, follow=True)
    assert response.status_code == 200
    return response.content.decode()


def post_comment(client, session, body, **fields):
    return client.post(reverse("comment-create", args=[session.pk]), {"body": body, **fields})


def test_a_reviewer_comments_on_a_message_and_it_shows_on_the_call_view(personas, stored):
    reviewer = personas.client("reviewer")
    response = post_comment(reviewer, stored, "Why is this here?", call="1", message="3")
    comment = Comment.objects.get()
    assert (comment.call_index, comment.message_index, comment.parent) == (1, 3, None)
    assert response.status_code == 302
    assert response["Location"] == f"/sessions/{stored.pk}/?call=1#comment-{comment.pk}"

    html = page(personas.client("viewer"), stored, call=1)
    block = html.split('id="comments-c1-m3"')[1].split('class="thread-block"')[0]
    assert "Why is this here?" in block and f'id="comment-{comment.pk}"' in block
    assert "1 comment" in html


def test_comment_bodies_are_escaped_plain_text_with_line_breaks(personas, stored):
    post_comment(personas.client("owner"), stored, "<script>alert(1)</script>\nsecond <b>line</b>",
                 call="0")
    html = page(personas.client("viewer"), stored, call=0)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;<br>second &lt;b&gt;line&lt;/b&gt;" in html
    assert "<script>alert(1)" not in html


def test_a_viewer_sees_comments_but_no_forms_and_cannot_post(personas, stored):
    services.add_comment(stored, personas.users["owner"], "Look at the spill", call_index=1,
                         message_index=3)
    viewer = personas.client("viewer")
    html = page(viewer, stored, call=1)
    assert "Look at the spill" in html
    assert 'name="body"' not in html
    assert reverse("comment-create", args=[stored.pk]) not in html
    assert reverse("review-status", args=[stored.pk]) not in html
    assert post_comment(viewer, stored, "sneaky", call="1").status_code == 403
    assert Comment.objects.count() == 1
    reviewer_html = page(personas.client("reviewer"), stored, call=1)
    assert 'name="body"' in reviewer_html and "Resolve" in reviewer_html


def test_replies_thread_under_the_first_comment_and_keep_its_anchor(personas, stored):
    root = services.add_comment(stored, personas.users["reviewer"], "first", call_index=1,
                                message_index=3)
    reply = services.add_comment(stored, personas.users["owner"], "second", parent=root)
    reply_to_reply = services.add_comment(stored, personas.users["reviewer"], "third",
                                          parent=reply)
    assert reply.parent == root and reply_to_reply.parent == root
    assert (reply_to_reply.call_index, reply_to_reply.message_index) == (1, 3)
    html = page(personas.client("viewer"), stored, call=1)
    thread = html.split(f'data-thread="{root.pk}"')[1]
    assert thread.index("first") < thread.index("second") < thread.index("third")


def test_resolve_and_reopen_a_thread_with_who_and_when(personas, stored):
    root = services.add_comment(stored, personas.users["reviewer"], "fix it", call_index=0)
    reply = services.add_comment(stored, personas.users["reviewer"], "please", parent=root)
    owner = personas.client("owner")
    # Resolving through a reply resolves its thread.
    response = owner.post(reverse("comment-resolve", args=[reply.pk]), {"resolved": "1"})
    assert response.status_code == 302
    root.refresh_from_db()
    assert root.resolved and root.resolved_by == personas.users["owner"] and root.resolved_at
    assert "Resolved by owner" in page(personas.client("viewer"), stored, call=0)
    owner.post(reverse("comment-resolve", args=[root.pk]), {"resolved": "1"})  # no change
    owner.post(reverse("comment-resolve", args=[root.pk]), {"resolved": "0"})
    root.refresh_from_db()
    assert not root.resolved and root.resolved_by is None
    kinds = list(Activity.objects.values_list("kind", flat=True))
    assert kinds == ["comment", "reply", "resolve", "reopen"]


def test_htmx_comment_answers_with_the_thread_block_and_the_activity_out_of_band(
    personas, stored
):
    response = personas.client("reviewer").post(
        reverse("comment-create", args=[stored.pk]),
        {"body": "htmx comment", "call": "1", "message": "3"}, headers=HTMX,
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<div class="thread-block" id="comments-c1-m3"')
    assert "htmx comment" in html
    assert 'id="activity" class="card activity" hx-swap-oob="true"' in html
    assert 'id="comment-count-c1-m3"' in html and "1 comment" in html
    assert "<html" not in html


def test_an_empty_comment_is_refused_with_a_message(personas, stored):
    reviewer = personas.client("reviewer")
    response = post_comment(reviewer, stored, "   ", call="1")
    assert response.status_code == 400
    assert b"Write a comment first" in response.content
    htmx = reviewer.post(reverse("comment-create", args=[stored.pk]),
                         {"body": "", "call": "1"}, headers=HTMX)
    assert htmx.status_code == 200 and b"Write a comment first" in htmx.content
    assert post_comment(reviewer, stored, "x", call="999").status_code == 400
    assert post_comment(reviewer, stored, "x", call="0", message="999").status_code == 400
    assert post_comment(reviewer, stored, "x", call="zero").status_code == 400
    assert Comment.objects.count() == 0


def test_a_reply_to_another_teams_comment_is_a_404(personas, stored):
    from ctxsim.transcripts.store import save_sessions

    theirs = save_sessions([spilling_session()], team=personas.other_team)[0]
    foreign = services.add_comment(theirs, personas.users["outsider"], "secret", call_index=0)
    response = post_comment(personas.client("reviewer"), stored, "hi", parent=str(foreign.pk))
    assert response.status_code == 404


def test_the_permalink_opens_the_call_and_names_the_comment(personas, stored):
    comment = services.add_comment(stored, personas.users["reviewer"], "here", call_index=1,
                                   message_index=3)
    viewer = personas.client("viewer")
    response = viewer.get(reverse("comment-permalink", args=[comment.pk]))
    assert response.status_code == 302
    assert response["Location"] == f"/sessions/{stored.pk}/?call=1#comment-{comment.pk}"
    html = page(viewer, stored, call=1)
    assert f'id="comment-{comment.pk}"' in html
    assert personas.client("outsider").get(
        reverse("comment-permalink", args=[comment.pk])).status_code == 404
    session_level = services.add_comment(stored, personas.users["reviewer"], "overall")
    location = viewer.get(reverse("comment-permalink", args=[session_level.pk]))["Location"]
    assert location == f"/sessions/{stored.pk}/#comment-{session_level.pk}"


def test_comment_counts_reach_the_chart_and_the_call_view(personas, stored):
    root = services.add_comment(stored, personas.users["reviewer"], "a", call_index=1,
                                message_index=3)
    services.add_comment(stored, personas.users["owner"], "b", parent=root)
    services.add_comment(stored, personas.users["owner"], "c", call_index=0)
    html = page(personas.client("viewer"), stored, call=1)
    chart = json.loads(re.search(
        r'<script id="chart-data" type="application/json">(.*?)</script>', html, re.S
    ).group(1))
    assert chart["comments"] == {"1": 2, "0": 1}
    assert "2 comments" in html


def test_review_status_changes_record_who_and_when_and_filter_the_list(personas, stored):
    reviewer = personas.client("reviewer")
    response = reviewer.post(reverse("review-status", args=[stored.pk]), {"status": "approved"})
    assert response.status_code == 302
    stored.refresh_from_db()
    assert stored.review_status == "approved"
    assert stored.review_status_by == personas.users["reviewer"] and stored.review_status_at
    html = page(personas.client("viewer"), stored)
    bar = html.split('id="review-bar"')[1].split("</div>")[0]
    assert "Approved" in bar and "set by reviewer" in bar
    # The sessions list filters by it.
    listed = personas.client("viewer").get("/?status=approved").content.decode()
    assert stored.title in listed
    assert stored.title not in personas.client("viewer").get("/?status=open").content.decode()
    # A bad value and a viewer are refused.
    assert reviewer.post(reverse("review-status", args=[stored.pk]),
                         {"status": "merged"}).status_code == 400
    viewer = personas.client("viewer")
    assert viewer.post(reverse("review-status", args=[stored.pk]),
                       {"status": "open"}).status_code == 403
    assert Session.objects.get(pk=stored.pk).review_status == "approved"


def test_htmx_status_change_swaps_the_review_bar(personas, stored):
    response = personas.client("owner").post(
        reverse("review-status", args=[stored.pk]), {"status": "needs_changes"}, headers=HTMX
    )
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="review-bar"')
    assert "Needs changes" in html and "Open → Needs changes" in html


def test_the_activity_list_shows_uploads_status_comments_and_profiles_in_order(
    personas, stored, tmp_path
):
    from ctxsim.transcripts.imports import import_transcript

    owner = personas.users["owner"]
    path = tmp_path / "chat.json"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"},
                                             {"role": "assistant", "content": "hello"}]}))
    imported = import_transcript(path, team=personas.team, user=owner).sessions[0]
    assert Activity.objects.filter(session=imported, kind="upload").count() == 1

    client = personas.client("reviewer")
    client.post(reverse("review-status", args=[stored.pk]), {"status": "in_review"})
    post_comment(client, stored, "a note", call="0")
    client.post(reverse("profile-save", args=[stored.pk]),
                {"profile": "chatcli", "name": "tight", "description": ""})
    kinds = [a.kind for a in services.activity_for(stored)]
    assert kinds == ["status", "comment", "profile_saved"]
    html = page(personas.client("viewer"), stored)
    activity = html.split('id="activity"')[1]
    assert activity.index("changed the review status") < activity.index("commented") \
        < activity.index("saved a profile")
    full = personas.client("viewer").get(reverse("session-activity", args=[stored.pk]))
    assert full.status_code == 200 and b"tight" in full.content


# Runs on SQLite too since its transactions begin IMMEDIATE (issue 20 item 10): writers queue.
@pytest.mark.django_db(transaction=True)
def test_two_reviewers_writing_at_once_lose_nothing_and_the_activity_keeps_their_order(personas):
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    from ctxsim.teams.models import Membership, Role
    from ctxsim.transcripts.store import save_sessions

    session = save_sessions([spilling_session()], team=personas.team)[0]
    second = get_user_model().objects.create_user("reviewer2")
    Membership.objects.create(team=personas.team, user=second, role=Role.REVIEWER)
    rounds = 12
    # Each reviewer alternates between two statuses the other never sets, so every request is a
    # real change and a lost update would break the before → after chain checked below.
    plans = {
        "reviewer": (personas.users["reviewer"], ["in_review", "approved"] * (rounds // 2)),
        "reviewer2": (second, ["needs_changes", "open"] * (rounds // 2)),
    }
    barrier = threading.Barrier(len(plans))
    failures: list[str] = []

    def work(tag: str) -> None:
        user, statuses = plans[tag]
        client = Client()
        client.force_login(user)
        try:
            barrier.wait(timeout=30)
            for n, status in enumerate(statuses):
                r1 = client.post(reverse("review-status", args=[session.pk]), {"status": status})
                r2 = post_comment(client, session, f"{tag} note {n}", call="1")
                if (r1.status_code, r2.status_code) != (302, 302):
                    failures.append(f"{tag} {n}: {r1.status_code} {r2.status_code}")
        except Exception as exc:  # surfaced by the assertion below
            failures.append(f"{tag}: {exc!r}")
        finally:
            connection.close()

    workers = [threading.Thread(target=work, args=(tag,)) for tag in plans]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert not failures

    comments = list(Comment.objects.filter(session=session).order_by("pk"))
    assert len(comments) == 2 * rounds
    for tag in plans:
        mine = [c.body for c in comments if c.body.startswith(f"{tag} ")]
        assert mine == [f"{tag} note {n}" for n in range(rounds)]

    activity = services.activity_for(session)
    assert [a.pk for a in activity] == sorted(a.pk for a in activity)  # time order = pk order
    assert [a.created_at for a in activity] == sorted(a.created_at for a in activity)
    changes = [a for a in activity if a.kind == "status"]
    assert len(changes) == 2 * rounds
    assert sum(a.kind == "comment" for a in activity) == 2 * rounds
    labels = dict(ReviewStatus.choices)
    before = labels["open"]
    for change in changes:  # each change starts from where the previous one left off
        start, _, end = change.detail.partition(" → ")
        assert start == before, change.detail
        before = end
    session.refresh_from_db()
    assert labels[session.review_status] == before
    assert session.review_status_by == changes[-1].actor

    html = page(personas.client("viewer"), session)
    listed = html.split('id="activity"')[1]
    positions = [listed.index(a.detail + "</span>") for a in activity if a.kind == "comment"]
    assert positions == sorted(positions)


def test_uncommented_messages_link_to_a_form_loaded_on_demand(personas, stored):
    html = page(personas.client("reviewer"), stored, call=1)
    form_url = f"{reverse('comment-create', args=[stored.pk])}?call=1&amp;message=3"
    assert f'href="{form_url}"' in html and f'hx-get="{form_url}"' in html
    assert 'href="/sessions' not in page(personas.client("viewer"), stored, call=1).split(
        'class="messages"')[1].split("</ol>")[0].replace(
        f'/sessions/{stored.pk}/spills/', "")  # viewers get no comment links (spill links aside)
    url = reverse("comment-create", args=[stored.pk]) + "?call=1&message=3"
    reviewer = personas.client("reviewer")
    block = reviewer.get(url, headers=HTMX).content.decode()
    assert block.lstrip().startswith('<div class="thread-block" id="comments-c1-m3"')
    assert 'name="body"' in block
    full = reviewer.get(url)
    assert full.status_code == 200 and b"Comment on message 3 at call 1" in full.content
    assert personas.client("viewer").get(url).status_code == 403
    assert reviewer.get(reverse("comment-create", args=[stored.pk]) + "?call=x").status_code \
        == 400
