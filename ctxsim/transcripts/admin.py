"""Admin for staff: sessions and background imports, read-mostly (imports are the way in)."""

from __future__ import annotations

from django.contrib import admin

from ctxsim.transcripts.models import ImportJob, Session


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    list_display = [
        "title", "team", "format", "model_call_count", "tool_result_count", "review_status",
        "uploaded_by", "created_at",
    ]
    list_filter = ["format", "review_status", "team"]
    search_fields = ["title", "source_name"]
    raw_id_fields = ["parent", "uploaded_by", "review_status_by"]
    # Message rows are many and large; they are seen on the session page, not here.
    readonly_fields = ["created_at"]


@admin.register(ImportJob)
class ImportJobAdmin(admin.ModelAdmin):
    list_display = ["file_name", "team", "status", "progress", "user", "created_at", "heartbeat_at"]
    list_filter = ["status", "team"]
    search_fields = ["file_name", "message"]
    readonly_fields = [
        "created_at", "started_at", "finished_at", "heartbeat_at", "task_id", "session_ids",
    ]
