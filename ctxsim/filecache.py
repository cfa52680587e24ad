"""Django's file cache (`CACHE_URL=filecache://…`, what `bin/serve-prod` uses), culled less often.

Django's `FileBasedCache` lists its whole folder at every `set` to count the entries against
MAX_ENTRIES. Every call view a web process makes is such a set: at 1,200 entries the listing was
2 % of a web worker's CPU under the 100-user load test (issue 31). This one counts them at one
set in `CULL_EVERY` (per thread: Django gives each thread its own cache object), so the folder
may hold up to that many entries per thread beyond MAX_ENTRIES before the usual cull.
"""

from __future__ import annotations

from django.core.cache.backends.filebased import FileBasedCache

CULL_EVERY = 32


class FileCache(FileBasedCache):
    _sets = 0

    def _cull(self) -> None:
        self._sets += 1
        if self._sets % CULL_EVERY == 1:  # the first set of a fresh cache object counts
            super()._cull()
