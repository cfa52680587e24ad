"""Hand-made task folders and histories of the IDE and terminal agents of issue 29 (Cline, Roo
Code, Aider, OpenCode), built in code; `agent_fixtures` lists them with their counts."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from ctxsim.importers.archive import archive_bytes


def _json(value) -> bytes:
    return json.dumps(value, indent=2).encode()


# -- Cline / Roo Code --------------------------------------------------------------------------

ENV = ("<environment_details>\n# VSCode Visible Files\na.py\n\n# Current Mode\nACT MODE\n"
       "</environment_details>")
ROO_ENV = ("<environment_details>\n# Current Mode\n<slug>code</slug>\n<name>Code</name>\n"
           "</environment_details>")


def _text(*texts):
    return [{"type": "text", "text": t} for t in texts]


def cline_api() -> list:
    return [
        {"role": "user", "content": _text("<task>\nRead a.py\n</task>", ENV), "ts": 1000},
        {"role": "assistant", "ts": 2000, "content": _text(
            "<thinking>read</thinking>\n\n<read_file>\n<path>a.py</path>\n</read_file>")},
        {"role": "user", "content": _text("[read_file for 'a.py'] Result:", "print()", ENV),
         "ts": 2100},
        {"role": "assistant", "ts": 3000, "content": _text(
            "<execute_command>\n<command>rm -rf /</command>\n"
            "<requires_approval>true</requires_approval>\n</execute_command>")},
        {"role": "user", "content": _text("[execute_command for 'rm -rf /'] Result:",
                                          "The user denied this operation.", ENV), "ts": 3100},
        {"role": "assistant", "ts": 4000, "content": _text(
            "<attempt_completion>\n<result>a.py prints.</result>\n</attempt_completion>")},
    ]


def _request(ts, tokens_in, out, reads, writes, protocol=None):
    data = {"request": "…", "tokensIn": tokens_in, "tokensOut": out, "cacheReads": reads,
            "cacheWrites": writes, "cost": 0.01}
    if protocol:
        data["apiProtocol"] = protocol
    return {"ts": ts, "type": "say", "say": "api_req_started", "text": json.dumps(data)}


def cline_ui() -> list:
    return [{"ts": 999, "type": "say", "say": "task", "text": "Read a.py"},
            _request(1500, 3, 100, 9000, 500),
            {"ts": 1600, "type": "say", "say": "text", "text": "read", "partial": True},
            _request(2500, 4, 50, 9500, 100),
            _request(3500, 2, 60, 9600, 0),
            {"ts": 3600, "type": "ask", "ask": "command", "text": "rm -rf /",
             "conversationHistoryDeletedRange": [2, 3]}]


def cline_folder() -> bytes:
    root = "saoudrizwan.claude-dev/tasks/1758845000000/"
    return archive_bytes({root + "api_conversation_history.json": _json(cline_api()),
                          root + "ui_messages.json": _json(cline_ui()),
                          root + "task_metadata.json": _json({"files_in_context": []})})


def cline_api_alone() -> bytes:
    return _json(cline_api())


def cline_native() -> bytes:
    """Cline 3.x with native tool calls: results still come back as text blocks, one per call
    (observed in a public task history), and each response's usage is on the message."""
    def use(n, name, **args):
        return {"type": "tool_use", "id": f"tooluse_{n}", "name": name, "input": args,
                "call_id": f"tooluse_{n}"}
    return _json([
        {"role": "user", "content": _text("<task>\nFind imports\n</task>", ENV), "ts": 1},
        {"role": "assistant", "ts": 2, "modelInfo": {"modelId": "claude_4_5_opus",
                                                     "providerId": "openai", "mode": "act"},
         "metrics": {"tokens": {"prompt": 10049, "completion": 640, "cached": 9000}},
         "content": [use(1, "search_files", regex="from ['\"]@/lib"),
                     use(2, "read_file", path="a.ts")]},
        {"role": "user", "ts": 3, "content": _text(
            "[search_files for 'from ['\"]@/lib'] Result:\nFound 0 results.",
            "[read_file for 'a.ts'] Result:\n1 | import x", "# TODO LIST UPDATE REQUIRED", ENV)},
        {"role": "assistant", "ts": 4, "content": [use(3, "ask_followup_question", question="?")],
         "metrics": {"tokens": {"prompt": 11000, "completion": 20, "cached": 10000}}},
        {"role": "user", "ts": 5, "content": _text("[TASK RESUMPTION] This task was interrupted "
                                                   "3 days ago.", ENV)},
    ])


def roo_api() -> list:
    return [
        {"role": "user", "content": _text("<task>\nFix b.py\n</task>", ROO_ENV), "ts": 10,
         "condenseParent": "c1"},
        {"role": "assistant", "ts": 20, "condenseParent": "c1", "content": [
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "b.py"}}]},
        {"role": "user", "ts": 30, "condenseParent": "c1", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "x = 1"},
            {"type": "text", "text": ROO_ENV}]},
        {"role": "user", "ts": 40, "isSummary": True, "condenseId": "c1",
         "content": _text("## Conversation Summary\nRead b.py.")},
        {"role": "assistant", "ts": 50, "content": [
            {"type": "tool_use", "id": "toolu_2", "name": "apply_diff",
             "input": {"path": "b.py", "diff": "…"}}]},
        {"role": "user", "ts": 60, "content": [
            {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": True,
             "content": [{"type": "text", "text": "diff failed"}]}]},
    ]


def roo_ui() -> list:
    return [_request(15, 2000, 30, 0, 0, "anthropic"),
            {"ts": 35, "type": "say", "say": "condense_context", "contextCondense": {
                "cost": 0.01, "prevContextTokens": 150000, "newContextTokens": 9000,
                "summary": "Read b.py.", "condenseId": "c1"}},
            _request(45, 9200, 40, 8000, 0, "openai")]


