"""Attacks on `sluice mcp` with the official Python MCP client (PyPI `mcp`,
2.x), for tests/attack_mcp.rs: a hostile client, a prompt-injected model,
a second client on the same server. One scenario a run; it prints one JSON
line of what it saw, which the Rust test asserts exactly.

    python3 attack.py SCENARIO --form 2026|2025-11-25|2025-06-18
                      (--stdio SLUICE_BIN --workspace DIR [-- EXTRA sluice mcp ARGS] | --url URL [--token T])
                      [--arg JSON] [--client-name NAME]

It takes drive.py's connection (the same client, negotiated the same way)
and adds what drive.py never does: forged and replayed `requestState`s,
tools called by a name the list did not give, calls cancelled while they
wait, two clients at once, and raw HTTP beside the client.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

import anyio
import httpx2
import mcp_types as types
from mcp import MCPError

_spec = importlib.util.spec_from_file_location("drive", Path(__file__).with_name("drive.py"))
drive = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(drive)

connect, seen, text_of, error_of = drive.connect, drive.seen, drive.text_of, drive.error_of

ACCEPT = types.ElicitResult(action="accept", content={})
ACCEPT_RUN = types.ElicitResult(action="accept", content={"forRun": True})
DECLINE = types.ElicitResult(action="decline")

#: How long a call that must be answered at once may take before the
#: scenario says it was held.
QUICK_S = 5.0


def parse():
    a = drive.parse(lambda ap: ap.add_argument("--client-name"))
    a.spec = json.loads(a.arg)
    return a


def client_kw(a, **kw):
    if a.client_name is not None:
        kw["client_info"] = types.Implementation(name=a.client_name, version="6.6.6")
    return kw


async def accept_all(ctx, params):
    return ACCEPT


def dumped(v):
    """A pydantic model or a plain value, as JSON."""
    return v.model_dump(by_alias=True, exclude_none=True) if hasattr(v, "model_dump") else v


def outcome(r) -> dict:
    """A tools/call answer as the tests compare it: a result, an "input
    required" result (its question and state), or a JSON-RPC error."""
    if isinstance(r, types.InputRequiredResult):
        reqs = r.input_requests or {}
        return {
            "inputRequired": {
                k: {"method": v.method, "message": v.params.message,
                    "schema": dumped(getattr(v.params, "requested_schema", None))}
                for k, v in reqs.items()
            },
            "requestState": r.request_state,
        }
    return seen(r)


async def call(c, tool, args, *, timeout=QUICK_S, **kw) -> dict:
    """One tools/call on the session: its outcome, `mcpError`, or
    `heldS` when no answer came within `timeout` seconds."""
    t = time.monotonic()
    try:
        with anyio.fail_after(timeout):
            r = await c.session.call_tool(tool, args, allow_input_required=True, **kw)
    except MCPError as e:
        return {"mcpError": error_of(e)}
    except TimeoutError:
        return {"heldS": round(time.monotonic() - t, 1)}
    return outcome(r)


# ---------------------------------------------------------------------------
# 1. MRTR requestState


async def scenario_mrtr(a):
    """A write outside the workspace asks; its requestState is forged,
    sent for another tool and other arguments, sent without an answer,
    reused once replaced, then answered, then replayed."""
    out = a.spec["outside"]
    one = {"path": f"{out}/one.txt", "content": "one"}
    two = {"path": f"{out}/two.txt", "content": "evil"}
    three = {"path": f"{out}/three.txt", "content": "evil"}
    yes = {"approve": ACCEPT}
    r = {}
    async with connect(a, elicitation_callback=accept_all, **client_kw(a)) as c:
        await c.list_tools()
        r["forged"] = await call(c, "write", one, request_state="0" * 32, input_responses=yes)
        r["forgedEmpty"] = await call(c, "write", one, request_state="", input_responses=yes)
        r["forgedLong"] = await call(c, "write", one, request_state="f" * 100_000, input_responses=yes)
        first = await call(c, "write", one)
        r["first"] = first
        s1 = first["requestState"]
        r["otherTool"] = await call(c, "read", one, request_state=s1, input_responses=yes)
        r["otherArgs"] = await call(c, "write", two, request_state=s1, input_responses=yes)
        r["extraArg"] = await call(c, "write", {"content": "one", "path": f"{out}/one.txt", "x": 1},
                                    request_state=s1, input_responses=yes)
        again = await call(c, "write", one, request_state=s1)
        r["noAnswer"] = again
        s2 = again.get("requestState")
        r["replaced"] = await call(c, "write", one, request_state=s1, input_responses=yes)
        r["otherKey"] = await call(c, "write", one, request_state=s2,
                                   input_responses={"approve-all": ACCEPT})
        s3 = r["otherKey"].get("requestState")
        r["answered"] = await call(c, "write", one, request_state=s3, input_responses=yes)
        r["replayed"] = await call(c, "write", one, request_state=s3, input_responses=yes)
        r["replayedOther"] = await call(c, "write", three, request_state=s3, input_responses=yes)
        r["distinct"] = len({s1, s2, s3}) == 3
    return r


