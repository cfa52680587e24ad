"""`python manage.py simulate` — a thin wrapper; the logic is `ctxsim.cli.main`."""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand

from ctxsim import cli


class Command(BaseCommand):
    help = "Replay a profile over a scenario or transcript file and print the trace (SPEC §6)."

    def run_from_argv(self, argv: list[str]) -> None:
        # Argument parsing and errors belong to the pure CLI, so both entry points behave alike
        # (one line on stderr, exit 2 on bad input).
        code = cli.main(argv[2:], sys.stdout, sys.stderr, prog=f"{argv[0]} {argv[1]}")
        sys.stdout.flush()
        raise SystemExit(code)

    def handle(self, *args, **options) -> None:  # pragma: no cover - call_command path
        raise SystemExit(cli.main(list(args), self.stdout, self.stderr))
