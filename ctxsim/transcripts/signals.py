"""What the transcripts app announces, so the apps above it can follow without being imported.

`transcripts` sits below `replays`, `reviews` and `analysis`: it never imports them. They
connect to these signals in their `AppConfig.ready()`:

- `sessions_imported(sessions, user, source_name)`: sent by `import_transcript` once a file's
  sessions are committed (every import, however it was started). `reviews` writes the
  "upload" activity lines.
- `import_finished(sessions)`: sent when an upload, a background job or a command is done
  importing, after `sessions_imported`; `replays` fills the list's figures (peak tokens, failed
  calls) from the default replay. Without a receiver they stay empty and the list shows "—".
- `session_deleting(session, sessions)`: sent inside the deletion's transaction, before any row
  goes; `sessions` is the session with all its sidechains. A receiver that keeps files for
  those rows registers its clean-up with `transaction.on_commit`, so nothing is removed when
  the deletion rolls back.

Signals are sent with `send`: a receiver that must never fail the import catches its own
errors (both of today's do).
"""

from __future__ import annotations

from django.dispatch import Signal

sessions_imported = Signal()
import_finished = Signal()
session_deleting = Signal()