# ---------------------------------------------------------------------------
# 2. Tools called by a name the list does not give


async def scenario_calls(a):
    """Each of spec.calls, on one session, in order, with no list first:
    what the server answered. spec.answer: accept|decline|none."""
    kw = client_kw(a)
    if a.spec.get("answer", "none") != "none":
        reply = ACCEPT if a.spec["answer"] == "accept" else DECLINE

        async def answer(ctx, params):
            return reply
        kw["elicitation_callback"] = answer
    out = []
    async with connect(a, **kw) as c:
        listed = [t.name for t in (await c.list_tools()).tools]
        for spec in a.spec["calls"]:
            out.append(await call(c, spec["tool"], spec.get("input", {}), timeout=30))
    return {"listed": listed, "results": out}


# ---------------------------------------------------------------------------
# 3. A yes for the run never covers a once-only ask


async def scenario_asks(a):
    """spec.tool with each of spec.inputs (or spec.input, spec.times
    times), each ask answered with spec.reply (an ElicitResult's JSON): the
    questions, and each result with how many questions it took."""
    asked = []
    reply = types.ElicitResult.model_validate(a.spec["reply"])

    async def answer(ctx, params):
        asked.append({"message": params.message,
                      "schema": dumped(params.requested_schema)})
        return reply

    inputs = a.spec.get("inputs") or [a.spec["input"]] * a.spec.get("times", 1)
    results = []
    async with connect(a, elicitation_callback=answer, **client_kw(a)) as c:
        for one in inputs:
            before = len(asked)
            with anyio.fail_after(60):
                r = seen(await c.call_tool(a.spec["tool"], one))
            r["asked"] = len(asked) - before
            results.append(r)
    return {"asked": asked, "results": results}


# ---------------------------------------------------------------------------
# 6, 7. Standard output and progress


async def scenario_sequence(a):
    """spec.calls in order on one session, each with a progress callback:
    results (isError, the first 200 characters of text, the structured
    output's stream lengths) and the progress messages' sizes."""
    out = []
    async with connect(a, **client_kw(a)) as c:
        for spec in a.spec["calls"]:
            notes = []

            async def on_progress(progress, total, message, notes=notes):
                notes.append(message or "")

            try:
                with anyio.fail_after(120):
                    r = await c.call_tool(spec["tool"], spec.get("input", {}), progress_callback=on_progress)
            except MCPError as e:
                out.append({"mcpError": error_of(e)})
                continue
            await anyio.sleep(0.2)  # progress callbacks run as tasks
            s = r.structured_content if isinstance(r.structured_content, dict) else {}
            out.append({
                "isError": bool(r.is_error),
                "text": text_of(r)[:200],
                "structured": None if spec["tool"] == "bash" else r.structured_content,
                "stdoutBytes": len(s.get("stdout", "").encode()) if isinstance(s.get("stdout"), str) else None,
                "stdoutTail": s.get("stdout", "")[-120:] if isinstance(s.get("stdout"), str) else None,
                "stdoutTruncated": s.get("stdoutTruncated"),
                "stdoutDropped": s.get("stdoutDroppedBytes"),
                "progressNotes": len(notes),
                "progressBytes": sum(len(n.encode()) for n in notes),
                "progressLast": notes[-1][-200:] if notes else None,
            })
    return {"results": out}


