"""The overview's filters: the sessions list's, plus uploader and upload dates (SPEC §13)."""

from __future__ import annotations

from django import forms

from ctxsim.transcripts.forms import SessionFilterForm


class OverviewFilterForm(SessionFilterForm):
    uploader = forms.ChoiceField(required=False, label="Uploaded by")
    since = forms.DateField(required=False, label="From",
                            widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, label="To",
                            widget=forms.DateInput(attrs={"type": "date"}))

    def __init__(self, data, *, formats: list[str], uploaders: list[str]) -> None:
        super().__init__(data, formats=formats)
        self.fields["uploader"].choices = [("", "Anyone"), *((u, u) for u in uploaders)]

    def date(self, name: str):
        """The day, or None when absent or not a date (a bad value filters nothing)."""
        self.is_valid()
        return self.cleaned_data.get(name)
