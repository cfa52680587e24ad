"""Upload results by post/redirect/get: reloading imports nothing, the same bytes again are
recognised (issue 19, acceptance 3)."""

from __future__ import annotations

import pytest
from django.core.files.storage import default_storage
from django.urls import reverse

from ctxsim.transcripts.models import ImportJob, Session
from tests.factories import claude_code_bytes, upload

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


def top_level():
    return Session.objects.filter(parent__isnull=True)


def test_an_upload_redirects_to_its_results_and_reloading_them_imports_nothing(personas):
    client = personas.client("owner")
    response = client.post(reverse("upload"), {"files": [upload("demo.jsonl",
                                                                 claude_code_bytes(6))]})
    assert response.status_code == 302
    results_url = response["Location"]
    assert results_url.startswith("/uploads/results/")
    session = top_level().get()
    for _ in range(2):
        page = client.get(results_url)
        assert page.status_code == 200
        body = page.content.decode()
        assert 'class="file-result imported"' in body
        assert reverse("session-detail", args=[session.pk]) in body
    assert top_level().count() == 1


def test_uploading_the_same_bytes_again_says_where_they_are_and_offers_to_import_again(
    personas
):
    client = personas.client("reviewer")
    data = claude_code_bytes(5, seed=3)
    client.post(reverse("upload"), {"files": [upload("first.jsonl", data)]})
    first = top_level().get()
    again = client.post(reverse("upload"), {"files": [upload("renamed.jsonl", data)]},
                        follow=True)
    body = again.content.decode()
    assert top_level().count() == 1
    assert 'class="file-result duplicate"' in body
    assert "already imported as" in body
    assert f'href="{reverse("session-detail", args=[first.pk])}"' in body
    action = body.split('class="import-again"')[1].split('action="')[1].split('"')[0]

    imported = client.post(action, follow=True)
    assert top_level().count() == 2
    assert 'class="file-result imported"' in imported.content.decode()
    # The kept copy was used once and is gone: the same button does nothing a second time.
    assert client.post(action).status_code == 404
    assert top_level().count() == 2
    assert not (default_storage.exists("uploads") and default_storage.listdir("uploads")[1])


def test_other_bytes_under_the_same_name_are_imported(personas):
    client = personas.client("owner")
    client.post(reverse("upload"), {"files": [upload("a.jsonl", claude_code_bytes(3, seed=1))]})
    client.post(reverse("upload"), {"files": [upload("a.jsonl", claude_code_bytes(3, seed=2))]})
    assert top_level().count() == 2


def test_the_same_bytes_in_another_team_are_not_a_duplicate(personas):
    data = claude_code_bytes(4)
    personas.client("owner").post(reverse("upload"), {"files": [upload("x.jsonl", data)]})
    body = personas.client("outsider").post(reverse("upload"), {"files": [upload("x.jsonl",
                                                                                 data)]},
                                            follow=True).content.decode()
    assert "already imported" not in body
    assert Session.objects.filter(team=personas.other_team).count() == 1


def test_a_large_duplicate_is_imported_again_by_the_worker(personas, settings):
    settings.CTXSIM_BACKGROUND_IMPORT_BYTES = 1000
    client = personas.client("owner")
    data = claude_code_bytes(8)
    client.post(reverse("upload"), {"files": [upload("big.jsonl", data)]})
    job = ImportJob.objects.get()
    from ctxsim.transcripts.tasks import run_import_job

    run_import_job(job.pk, job.attempts)
    assert top_level().count() == 1
    body = client.post(reverse("upload"), {"files": [upload("big.jsonl", data)]},
                       follow=True).content.decode()
    assert "already imported as" in body
    assert ImportJob.objects.count() == 1


def test_someone_elses_results_are_not_found(personas):
    response = personas.client("owner").post(
        reverse("upload"), {"files": [upload("demo.jsonl", claude_code_bytes(2))]})
    url = response["Location"]
    assert personas.client("reviewer").get(url).status_code == 404


def test_the_copy_kept_for_import_again_holds_no_secret(personas, settings, tmp_path):
    from tests.web.test_redaction import leaks_in_media, planted_transcript

    client = personas.client("owner")
    client.post(reverse("upload"), {"files": [upload("deploy.json", planted_transcript())]})
    per_file = top_level().count()
    body = client.post(reverse("upload"), {"files": [upload("deploy.json", planted_transcript())]},
                       follow=True).content.decode()
    assert top_level().count() == per_file
    assert "already imported as" in body and 'class="import-again"' in body
    assert leaks_in_media(tmp_path / "media") == []
    action = body.split('class="import-again"')[1].split('action="')[1].split('"')[0]
    client.post(action)
    assert top_level().count() == 2 * per_file
    assert all(s.meta.get("redactions") for s in top_level())