# ---------------------------------------------------------------------------
# 9. A call cancelled while it waits for its turn


async def scenario_cancel_waiting(a):
    """spec.holder (a bash call that holds the scheduler, having written
    spec.file) runs; spec.waiter (an overlapping call) is sent behind it
    and cancelled while it waits; then the holder ends and a last call
    runs."""
    ws = Path(a.workspace) if a.workspace else Path(a.spec["workspace"])
    marker = ws / a.spec["file"]
    r = {}
    async with connect(a, **client_kw(a)) as c:
        async with anyio.create_task_group() as tg:
            async def holder():
                with anyio.fail_after(60):
                    r["holder"] = seen(await c.call_tool("bash", a.spec["holder"]))
            tg.start_soon(holder)
            with anyio.fail_after(20):
                while not marker.exists():
                    await anyio.sleep(0.05)
            scope = anyio.CancelScope()

            async def waiter():
                with scope:
                    r["waiter"] = seen(await c.call_tool(a.spec["waiter"]["tool"], a.spec["waiter"]["input"]))
            tg.start_soon(waiter)
            await anyio.sleep(0.7)
            r["waiterDoneBeforeCancel"] = "waiter" in r
            scope.cancel()
            r["contentAtCancel"] = marker.read_text()
        await anyio.sleep(1.0)
        r["contentAfter"] = marker.read_text()
        r["after"] = await call(c, "ls", {"path": "."}, timeout=30)
    return r


async def scenario_cancel_behind_question(a):
    """A 2026 client: a write of spec.path asks and is left waiting; a
    second write of the same file is sent behind it and cancelled; then
    the first is answered yes."""
    target = Path(a.spec["path"])
    first_args = {"path": str(target), "content": "first"}
    r = {}
    async with connect(a, elicitation_callback=accept_all, **client_kw(a)) as c:
        first = await call(c, "write", first_args)
        r["firstAsked"] = "inputRequired" in first
        async with anyio.create_task_group() as tg:
            scope = anyio.CancelScope()

            async def second():
                with scope:
                    r["second"] = outcome(await c.session.call_tool(
                        "write", {"path": str(target), "content": "second"}, allow_input_required=True))
            tg.start_soon(second)
            await anyio.sleep(0.7)
            r["secondDoneBeforeCancel"] = "second" in r
            scope.cancel()
        r["firstAnswered"] = await call(c, "write", first_args, timeout=30,
                                        request_state=first.get("requestState"),
                                        input_responses={"approve": ACCEPT})
        await anyio.sleep(1.0)
        r["content"] = target.read_text() if target.exists() else None
        r["after"] = await call(c, "ls", {"path": "."}, timeout=30)
    return r


async def scenario_cancel_asked(a):
    """A 2025 client: a write outside the workspace asks; the client
    cancels the call, and only then does the person's yes arrive."""
    out = a.spec["outside"]
    target = Path(out) / "late.txt"
    r = {"asked": 0}
    cancelled = anyio.Event()

    async def answer(ctx, params):
        r["asked"] += 1
        await cancelled.wait()
        await anyio.sleep(0.5)
        return ACCEPT

    async with connect(a, elicitation_callback=answer, **client_kw(a)) as c:
        async with anyio.create_task_group() as tg:
            scope = anyio.CancelScope()

            async def the_call():
                with scope:
                    r["result"] = seen(await c.call_tool("write", {"path": str(target), "content": "late"}))
            tg.start_soon(the_call)
            with anyio.fail_after(20):
                while r["asked"] == 0:
                    await anyio.sleep(0.05)
            scope.cancel()
            cancelled.set()
        await anyio.sleep(2.0)
        r["written"] = target.exists()
        r["after"] = await call(c, "ls", {"path": "."}, timeout=30)
    return r


# ---------------------------------------------------------------------------
# 10. One question must not hold other calls


