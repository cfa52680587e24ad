"""A deliberately naive ChatCLI replay, written from `chatcli-behaviour.md` and the reference
README alone, for differential tests against the engine.

No memo, no shortcut, no shared code with `ctxsim.pipeline` beyond rendering: every stage is a
full pass over plain dicts with `bytes` contents, at every call. Slow and obviously correct is
the point; it only has to handle what the random scenarios of the tests generate.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

SYNTH = ("[Tool result missing \u2014 the tool execution was interrupted or failed silently. "
         "Do NOT retry this tool call. Analyze what went wrong and try a different "
         "approach.]").encode()
ENV_DEFAULTS = {
    "CHATCLI_TOOL_RESULT_BUDGET_CHARS": ("turn_budget_chars", 200000),
    "CHATCLI_TOOL_RESULT_MAX_CHARS": ("per_result_max_chars", 20000),
    "CHATCLI_MICROCOMPACT_TRUNCATE_TURNS": ("mc_turns_before_truncate", 2),
    "CHATCLI_MICROCOMPACT_SUMMARIZE_TURNS": ("mc_turns_before_summarize", 4),
    "CHATCLI_MICROCOMPACT_HEAD_CHARS": ("mc_truncate_head_chars", 2000),
    "CHATCLI_MICROCOMPACT_TAIL_CHARS": ("mc_truncate_tail_chars", 500),
    "CHATCLI_MICROCOMPACT_MIN_CONTENT": ("mc_min_content_size", 3000),
}
CAPS = {"@read": 80000, "@search": 60000, "@tree": 50000, "@docs-flatten": 50000}
NATIVE = {"web_search": "@websearch", "web_fetch": "@webfetch", "squad_mail": "@mail",
          "board_cards": "@board", "agents_runs": "@agents", "ask_user": "@ask"}
GO_SPACE = [c.encode() for c in "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004"
            "\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"]


def atoi_positive(text: str | None) -> int | None:
    if text is None or not re.fullmatch(r"[+-]?[0-9]+", text):
        return None
    value = int(text)
    return value if 0 < value < 2**63 else None


def knobs(env: dict[str, str]) -> dict[str, int]:
    out = {}
    for name, (key, default) in ENV_DEFAULTS.items():
        parsed = atoi_positive(env.get(name))
        out[key] = parsed if parsed is not None else default
    return out


def msg(raw: dict[str, Any]) -> dict[str, Any]:
    content = raw.get("content")
    if isinstance(content, list):
        content = "".join(p["text"] for p in content if p.get("type") == "text")
    return {
        "role": raw["role"],
        "content": (content or "").encode(),
        "tool_calls": [(c.get("id", ""), c["function"]["name"], c["function"].get("arguments")
                        or "") for c in raw.get("tool_calls") or []],
        "tool_call_id": raw.get("tool_call_id") or "",
        "is_error": bool(raw.get("is_error")),
        "error_code": raw.get("error_code") or "",
        "agent_feedback": bool(raw.get("agent_feedback")),
    }


# --- per-tool cap --------------------------------------------------------------------------

def cap_for(name: str) -> tuple[str, int]:
    plugin = NATIVE.get(name) or (name if name.startswith("@") else "@coder")
    return plugin, CAPS.get(plugin, 30000)


def truncate_for_llm(s: bytes, cap: int) -> bytes:
    if len(s) <= cap:
        return s
    if cap <= 6000:
        return s[:cap] + b"\n\n... [TRUNCATED]"
    return (s[:5000] + f"\n\n... [TRUNCATED {len(s) - 6000} chars omitted, 6000 kept] ...\n\n"
            .encode() + s[-1000:])


# --- microcompact --------------------------------------------------------------------------

def trim(s: bytes) -> bytes:
    changed = True
    while changed:
        changed = False
        for sp in GO_SPACE:
            if s.startswith(sp):
                s, changed = s[len(sp):], True
            if s.endswith(sp):
                s, changed = s[:len(s) - len(sp)], True
    return s


def ctype(s: bytes) -> str:
    t = trim(s)
    w = t[:200]
    if t[:1] in (b"{", b"["):
        return "JSON"
    for needle, name in ((b"package ", "Go source"), (b"import ", "source code"),
                         (b"def ", "Python source"), (b"function ", "JavaScript source")):
        if needle in w:
            return name
    if t.startswith(b"diff ") or t.startswith(b"--- "):
        return "diff"
    if t.startswith(b"commit "):
        return "git log"
    return "text"


def mc_preview(s: bytes, h: int, t: int) -> bytes:
    if len(s) <= h + t + 100:
        return s
    head = s[:h]
    k = head.rfind(b"\n")
    if k > h // 2:
        head = head[:k + 1]
    tail = s[len(s) - t:]
    k = tail.find(b"\n")
    if 0 < k < t // 2:
        tail = tail[k + 1:]
    omitted = len(s) - len(head) - len(tail)
    return head + f"\n[... {omitted} chars omitted from old tool result ...]\n".encode() + tail


def suffix(original: bytes, stub: bytes, ccr_on: bool) -> bytes:
    keys: list[bytes] = []
    for k in re.findall(rb"<<ccr:([0-9a-f]{16})>>", original):
        if k not in keys:
            keys.append(k)
    if not keys and ccr_on:
        keys = [hashlib.sha256(original).hexdigest()[:16].encode()]
    missing = [k for k in keys if b"<<ccr:" + k + b">>" not in stub]
    if not missing:
        return b""
    return b"\n[full content recoverable via @recall" + b"".join(
        b" <<ccr:" + k + b">>" for k in missing) + b"]"


def microcompact(history: list[dict], turn: int, kn: dict[str, int], ccr_on: bool):
    rep = {"skipped_early": False, "truncated": 0, "summarized": 0, "chars_saved": 0}
    if not history or turn < kn["mc_turns_before_truncate"]:
        rep["skipped_early"] = True
        return history, rep
    total = sum(1 for m in history if m["role"] == "assistant")
    seen = 0
    out = []
    for m in history:
        if m["role"] == "assistant":
            seen += 1
        age = total - seen
        cand = m["role"] == "tool" or (m["role"] == "user" and m["agent_feedback"])
        c = m["content"]
        if not cand or len(c) < kn["mc_min_content_size"]:
            out.append(m)
            continue
        if age >= kn["mc_turns_before_summarize"]:
            lines = c.count(b"\n") + 1
            stub = (f"[Old tool result cleared \u2014 {lines} lines, {len(c)} chars, "
                    f"{ctype(c)}]").encode()
            rep["summarized"] += 1
        elif age >= kn["mc_turns_before_truncate"]:
            stub = mc_preview(c, kn["mc_truncate_head_chars"], kn["mc_truncate_tail_chars"])
            rep["truncated"] += 1
        else:
            out.append(m)
            continue
        new = stub + suffix(c, stub, ccr_on)
        rep["chars_saved"] += len(c) - len(new)
        out.append({**m, "content": new})
    return out, rep


# --- pairing -------------------------------------------------------------------------------

def needs_repair(h: list[dict]) -> bool:
    i = 0
    while i < len(h):
        m = h[i]
        if m["role"] == "tool":
            return True
        if not (m["role"] == "assistant" and m["tool_calls"]):
            i += 1
            continue
        ids = [c[0] for c in m["tool_calls"]]
        if "" in ids or len(set(ids)) != len(ids):
            return True
        seen: list[str] = []
        j = i + 1
        while j < len(h) and h[j]["role"] == "tool":
            t = h[j]["tool_call_id"]
            if t not in ids or t in seen or len(seen) >= len(ids):
                return True
            seen.append(t)
            j += 1
        if len(seen) != len(ids):
            return True
        i = j
    return False


def pairing(h: list[dict]):
    rep = {"synthetic_results_injected": 0, "orphan_results_removed": 0,
           "duplicate_tool_use_pruned": 0, "results_relocated": 0, "missing_tool_use_ids": [],
           "orphan_tool_result_ids": [], "has_repairs": False}
    if not h or not needs_repair(h):
        return h, rep
    out: list[dict] = []
    claimed: set[int] = set()
    for i, m in enumerate(h):
        if m["role"] == "tool":
            if i not in claimed:
                rep["orphan_results_removed"] += 1
                rep["orphan_tool_result_ids"].append(m["tool_call_id"])
            continue
        if not (m["role"] == "assistant" and m["tool_calls"]):
            out.append(m)
            continue
        kept = []
        for c in m["tool_calls"]:
            if c[0] == "" or c[0] in [k[0] for k in kept]:
                rep["duplicate_tool_use_pruned"] += 1
            else:
                kept.append(c)
        out.append({**m, "tool_calls": kept})
        interposed = False
        claims: dict[str, tuple[int, bool]] = {}
        j = i + 1
        while j < len(h) and h[j]["role"] != "assistant":
            t = h[j]
            if t["role"] != "tool":
                interposed = True
            elif t["tool_call_id"] and t["tool_call_id"] in [k[0] for k in kept] \
                    and t["tool_call_id"] not in claims:
                claims[t["tool_call_id"]] = (j, interposed)
            j += 1
        for c in kept:
            if c[0] in claims:
                j, moved = claims[c[0]]
                claimed.add(j)
                out.append(h[j])
                rep["results_relocated"] += int(moved)
            else:
                out.append({"role": "tool", "content": SYNTH, "tool_calls": [],
                            "tool_call_id": c[0], "is_error": True,
                            "error_code": "missing_result", "agent_feedback": False})
                rep["synthetic_results_injected"] += 1
                rep["missing_tool_use_ids"].append(c[0])
    rep["has_repairs"] = any(rep[k] > 0 for k in ("synthetic_results_injected",
                                                  "orphan_results_removed",
                                                  "duplicate_tool_use_pruned",
                                                  "results_relocated"))
    return (out if rep["has_repairs"] else h), rep


# --- budget --------------------------------------------------------------------------------

class Spills:
    def __init__(self, spill_dir: str):
        self.dir = spill_dir
        self.counter = 0
        self.files: list[dict] = []

    def persist(self, content: bytes, call_id: str, limit: int, call_index: int) -> bytes:
        if len(content) <= limit:
            return content
        if self.dir.startswith("/dev/null/"):
            return content[:limit] + "\n... [output truncated \u2014 dir creation failed]".encode()
        self.counter += 1
        name = f"budget_{call_id.replace('/', '_')}_{self.counter}.txt"
        path = (self.dir.rstrip("/") + "/" + name)
        if len(name.encode()) > 255:
            return content[:limit] + "\n... [output truncated \u2014 disk write failed]".encode()
        self.files.append({"name": name, "path": path, "created_in_call": call_index,
                           "size": len(content), "content": content})
        head_end = min(4000, len(content))
        head = content[:head_end]
        k = head.rfind(b"\n")
        if k > head_end // 2:
            head = head[:k + 1]
        out = head + (f"\n\n... [{len(content) - 5000} chars omitted \u2014 full output saved to "
                      f"{path}]\n\n").encode()
        tail_start = max(len(content) - 1000, 0)
        if tail_start > head_end:
            tail = content[tail_start:]
            k = tail.find(b"\n")
            if 0 < k < len(tail) // 2:
                tail = tail[k + 1:]
            out += tail
        return out


def budget(h: list[dict], kn: dict[str, int], spills: Spills, call_index: int):
    rep = {"total_tool_results": 0, "total_original_chars": 0, "total_final_chars": 0,
           "results_truncated": 0, "results_persisted_disk": 0, "bytes_saved_to_disk": 0,
           "spilled_files": []}
    h = [dict(m) for m in h]
    groups: list[list[int]] = []
    cur: list[int] | None = None
    for i, m in enumerate(h):
        if m["role"] == "assistant" and m["tool_calls"]:
            cur = []
            groups.append(cur)
        elif m["role"] == "tool" and cur is not None:
            cur.append(i)
        elif m["role"] in ("assistant", "user", "system"):
            cur = None
    first = len(spills.files)

    def cut(i: int, limit: int) -> int:
        before = len(h[i]["content"])
        h[i]["content"] = spills.persist(h[i]["content"], h[i]["tool_call_id"], limit,
                                         call_index)
        rep["results_truncated"] += 1
        rep["results_persisted_disk"] += 1
        return before - len(h[i]["content"])

    for g in groups:
        for i in g:
            rep["total_tool_results"] += 1
            rep["total_original_chars"] += len(h[i]["content"])
            if len(h[i]["content"]) > kn["per_result_max_chars"]:
                cut(i, kn["per_result_max_chars"])
    budget_ = kn["turn_budget_chars"]
    for g in groups:
        size = sum(len(h[i]["content"]) for i in g)
        if size <= budget_:
            continue
        for i in sorted(g, key=lambda j: -len(h[j]["content"])):
            if size <= budget_:
                break
            n = len(h[i]["content"])
            target = max(n - (size - budget_), 5200)
            if target >= n:
                continue
            saved = cut(i, target)
            size -= saved
            rep["bytes_saved_to_disk"] += saved
    rep["total_final_chars"] = sum(len(h[i]["content"]) for g in groups for i in g)
    rep["spilled_files"] = [f["name"] for f in spills.files[first:]]
    return h, rep


# --- replay --------------------------------------------------------------------------------

def replay(scenario: dict[str, Any]) -> dict[str, Any]:
    """The trace keys the README defines, with histories as lists of message dicts."""
    cfg = scenario.get("config") or {}
    kn = knobs(cfg.get("env") or {})
    agent = cfg.get("loop_mode", "agent") == "agent"
    ccr_on = cfg.get("ccr", "on") == "on"
    anchor = cfg.get("anchor_text")
    spills = Spills(cfg.get("spill_dir", "/tmp/chatcli-tool-results"))
    msgs = [msg(m) for m in scenario["messages"]]
    persistent: list[dict] = []
    dispatch, calls = [], []
    run = turn = 0
    final = None

    def call(response_index):
        nonlocal persistent
        h, mc = microcompact(persistent, turn, kn, ccr_on)
        h2, pr = pairing(h)
        persistent = h2
        out = list(h2) + ([{"role": "system", "content": anchor.encode(), "tool_calls": [],
                            "tool_call_id": "", "is_error": False, "error_code": "",
                            "agent_feedback": False}] if anchor is not None else [])
        sent, br = budget(out, kn, spills, len(calls))
        calls.append({"call_index": len(calls), "run_index": run, "loop_turn": turn,
                      "response_input_index": response_index,
                      "microcompact": {**mc, "history": h}, "pairing": {**pr, "history": h2},
                      "budget": {**br, "history": sent}})

    for idx, m in enumerate(msgs):
        if m["role"] == "assistant":
            call(idx)
            persistent = persistent + [m]
            if agent and not m["tool_calls"]:
                run, turn = run + 1, 0
            else:
                turn += 1
            continue
        if m["role"] == "tool":
            latest = next((p for p in reversed(persistent) if p["role"] == "assistant"), None)
            match = next((c for c in (latest or {}).get("tool_calls", [])
                          if c[0] == m["tool_call_id"]), None) if latest else None
            rec = {"input_index": idx, "tool_call_id": m["tool_call_id"], "function_name": "",
                   "dispatch_name": "", "cap_applied": False, "cap": 0,
                   "input_len": len(m["content"]), "stored_len": len(m["content"])}
            if match is not None:
                plugin, cap = cap_for(match[1])
                rec.update(function_name=match[1], dispatch_name=plugin, cap=cap)
                if not m["is_error"]:
                    m = {**m, "content": truncate_for_llm(m["content"], cap)}
                    rec.update(cap_applied=True, stored_len=len(m["content"]))
            dispatch.append(rec)
        persistent = persistent + [m]
    if not msgs or not (msgs[-1]["role"] == "assistant" and not msgs[-1]["tool_calls"]):
        call(None)
        final = calls[-1]["pairing"]["history"]
    else:
        final = persistent
    return {"effective_config": {**kn, "loop_mode": "agent" if agent else "coder"},
            "dispatch": dispatch, "calls": calls, "final_history": final,
            "spilled_files": spills.files}
