"""`simulate` (SPEC §6), as a pure function: `main(argv, stdout, stderr) -> exit code`.

`python manage.py simulate` is a thin wrapper around it. It sits above both pure packages: a
scenario file goes straight to the engine (`ctxsim.pipeline`), any other file is read by the
importers (`ctxsim.importers`). The engine itself never learns where transcripts come from.
No Django here either.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

from ctxsim import importers
from ctxsim.pipeline import jsontext
from ctxsim.pipeline.messages import Session
from ctxsim.pipeline.params import ParamError
from ctxsim.pipeline.profiles import DEFAULT_PROFILE
from ctxsim.pipeline.replay import replay
from ctxsim.pipeline.scenario import (
    ScenarioError,
    load_json_text,
    looks_like_scenario,
    parse_scenario_data,
)
from ctxsim.pipeline.spill import DirectorySpillSink, MemorySpillSink, SpillSink
from ctxsim.pipeline.trace import build_trace


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2, like every other bad input
        raise UsageError(message)


def build_parser(prog: str = "simulate") -> argparse.ArgumentParser:
    p = _Parser(prog=prog, description="Replay a context-management profile over a scenario "
                "or transcript and print the trace.")
    p.add_argument("file", help="scenario JSON or transcript file")
    p.add_argument("--profile", help=f"profile name (default: the scenario's, else "
                   f"{DEFAULT_PROFILE})")
    p.add_argument("--config", help="JSON file of parameters overriding the profile's")
    p.add_argument("--out", help="write the trace here instead of stdout")
    p.add_argument("--summary", action="store_true", help="omit the history arrays")
    p.add_argument("--write-spills", nargs="?", const="", default=None, metavar="DIR",
                   help="write spill files for real: into DIR, else into spill_dir itself")
    p.add_argument("--session", type=int, default=0, help="session K of a multi-session file")
    return p


def _load_sessions(path: Path) -> Sequence[Session]:
    """The sessions of a file that is not a scenario, read by the transcript importers."""
    try:
        return importers.load(path).sessions
    except importers.TranscriptError as exc:
        raise UsageError(f"{path.name}: {exc}") from None


def _prepare(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    path = Path(args.file)
    try:
        # A folder (a Cline task, an OpenHands V1 conversation…) is a transcript, never a
        # scenario: the importers read it as the zip of its files.
        raw = b"" if path.is_dir() else path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{args.file}: cannot read file ({exc.strerror or exc})") from None
    overrides: dict[str, Any] = {}
    if args.config:
        try:
            cfg_text = Path(args.config).read_bytes()
        except OSError as exc:
            raise UsageError(f"{args.config}: cannot read file ({exc.strerror or exc})") from None
        try:
            overrides = load_json_text(cfg_text)
        except ScenarioError as exc:
            raise UsageError(f"{args.config}: {exc}") from None
        if not isinstance(overrides, dict):
            raise UsageError(f"{args.config}: expected a JSON object of parameters")
    data: Any = None
    try:
        data = jsontext.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        data = None
    if looks_like_scenario(data):
        sc = parse_scenario_data(data)
        profile = args.profile or sc.profile or DEFAULT_PROFILE
        config = {**sc.config, **overrides}
        rep = replay(sc.messages, profile, config, stages=sc.stages, tools=sc.tools,
                     response_schema=sc.response_schema)
        return rep, config
    sessions = list(_load_sessions(path))
    if not sessions:
        raise UsageError(f"{args.file}: no session found")
    if not 0 <= args.session < len(sessions):
        raise UsageError(f"--session {args.session}: the file has {len(sessions)} session(s)")
    s = sessions[args.session]
    # The whole session, so a built-in agent profile takes its release's era.
    rep = replay(s, args.profile or DEFAULT_PROFILE, overrides)
    return rep, overrides


def _sink(args: argparse.Namespace, spill_dir: str) -> SpillSink:
    if args.write_spills is None:
        return MemorySpillSink()
    if args.write_spills:
        return DirectorySpillSink(args.write_spills)
    target = Path(spill_dir)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise UsageError(f"--write-spills: spill_dir {spill_dir} must be absent or empty")
    return DirectorySpillSink()


def main(argv: Sequence[str], stdout: TextIO, stderr: TextIO, prog: str = "simulate") -> int:
    """Run `simulate`; exit 0 on success, 2 with one line on stderr for bad input."""
    try:
        args = build_parser(prog).parse_args(list(argv))
        rep, _ = _prepare(args)
        rep.spills.sink = _sink(args, rep.config.values["spill_dir"])
        trace = build_trace(rep, summary=args.summary)
        text = json.dumps(trace, ensure_ascii=False) + "\n"
        if args.out:
            Path(args.out).write_text(text, encoding="utf-8")
        else:
            stdout.write(text)
        return 0
    except UsageError as exc:
        stderr.write(f"{prog}: error: {exc}\n")
    except ScenarioError as exc:
        stderr.write(f"{prog}: error: {Path(args.file).name}: {exc}\n")
    except ParamError as exc:
        where = ", ".join(f"config.{k}: {v}" if k != "stages" and k != "profile" else v
                          for k, v in exc.errors.items())
        stderr.write(f"{prog}: error: {where}\n")
    except ValueError as exc:
        stderr.write(f"{prog}: error: {' '.join(str(exc).split())}\n")
    except OSError as exc:
        stderr.write(f"{prog}: error: {exc}\n")
    return 2


if __name__ == "__main__":  # pragma: no cover
    import sys

    raise SystemExit(main(sys.argv[1:], sys.stdout, sys.stderr))

__all__ = ["build_parser", "main"]
