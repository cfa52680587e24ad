"""A deterministic transcript generator (SPEC §9): realistic agent sessions of any length.

The same (calls, seed, options) always give the same bytes. Sessions have on average 2.5 tool
results per model call, results of 2–20 KB of mixed text, code, JSON and logs, a new user
request every few calls (so ChatCLI's runs restart), some failed results and, on demand,
oversized results that trip per-tool caps and budgets. `make run` seeds its demo team with it and
`make bench` builds its inputs with it. Pure Python: no Django.

Two renderings of one generated conversation:
- `generate_session()` — the canonical `Session` directly (for replay benchmarks);
- `write_claude_code_jsonl()` — a Claude Code session file, one line per content block as the
  CLI writes it (for import benchmarks and demo data that goes through the real importer).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import IO

from ctxsim.pipeline.messages import Message, Session, ToolCall

_WORD_TEXT = (
    "alpha beta gamma delta epsilon request response worker queue stream buffer index "
    "cache config token module parser handler service server client metric logger "
    "context retry timeout batch value result error session pipeline budget spill "
    "preview history summary schema record offset window limit commit branch merge "
    "deploy rollout replica shard"
)
WORDS = tuple(_WORD_TEXT.split())
IDENTS = ("load_config", "parse_args", "apply_budget", "spill_result", "repair_pairing",
          "count_tokens", "render_trace", "import_rows", "handle_request", "flush_queue")
PATHS = ("src/app/main.py", "src/app/budget.py", "src/app/pairing.py", "internal/agent/loop.go",
         "web/static/app.js", "tests/test_budget.py", "docs/design.md", "cmd/server/main.go",
         "pkg/store/sqlite.go", "scripts/deploy.sh")


@dataclass(frozen=True)
class Step:
    """One model call's answer: optional user request before it, the calls and their results."""

    user_text: str | None
    assistant_text: str
    calls: tuple[tuple[str, str, dict], ...]  # (id, tool name, input)
    results: tuple[tuple[str, str, bool], ...]  # (call id, output, is_error)
    at: datetime