def roo_folder() -> bytes:
    root = "tasks/7f3c0c2e-0000-4000-8000-000000000003/"
    return archive_bytes({root + "api_conversation_history.json": _json(roo_api()),
                          root + "ui_messages.json": _json(roo_ui())})


# -- Aider -------------------------------------------------------------------------------------


def aider_history() -> bytes:
    return (
        b"\n# aider chat started at 2025-07-15 11:38:37\n\n"
        b"> Aider v0.85.1  \n> Main model: gpt-4o with diff edit format  \n"
        b"> Repo-map: using 4096 tokens  \n\n"
        b"#### add a comment at the top of a.py  \n#### that says hello  \n\n"
        b"a.py\n```\n<<<<<<< SEARCH\n=======\n# hello\n>>>>>>> REPLACE\n```\n\n"
        b"> Tokens: 3.2k sent, 1.0k cache hit, 21 received. "
        b"Cost: $0.0082 message, $0.0082 session.  \n"
        b"> Applied edit to a.py  \n\n"
        b"#### /ask why?  \n\nBecause you asked.\n\n"
        b"> Tokens: 12k sent, 8 received.  \n"
        b"\n# aider chat started at 2025-07-15 12:00:00\n\n> Aider v0.85.1  \n"
        b"\n# aider chat started at 2025-07-16 09:00:00\n\n> Aider v0.86.0  \n\n"
        b"#### hi  \n\nHello!\n\n> Tokens: 1,234 sent, 5 received.  \n"
    )


# -- OpenCode ----------------------------------------------------------------------------------


def _opencode_messages():
    ses = "ses_01"

    def part(message, n, kind, **fields):
        return {"id": f"prt_{message}_{n:02d}", "messageID": f"msg_{message}", "sessionID": ses,
                "type": kind, **fields}

    def tokens(inp, read, write=0, out=10):
        return {"input": inp, "output": out, "reasoning": 0,
                "cache": {"read": read, "write": write}}

    def message(n, role, **fields):
        return {"id": f"msg_{n}", "sessionID": ses, "role": role, "time": {"created": n},
                **fields}
    bash = {"status": "completed", "input": {"command": "ls"}, "output": "a.py", "title": "ls",
            "metadata": {}, "time": {"start": 1, "end": 2, "compacted": 5}}
    failed = {"status": "error", "input": {"filePath": "b.py"}, "error": "not found",
              "time": {"start": 3, "end": 4}}
    return ses, [
        (message(1, "user"), [part(1, 1, "text", text="List and read")]),
        (message(2, "assistant", modelID="claude-sonnet-4-5", providerID="anthropic",
                 mode="build", tokens=tokens(2, 9600, 50)),
         [part(2, 1, "step-start"), part(2, 2, "text", text="Listing."),
          part(2, 3, "tool", callID="toolu_1", tool="bash", state=bash),
          part(2, 4, "step-finish", reason="tool-calls", tokens=tokens(9640, 0, 9600)),
          part(2, 5, "step-start"), part(2, 6, "tool", callID="toolu_2", tool="read", state=failed),
          part(2, 7, "step-finish", reason="tool-calls", tokens=tokens(3, 9600, 40)),
          part(2, 8, "step-start"), part(2, 9, "text", text="Only a.py exists."),
          part(2, 10, "step-finish", reason="stop", tokens=tokens(2, 9650, 30))]),
        (message(3, "user"), [part(3, 1, "compaction", auto=True)]),
        (message(4, "assistant", summary=True, mode="compaction", tokens=tokens(9700, 0)),
         [part(4, 1, "step-start"), part(4, 2, "text", text="Goal: list files. Done."),
          part(4, 3, "step-finish", reason="stop", tokens=tokens(9700, 0))]),
    ]


def opencode_export() -> bytes:
    ses, messages = _opencode_messages()
    return _json({"info": {"id": ses, "title": "List files", "version": "1.0.107",
                           "projectID": "p1", "directory": "/w"},
                  "messages": [{"info": info, "parts": parts} for info, parts in messages]})


def opencode_storage() -> bytes:
    ses, messages = _opencode_messages()
    files = {f"storage/session/p1/{ses}.json": _json({"id": ses, "title": "List files",
                                                       "version": "0.15.0"})}
    for info, parts in messages:
        files[f"storage/message/{ses}/{info['id']}.json"] = _json(info)
        for part in parts:
            files[f"storage/part/{info['id']}/{part['id']}.json"] = _json(part)
    return archive_bytes(files)


def opencode_db(path: Path) -> bytes:
    ses, messages = _opencode_messages()
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE session (id text PRIMARY KEY, project_id text, parent_id text, title text,"
        " version text, directory text, time_created integer);"
        "CREATE TABLE message (id text PRIMARY KEY, session_id text, time_created integer,"
        " time_updated integer, data text);"
        "CREATE TABLE part (id text PRIMARY KEY, message_id text, session_id text,"
        " time_created integer, time_updated integer, data text);")
    db.execute("INSERT INTO session VALUES (?, 'p1', NULL, 'List files', '1.2.0', '/w', 1)",
               (ses,))
    for info, parts in messages:
        data = {k: v for k, v in info.items() if k not in ("id", "sessionID")}
        db.execute("INSERT INTO message VALUES (?, ?, 1, 1, ?)",
                   (info["id"], ses, json.dumps(data)))
        for part in parts:
            data = {k: v for k, v in part.items() if k not in ("id", "messageID", "sessionID")}
            db.execute("INSERT INTO part VALUES (?, ?, ?, 1, 1, ?)",
                       (part["id"], info["id"], ses, json.dumps(data)))
    db.commit()
    db.close()
    return path.read_bytes()
