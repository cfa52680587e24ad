"""The access matrix: every URL of the app × every persona × GET and POST, against a rule.

URLs come from the URL conf itself (`get_resolver()`, walked recursively), so a view added
without a rule in `RULES` fails `test_every_url_has_a_rule` — decide who may open it, then add
the rule. Path converters are filled from `ARGS` by parameter name with ids of objects the
fixture creates; a new parameter name fails loudly too.

Every request runs inside a savepoint that is rolled back, so a POST that succeeds (a removal,
a resolve) does not change what the next request sees. POSTs carry no form data: for people who
may write, the answer is the view's own "form incomplete" answer (200 with errors, 400) or its
success redirect; what matters here is that it is not 403/404.

The REST API (namespace `api`) authenticates by token, not by the login session: its own
matrix, `test_api_access_matrix.py`, walks the same URL conf for every API route.

The Django admin (namespace `admin`) is not in the matrix: its ~50 generated URLs are guarded
as a whole by `admin.site.has_permission` (active staff only). `test_the_admin_is_for_staff_only`
checks that none of the personas (none is staff) gets past its login while a staff user does.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from django.test import Client
from django.urls import reverse

from ctxsim.analysis.models import Sweep
from ctxsim.api.tokens import create_token
from ctxsim.overview.models import CorpusSweep
from ctxsim.replays.models import SavedProfile
from ctxsim.reviews import services as reviews
from ctxsim.teams.models import Membership, Role
from ctxsim.teams.services import create_invite
from ctxsim.transcripts.models import ImportJob
from ctxsim.transcripts.store import save_sessions
from tests.factories import PERSONAS, first_spill, spilling_session, url_patterns

pytestmark = pytest.mark.django_db

LOGIN = "login"  # an anonymous visitor is sent to the login page (302 to /login/?next=…)
# See the module docstring, test_the_admin_is_for_staff_only and test_api_access_matrix.py.
SKIPPED_NAMESPACES = {"admin", "api"}


def roles(owner, reviewer=None, viewer=None, outsider=404, anonymous=LOGIN) -> dict:
    """Expected status per persona; reviewer and viewer default to the owner's."""
    reviewer = owner if reviewer is None else reviewer
    viewer = reviewer if viewer is None else viewer
    return {"owner": owner, "reviewer": reviewer, "viewer": viewer, "outsider": outsider,
            "anonymous": anonymous}


READ = roles(200)  # team members read, outsiders do not know it exists
POST_ONLY = roles(405, outsider=405)  # GET on a POST-only view (nothing is looked up)
GET_ONLY = POST_ONLY


def write(ok: int) -> dict:
    return roles(ok, ok, 403)


def manage(ok: int) -> dict:
    return roles(ok, 403, 403)