class _Text:
    """Fast builders of plausible tool output: sample pre-made lines instead of words."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.prose = [" ".join(rng.choices(WORDS, k=rng.randint(6, 14))) for _ in range(600)]
        self.code = [self._code_line(i) for i in range(600)]
        self.logs = [self._log_line(i) for i in range(600)]

    def _code_line(self, i: int) -> str:
        r = self.rng
        ident, word = r.choice(IDENTS), r.choice(WORDS)
        return r.choice([
            f"def {ident}_{i}({word}, limit={r.randint(1, 9999)}):",
            f"    {word} = {ident}({r.choice(WORDS)}, {r.randint(0, 500)})",
            f"    if {word} > {r.randint(1, 20000)}:",
            f"        return {r.choice(WORDS)}[:{r.randint(1, 4000)}]",
            f"    # {' '.join(r.choices(WORDS, k=6))}",
            f"import {r.choice(WORDS)}.{r.choice(WORDS)}",
        ])

    def _log_line(self, i: int) -> str:
        r = self.rng
        level = r.choice(["INFO", "INFO", "DEBUG", "WARN", "ERROR"])
        return (f"2026-01-0{r.randint(1, 9)}T{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:"
                f"{r.randint(0, 59):02d}Z {level} [{r.choice(WORDS)}] "
                f"{' '.join(r.choices(WORDS, k=r.randint(4, 10)))} id={r.randint(100000, 999999)}")

    def block(self, kind: str, size: int, header: str) -> str:
        """About `size` bytes of `kind` output, made unique by its header line."""
        pool = {"code": self.code, "logs": self.logs}.get(kind, self.prose)
        if kind == "json":
            return self._json(size, header)
        lines = [header]
        total = len(header)
        while total < size:
            chunk = self.rng.choices(pool, k=32)
            lines.extend(chunk)
            total += sum(len(line) + 1 for line in chunk)
        text = "\n".join(lines)
        return text[:size]

    def _json(self, size: int, header: str) -> str:
        r = self.rng
        items, total = [], len(header) + 40
        while total < size:
            item = {"id": r.randint(1, 10**6), "name": r.choice(WORDS), "status": r.choice(
                ["ok", "failed", "pending"]), "tags": r.choices(WORDS, k=3),
                "note": r.choice(self.prose)}
            items.append(item)
            total += len(json.dumps(item)) + 1
        return json.dumps({"source": header, "count": len(items), "items": items}, indent=1)


TOOLS = (
    ("Read", "code", lambda r, n: {"file_path": f"/repo/{r.choice(PATHS)}", "offset": n % 50}),
    ("Bash", "logs", lambda r, n: {"command": f"pytest -q -k {r.choice(WORDS)} # run {n}"}),
    ("Grep", "prose", lambda r, n: {"pattern": r.choice(IDENTS), "path": "/repo/src"}),
    ("WebFetch", "prose", lambda r, n: {"url": f"https://docs.example.org/{r.choice(WORDS)}/{n}"}),
    ("mcp__tracker__list_issues", "json", lambda r, n: {"project": r.choice(WORDS), "page": n}),
)


def generate_steps(
    calls: int,
    seed: int = 0,
    *,
    results_per_call: float = 2.5,
    min_result: int = 2000,
    max_result: int = 20000,
    oversize_every: int = 0,
    error_rate: float = 0.04,
    run_length: tuple[int, int] = (6, 14),
) -> Iterator[Step]:
    """The model calls of a session, lazily. `oversize_every` = k adds a 25–90 KB result every
    k-th call (0: never), which per-tool caps and result budgets act on."""
    rng = random.Random(seed)
    text = _Text(rng)
    at = datetime(2026, 1, 5, 9, 30, tzinfo=UTC)
    call_no = 0
    remaining_in_run = 0
    for step in range(calls):
        user_text = None
        if remaining_in_run == 0:
            remaining_in_run = rng.randint(*run_length)
            user_text = (f"Request {step // 10 + 1}: please look into the "
                         f"{rng.choice(WORDS)} {rng.choice(WORDS)} problem in {rng.choice(PATHS)}")
        remaining_in_run -= 1
        last_of_run = remaining_in_run == 0 or step == calls - 1
        if last_of_run:
            n_calls = 0
        else:
            # The last call of each run answers in text, so the other calls carry a bit more
            # than the average: E[1 + Binomial(3, p)] = results_per_call * L / (L - 1).
            mean_run = sum(run_length) / 2
            per_tool_call = results_per_call * mean_run / (mean_run - 1)
            p = min(max((per_tool_call - 1) / 3, 0.0), 1.0)
            n_calls = 1 + sum(rng.random() < p for _ in range(3))
        step_calls, step_results = [], []
        for _ in range(n_calls):
            call_no += 1
            name, kind, make_input = rng.choice(TOOLS)
            call_id = f"toolu_{seed:02d}{call_no:07d}"
            size = rng.randint(min_result, max_result)
            if oversize_every and call_no % oversize_every == 0:
                size = rng.randint(25000, 90000)
            header = f"# {name} result {call_no} ({kind})"
            is_error = rng.random() < error_rate
            output = (f"Error: {rng.choice(WORDS)} failed with exit code {rng.randint(1, 3)}\n"
                      + text.block("logs", min(size, 3000), header)) if is_error else text.block(
                          kind, size, header)
            step_calls.append((call_id, name, make_input(rng, call_no)))
            step_results.append((call_id, output, is_error))
        if n_calls:
            thought = f"Let me check {rng.choice(PATHS)} for {rng.choice(IDENTS)}."
        else:
            thought = (f"Done: the {rng.choice(WORDS)} issue came from {rng.choice(IDENTS)}; "
                       f"{' '.join(rng.choices(WORDS, k=12))}.")
        yield Step(user_text, thought, tuple(step_calls), tuple(step_results), at)
        # Think time and tool time; now and then a long pause (past a 5-minute cache lifetime).
        at += timedelta(seconds=rng.choice([3, 5, 8, 12, 20, 45, 400]))


SYSTEM_PROMPT = ("You are a coding agent working in /repo. Use the tools to read, search and run "
                 "code; keep answers short.")


def generate_session(calls: int, seed: int = 0, **options) -> Session:
    """The canonical session of `generate_steps` (system prompt, user, assistant, tool)."""
    messages: list[Message] = [Message.of("system", SYSTEM_PROMPT, origin=0)]
    for step in generate_steps(calls, seed, **options):
        stamp = {"timestamp": step.at.isoformat().replace("+00:00", "Z")}
        if step.user_text is not None:
            messages.append(Message.of("user", step.user_text, meta=stamp, origin=len(messages)))
        messages.append(Message.of(
            "assistant", step.assistant_text, meta=stamp, origin=len(messages),
            tool_calls=[ToolCall(cid, name, json.dumps(args)) for cid, name, args in step.calls],
        ))
        for cid, output, is_error in step.results:
            messages.append(Message.of("tool", output, tool_call_id=cid, is_error=is_error,
                                       meta=stamp, origin=len(messages)))
    return Session(format="generated", title=f"Generated session ({calls} calls, seed {seed})",
                   messages=tuple(messages), key=f"generated-{calls}-{seed}")


def write_claude_code_jsonl(out: IO[str], calls: int, seed: int = 0, **options) -> None:
    """Write the generated session as a Claude Code JSONL file (one line per content block)."""
    session_id = f"00000000-0000-4000-8000-{seed:012d}"
    counter = 0
    parent: str | None = None

    def line(kind: str, message: dict, at: datetime, **extra) -> None:
        nonlocal counter, parent
        counter += 1
        uuid = f"{seed:08x}-0000-4000-8000-{counter:012d}"
        record = {"parentUuid": parent, "isSidechain": False, "userType": "external",
                  "cwd": "/repo", "sessionId": session_id, "version": "2.0.30", "type": kind,
                  "message": message, "uuid": uuid,
                  "timestamp": at.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                  **extra}
        out.write(json.dumps(record, ensure_ascii=False))
        out.write("\n")
        parent = uuid

    out.write(json.dumps({"type": "summary", "summary": f"Generated session, seed {seed}",
                          "leafUuid": "none"}) + "\n")
    # A plausible bill (SPEC §11): what Claude Code adds to every request (system prompt and
    # tools, ~14k tokens) plus the history at ~0.29 Claude tokens per byte; the previous
    # prompt is read from the cache, the rest written to it.
    context_bytes, billed = 0, 0
    for n, step in enumerate(generate_steps(calls, seed, **options), start=1):
        if step.user_text is not None:
            line("user", {"role": "user", "content": step.user_text}, step.at)
            context_bytes += len(step.user_text.encode("utf-8"))
        message_id = f"msg_{seed:04d}{n:08d}"
        total = 14_000 + int(context_bytes * 0.29)
        usage = {"input_tokens": 4, "cache_creation_input_tokens": max(0, total - 4 - billed),
                 "cache_read_input_tokens": min(billed, total - 4), "output_tokens": 3}
        billed = total
        context_bytes += len(step.assistant_text.encode("utf-8")) + sum(
            len(json.dumps(args)) + len(name) for _, name, args in step.calls)
        context_bytes += sum(len(output.encode("utf-8")) for _, output, _ in step.results)
        blocks = [{"type": "text", "text": step.assistant_text}] + [
            {"type": "tool_use", "id": cid, "name": name, "input": args}
            for cid, name, args in step.calls
        ]
        for block in blocks:
            line("assistant", {"id": message_id, "type": "message", "role": "assistant",
                               "model": "claude-sonnet-4-5", "content": [block],
                               "stop_reason": None, "usage": usage}, step.at,
                 requestId=f"req_{seed:04d}{n:08d}")
        for cid, output, is_error in step.results:
            block = {"type": "tool_result", "tool_use_id": cid, "content": output}
            if is_error:
                block["is_error"] = True
            line("user", {"role": "user", "content": [block]}, step.at)