async def scenario_held(a):
    """spec.asker asks (a 2026 client gets "input required" and leaves it
    unanswered); then each of spec.others is called on the same session:
    answered at once, or held. Then the question is answered."""
    r = {}
    async with connect(a, elicitation_callback=accept_all, **client_kw(a)) as c:
        first = await call(c, a.spec["asker"]["tool"], a.spec["asker"]["input"])
        r["asker"] = {k: v for k, v in first.items() if k != "requestState"}
        r["others"] = [await call(c, o["tool"], o.get("input", {})) for o in a.spec["others"]]
        if "requestState" in first:
            r["answered"] = await call(c, a.spec["asker"]["tool"], a.spec["asker"]["input"], timeout=60,
                                       request_state=first["requestState"], input_responses={"approve": ACCEPT})
    return r


async def scenario_two_clients(a):
    """Client A (2026) leaves a question unanswered; client B, of
    spec.form_b, makes a call that asks and answers it at once: B's call
    runs, or is held behind A's question. Then A answers. The calls are
    writes unless spec.aTool / spec.bTool name other tools."""
    r = {}
    a_form = argparse.Namespace(**{**vars(a), "form": "2026"})
    b_form = argparse.Namespace(**{**vars(a), "form": a.spec["formB"]})
    async with connect(a_form, elicitation_callback=accept_all, **client_kw(a)) as ca:
        a_tool, b_tool = a.spec.get("aTool", "write"), a.spec.get("bTool", "write")
        first = await call(ca, a_tool, a.spec["a"])
        r["a"] = "inputRequired" in first
        asked_b = []

        async def answer_b(ctx, params):
            asked_b.append(params.message.split("\n")[0])
            return ACCEPT

        async with connect(b_form, elicitation_callback=answer_b,
                           client_info=types.Implementation(name="client-b", version="1")) as cb:
            t = time.monotonic()
            try:
                with anyio.fail_after(QUICK_S):
                    rb = await cb.call_tool(b_tool, a.spec["b"])
                r["b"] = seen(rb)
            except TimeoutError:
                r["b"] = {"heldS": round(time.monotonic() - t, 1)}
            r["bAsked"] = asked_b
        if "requestState" in first:
            r["aAnswered"] = await call(ca, a_tool, a.spec["a"], timeout=60,
                                        request_state=first["requestState"], input_responses={"approve": ACCEPT})
    return r


async def scenario_foreign_answer(a):
    """Client A (2025-11-25 over HTTP) is asked about a write; while the
    question is open, another session (B) and a sessionless POST answer
    "accept" to A's elicitation id; then A's person declines."""
    r = {}
    target = a.spec["a"]["path"]
    request_id = []
    forged = anyio.Event()

    async def answer_a(ctx, params):
        request_id.append(ctx.request_id)
        with anyio.fail_after(30):
            await forged.wait()
        await anyio.sleep(1.0)
        return DECLINE

    a_form = argparse.Namespace(**{**vars(a), "form": "2025-11-25"})
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if a.token:
        headers["Authorization"] = f"Bearer {a.token}"
    async with connect(a_form, elicitation_callback=answer_a, **client_kw(a)) as ca:
        async with anyio.create_task_group() as tg:
            async def the_call():
                with anyio.fail_after(60):
                    r["a"] = seen(await ca.call_tool("write", a.spec["a"]))
            tg.start_soon(the_call)
            with anyio.fail_after(20):
                while not request_id:
                    await anyio.sleep(0.05)
            rid = request_id[0]
            r["requestId"] = rid
            async with httpx2.AsyncClient(timeout=10) as h:
                init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                        "params": {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
                                   "clientInfo": {"name": "client-b", "version": "1"}}}
                resp = await h.post(a.url, json=init, headers=headers)
                sid = resp.headers.get("mcp-session-id")
                r["bSession"] = bool(sid)
                hb = {**headers, "Mcp-Session-Id": sid or "", "Mcp-Protocol-Version": "2025-11-25"}
                await h.post(a.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=hb)
                answer = {"action": "accept", "content": {"forRun": True}}
                statuses = []
                for rid_try in {rid, str(rid)} if isinstance(rid, int) else {rid}:
                    msg = {"jsonrpc": "2.0", "id": rid_try, "result": answer}
                    statuses.append((await h.post(a.url, json=msg, headers=hb)).status_code)
                    statuses.append((await h.post(a.url, json=msg, headers={
                        **headers, "Mcp-Protocol-Version": "2026-07-28"})).status_code)
                r["forgedStatuses"] = sorted(statuses)
            forged.set()
        r["written"] = Path(target).exists()
    return r


