"""Forms for the sessions list filters and the upload page."""

from __future__ import annotations

from django import forms

from ctxsim.importers import FORMATS
from ctxsim.transcripts.models import ReviewStatus
from ctxsim.transcripts.terms import SearchError, refuse_controls


def format_choices() -> list[tuple[str, str]]:
    return [("", "Detect automatically"), *((name, name) for name in FORMATS)]


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """Several files in one field; each becomes its own import (and its own result line)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("widget", MultipleFileInput(attrs={"multiple": True}))
        # Empty files reach the importer, which says "the file is empty" like everywhere else.
        kwargs.setdefault("allow_empty_file", True)
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        single = super().clean
        if isinstance(data, (list, tuple)):
            return [single(item, initial) for item in data]
        return [single(data, initial)]


class UploadForm(forms.Form):
    files = MultipleFileField(label="Transcript files")
    format = forms.ChoiceField(choices=format_choices, required=False, label="Format")


class SessionFilterForm(forms.Form):
    """GET parameters of the sessions list; an unknown value is ignored, never an error page."""

    format = forms.ChoiceField(required=False, label="Format")
    status = forms.ChoiceField(required=False, label="Review status")
    q = forms.CharField(required=False, max_length=200, label="Search titles and file names")
    contents = forms.BooleanField(required=False, label="inside contents too")
    project = forms.CharField(required=False, max_length=1000, label="Project",
                              help_text="the folder it ran in, whole or its last name")
    host = forms.CharField(required=False, max_length=255, label="Host")

    def __init__(self, data, *, formats: list[str]) -> None:
        super().__init__(data)
        asked = (data or {}).get("format")
        if asked in FORMATS and asked not in formats:
            formats = [*formats, asked]  # a real format the team has none of yet: nothing matches
        self.fields["format"].choices = [("", "All formats"), *((f, f) for f in formats)]
        self.fields["status"].choices = [("", "Any status"), *ReviewStatus.choices]

    def clean_q(self) -> str:
        # A control character is a clear error, not a filter (PostgreSQL refuses a NUL).
        query = self.cleaned_data.get("q") or ""
        try:
            refuse_controls(query)
        except SearchError as exc:
            raise forms.ValidationError(str(exc)) from None
        return query

    def value(self, name: str) -> str:
        self.is_valid()
        return (self.cleaned_data.get(name) or "").strip()