RULES: dict[str, dict[str, dict]] = {
    # accounts and teams
    "login": {"GET": roles(302, outsider=302, anonymous=200),
              "POST": roles(302, outsider=302, anonymous=200)},
    # Logging out lands on the login page (LOGOUT_REDIRECT_URL), whoever asks.
    "logout": {"GET": roles(405, outsider=405), "POST": roles(LOGIN, outsider=LOGIN)},
    # Lists of the user's own teams: an outsider sees their own team there, hence 200.
    "team-list": {"GET": roles(200, outsider=200), "POST": GET_ONLY},
    "team-switch": {"GET": POST_ONLY, "POST": roles(302)},
    "team-members": {"GET": manage(200), "POST": POST_ONLY},
    "team-member-add": {"GET": POST_ONLY, "POST": manage(302)},
    "team-member-role": {"GET": POST_ONLY, "POST": manage(302)},
    "team-member-remove": {"GET": POST_ONLY, "POST": manage(302)},
    "team-invite-create": {"GET": POST_ONLY, "POST": manage(302)},
    "team-invite-revoke": {"GET": POST_ONLY, "POST": manage(302)},
    # API tokens and the redaction setting, on the same owners' page
    "team-token-create": {"GET": POST_ONLY, "POST": manage(302)},  # no name: back with an error
    "team-token-revoke": {"GET": POST_ONLY, "POST": manage(302)},
    "team-redaction": {"GET": POST_ONLY, "POST": manage(302)},
    # Open to anyone holding the token: anonymous sees the sign-up form (an empty POST is
    # answered with its errors); a logged-in user joins (or already is a member) and is sent on.
    "invite-accept": {"GET": roles(200, outsider=200, anonymous=200),
                      "POST": roles(302, outsider=302, anonymous=200)},
    # sessions list and uploads work in the user's current team (the outsider's is beta)
    "home": {"GET": roles(200, outsider=200), "POST": GET_ONLY},
    "upload": {"GET": roles(200, outsider=200), "POST": roles(200, 200, 403, outsider=200)},
    "import-job": {"GET": READ, "POST": GET_ONLY},
    # The one poll of every job: a direct visit of an ended job is sent to its result.
    "job-poll": {"GET": roles(302), "POST": GET_ONLY},
    # an upload's results live in the uploader's session: any other batch is unknown (404);
    # importing a duplicate again is a write
    "upload-results": {"GET": roles(404), "POST": GET_ONLY},
    "upload-again": {"GET": POST_ONLY, "POST": roles(404, 404, 403)},
    # search inside contents, in the user's current team (an outsider searches beta)
    "search": {"GET": roles(200, outsider=200), "POST": GET_ONLY},
    "import-job-requeue": {"GET": POST_ONLY, "POST": write(302)},
    # owners delete sessions
    "session-delete": {"GET": POST_ONLY, "POST": manage(302)},
    # owners rename sessions (an empty title is answered with a message, as a redirect)
    "session-rename": {"GET": POST_ONLY, "POST": manage(302)},
    # the session page and what hangs off it: reading only
    "session-detail": {"GET": READ, "POST": GET_ONLY},
    "session-message": {"GET": READ, "POST": GET_ONLY},
    "session-rows": {"GET": READ, "POST": GET_ONLY},
    "session-trace": {"GET": READ, "POST": GET_ONLY},
    "session-compare": {"GET": READ, "POST": GET_ONLY},
    "profile-export": {"GET": READ, "POST": GET_ONLY},
    "profile-save": {"GET": POST_ONLY, "POST": write(400)},
    "profile-import": {"GET": POST_ONLY, "POST": write(400)},
    "profile-delete": {"GET": POST_ONLY, "POST": write(302)},
    "spill-view": {"GET": READ, "POST": GET_ONLY},
    "spill-download": {"GET": READ, "POST": GET_ONLY},
    # review
    # GET shows an anchor's form (writers only); an empty POST is refused with 400.
    "comment-create": {"GET": write(200), "POST": write(400)},
    "review-status": {"GET": POST_ONLY, "POST": write(400)},
    "session-activity": {"GET": READ, "POST": GET_ONLY},
    "comment-permalink": {"GET": roles(302), "POST": GET_ONLY},
    "comment-resolve": {"GET": POST_ONLY, "POST": write(302)},
    # cache & information loss, sweeps (an empty sweep form is answered 400 with its errors)
    "session-insights": {"GET": READ, "POST": GET_ONLY},
    "session-sweeps": {"GET": READ, "POST": GET_ONLY},
    "sweep-create": {"GET": POST_ONLY, "POST": write(400)},
    "sweep-detail": {"GET": READ, "POST": GET_ONLY},
    "sweep-cancel": {"GET": POST_ONLY, "POST": write(302)},
    # team overview and corpus sweeps work in the user's current team (an outsider's is beta);
    # a stored corpus sweep is alpha's. An empty sweep form is answered 400 with its errors,
    # an empty "apply" too; cancelling a finished sweep says so and redirects.
    "team-overview": {"GET": roles(200, outsider=200), "POST": GET_ONLY},
    "corpus-sweeps": {"GET": roles(200, outsider=200), "POST": GET_ONLY},
    "corpus-sweep-create": {"GET": POST_ONLY, "POST": roles(400, 400, 403, outsider=400)},
    "corpus-sweep-detail": {"GET": READ, "POST": GET_ONLY},
    "corpus-sweep-cancel": {"GET": POST_ONLY, "POST": write(302)},
    "corpus-sweep-apply": {"GET": POST_ONLY, "POST": write(400)},
}

# Query strings some views need to reach their permission-checked object.
QUERIES = {"session-message": "call=1&row=0", "session-rows": "call=1&from=0&to=2"}


def app_patterns():
    return [p for p in url_patterns() if p[0] not in SKIPPED_NAMESPACES]


def test_every_url_has_a_rule():
    names = [name for _ns, name, _route, _params in app_patterns()]
    unnamed = [route for _ns, name, route, _params in app_patterns() if not name]
    assert not unnamed, f"name these URLs so the matrix can hold a rule for them: {unnamed}"
    missing = sorted(set(names) - set(RULES))
    assert not missing, f"views without an access rule (add them to RULES): {missing}"
    stale = sorted(set(RULES) - set(names))
    assert not stale, f"rules for URLs that no longer exist: {stale}"
    for name, rule in RULES.items():
        assert set(rule) == {"GET", "POST"}, name
        for method, expected in rule.items():
            assert set(expected) == set(PERSONAS), (name, method)


