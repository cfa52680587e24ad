"""Raw SQL where the ORM costs more than the work: replays store hundreds of rows at a time.

The helpers live with the rows they were first written for (`ctxsim.transcripts.sql`); this
module keeps the replays app's name for them.
"""

from __future__ import annotations

from ctxsim.transcripts.sql import insert_rows, update_rows, values_in

__all__ = ["insert_rows", "update_rows", "values_in"]