# ---------------------------------------------------------------------------
# Issue 36: jobs and answers belong to their client; asks cannot starve


async def scenario_owners(a):
    """Clients A and B on one server: A starts a background job, which B
    reads and kills; A answers a write's question "yes for the run" and
    makes the same call again; B makes it too (B's person declines)."""
    out = a.spec["outside"]
    w = {"path": f"{out}/owned.txt", "content": "x"}
    asked = {"a": [], "b": []}

    def answerer(who, reply):
        async def answer(ctx, params):
            asked[who].append(params.message.split("\n")[0])
            return reply
        return answer

    r = {}
    name = lambda n: types.Implementation(name=n, version="1")
    async with connect(a, elicitation_callback=answerer("a", ACCEPT_RUN), client_info=name("client-a")) as ca:
        async with connect(a, elicitation_callback=answerer("b", DECLINE), client_info=name("client-b")) as cb:
            tick = {"command": "while true; do echo tick; sleep 0.1; done", "background": True}
            started = await call(ca, "bash", tick, timeout=30)
            job = started["structured"]["jobId"]
            await anyio.sleep(0.4)
            r["bRead"] = await call(cb, "job_read", {"jobId": job})
            r["bKill"] = await call(cb, "job_kill", {"jobId": job})
            r["aRead"] = await call(ca, "job_read", {"jobId": job})
            r["aWrite1"] = await call(ca, "write", w, timeout=30)
            r["aWrite2"] = await call(ca, "write", w, timeout=30)
            r["bWrite"] = await call(cb, "write", w, timeout=30)
            r["aKill"] = await call(ca, "job_kill", {"jobId": job})
    r["asked"] = asked
    return r


async def scenario_park(a):
    """spec.sessions clients each leave spec.asks writes' questions open
    (their person never answers) and count the calls refused at once; then
    another client reads a file and has its own write asked and answered:
    how long each took."""
    out = a.spec["outside"]
    parked, refused, held = [], [], anyio.Event()

    async def never(ctx, params):
        parked.append(1)
        await held.wait()
        return DECLINE

    async def one_session(i, tg_ready):
        async with connect(a, elicitation_callback=never,
                           client_info=types.Implementation(name=f"parker-{i}", version="1")) as c:
            async def one(j):
                r = await call(c, "write", {"path": f"{out}/p{i}-{j}.txt", "content": "x"}, timeout=120)
                if r.get("isError") and "questions open already" in r.get("text", ""):
                    refused.append(r["text"])
            async with anyio.create_task_group() as tg:
                for j in range(a.spec["asks"]):
                    tg.start_soon(one, j)
                tg_ready.append(1)
                await held.wait()
                tg.cancel_scope.cancel()

    r = {}
    ready = []
    want = a.spec["sessions"] * min(a.spec["asks"], a.spec["bound"])
    async with anyio.create_task_group() as tg:
        for i in range(a.spec["sessions"]):
            tg.start_soon(one_session, i, ready)
        want_refused = a.spec["sessions"] * max(0, a.spec["asks"] - a.spec["bound"])
        with anyio.move_on_after(90):
            while len(parked) < want or len(refused) < want_refused:
                await anyio.sleep(0.1)
        r["parked"], r["refused"] = len(parked), len(refused)
        r["refusal"] = refused[0] if refused else None
        b_asked = []

        async def answer_b(ctx, params):
            b_asked.append(1)
            return ACCEPT

        async with connect(a, elicitation_callback=answer_b,
                           client_info=types.Implementation(name="client-b", version="1")) as cb:
            t = time.monotonic()
            r["bRead"] = await call(cb, "read", {"path": a.spec["read"]}, timeout=QUICK_S)
            r["bReadS"] = round(time.monotonic() - t, 2)
            t = time.monotonic()
            r["bWrite"] = await call(cb, "write", {"path": f"{out}/b.txt", "content": "b"}, timeout=QUICK_S)
            r["bWriteS"] = round(time.monotonic() - t, 2)
            r["bAsked"] = len(b_asked)
        held.set()
    return r


if __name__ == "__main__":
    anyio.run(drive.run_scenario, parse(), globals())