@pytest.fixture
def world(personas):
    """One object of each kind the URLs name, all in team alpha; returns the converter values."""
    owner = personas.users["owner"]
    session = save_sessions([spilling_session()], team=personas.team, user=owner)[0]
    personas.client("owner").get(reverse("session-detail", args=[session.pk]))
    spill = first_spill(session)
    assert spill is not None, "the fixture session must spill"
    job = ImportJob.objects.create(team=personas.team, user=owner, file_name="big.jsonl",
                                   size=10, status=ImportJob.Status.FAILED)
    comment = reviews.add_comment(session, owner, "a comment", call_index=1, message_index=3)
    spare = get_user_model().objects.create_user("spare")
    spare_membership = Membership.objects.create(team=personas.team, user=spare,
                                                 role=Role.VIEWER)
    invite = create_invite(personas.team, owner, Role.VIEWER)
    sweep = Sweep.objects.create(session=session, axes=[], cache={}, status="done")
    corpus = CorpusSweep.objects.create(team=personas.team, axes=[], cache={}, status="done")
    token, _ = create_token(personas.team, "hook", "ingest", user=owner)
    saved = SavedProfile.objects.create(team=personas.team, name="team profile", base="chatcli",
                                        stages=[], params={}, created_by=owner)
    return {
        "token_id": token.pk,
        "profile_id": saved.pk,
        "sweep_id": sweep.pk, "corpus_sweep_id": corpus.pk,
        "session_id": session.pk, "run": spill.run_key, "seq": spill.seq, "job_id": job.pk,
        "comment_id": comment.pk, "membership_id": spare_membership.pk,
        "invite_id": invite.pk, "token": invite.token, "slug": personas.team.slug,
        "batch": "not-a-batch-of-this-user", "index": 0,
    }


def concrete_urls(values: dict) -> list[tuple[str, str]]:
    urls = []
    for _ns, name, route, params in app_patterns():
        unknown = [p for p in params if p not in values]
        assert not unknown, f"{name} ({route}): no test value for {unknown}; add to world()"
        url = reverse(name, kwargs={p: values[p] for p in params})
        if name in QUERIES:
            url += "?" + QUERIES[name]
        urls.append((name, url))
    return urls


def status_of(persona: str, personas, method: str, url: str) -> int | str:
    client = personas.client(persona) if persona != "anonymous" else Client()
    with transaction.atomic():
        try:
            response = client.generic(method, url)
        except Exception as exc:  # a crash is a finding too, shown in the table
            return f"raised {type(exc).__name__}: {exc}"
        finally:
            transaction.set_rollback(True)
    if response.status_code == 302 and response["Location"].startswith(reverse("login")):
        return LOGIN
    return response.status_code


@pytest.mark.parametrize("persona", PERSONAS)
def test_each_persona_gets_the_expected_status_everywhere(persona, personas, world):
    wrong = []
    for name, url in concrete_urls(world):
        for method in ("GET", "POST"):
            expected = RULES[name][method][persona]
            got = status_of(persona, personas, method, url)
            if got != expected:
                wrong.append(f"{method} {url} ({name}): expected {expected}, got {got}")
    assert not wrong, f"{persona}:\n" + "\n".join(wrong)


def test_outsiders_never_get_a_success_from_alpha_objects(personas, world):
    """A summary over the rules: only views of the user's own teams answer an outsider 2xx."""
    own_team_views = {"team-list", "home", "upload", "search", "invite-accept", "login",
                      "logout", "team-overview", "corpus-sweeps", "corpus-sweep-create"}
    for name, rule in RULES.items():
        for method, expected in rule.items():
            if name not in own_team_views:
                assert expected["outsider"] in (404, 405), (name, method)


def test_the_admin_is_for_staff_only(personas):
    for persona in PERSONAS:
        client = personas.client(persona) if persona != "anonymous" else Client()
        response = client.get("/admin/")
        assert response.status_code == 302, persona
        assert response["Location"].startswith("/admin/login/"), persona
    staff = get_user_model().objects.create_superuser("root", password="root-pass-123")
    client = Client()
    client.force_login(staff)
    assert client.get("/admin/").status_code == 200
