"""Drives `sluice mcp` with the official Python MCP client (PyPI `mcp`, 2.x),
for tests/mcp_server.rs. One scenario a run; it prints one JSON line of what
it saw, which the Rust test asserts exactly.

    python3 drive.py SCENARIO --form 2026|2025-11-25|2025-06-18
                     (--stdio SLUICE_BIN --workspace DIR [-- EXTRA sluice mcp ARGS] | --url URL [--token T])
                     [--answer accept|accept-run|decline|none] [--arg JSON]

The client is the real one: it negotiates the protocol, validates each
result against the tool's outputSchema, answers elicitation, sends progress
tokens and cancellations as it would for any agent.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import time

import anyio
import mcp.client.session as client_session
import mcp_types as types
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

CLIENT = types.Implementation(name="sluice-tests", version="1.2.3")


def parse(more=None):
    """The command line every driver takes (`more(parser)` adds a driver's
    own options); what follows `--` goes to `sluice mcp` (as `a.extra`)."""
    argv = sys.argv[1:]
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario")
    ap.add_argument("--form", required=True, choices=["2026", "2025-11-25", "2025-06-18"])
    ap.add_argument("--stdio")
    ap.add_argument("--workspace")
    ap.add_argument("--url")
    ap.add_argument("--token")
    ap.add_argument("--arg", default="{}")
    if more:
        more(ap)
    else:
        ap.add_argument("--answer", default="none", choices=["accept", "accept-run", "decline", "none"])
    a = ap.parse_args(argv)
    a.extra = extra
    return a


@contextlib.asynccontextmanager
async def connect(a, **kw):
    """A client of `a.form`: 2026 stateless requests, or initialize at a 2025 version."""
    kw.setdefault("client_info", CLIENT)
    kw.setdefault("cache", None)
    async with contextlib.AsyncExitStack() as stack:
        if a.url:
            headers = {"Authorization": f"Bearer {a.token}"} if a.token else {}
            http = await stack.enter_async_context(create_mcp_http_client(headers=headers))
            server = streamable_http_client(a.url, http_client=http)
        else:
            server = StdioServerParameters(
                command=a.stdio, args=["mcp", "--workspace", a.workspace, *a.extra],
                env={k: v for k, v in os.environ.items() if k.startswith(("SLUICE_", "PATH", "HOME"))})
        if a.form == "2026":
            c = await stack.enter_async_context(Client(server, mode="2026-07-28", **kw))
        else:
            c = Client(server, mode="legacy", **kw)
            saved = client_session.LATEST_HANDSHAKE_VERSION
            client_session.LATEST_HANDSHAKE_VERSION = a.form
            try:
                await c.__aenter__()
            finally:
                client_session.LATEST_HANDSHAKE_VERSION = saved
            stack.push_async_callback(c.__aexit__, None, None, None)
        yield c


def text_of(r) -> str:
    return "\n".join(b.text for b in r.content if isinstance(b, types.TextContent))


def seen(r) -> dict:
    return {"isError": bool(r.is_error), "structured": r.structured_content, "text": text_of(r)}


async def scenario_list(a):
    async with connect(a) as c:
        tools = (await c.list_tools()).tools
        return {
            "protocol": c.protocol_version,
            "tools": [t.name for t in tools],
            "annotations": {t.name: t.annotations.model_dump(by_alias=True, exclude_none=True) if t.annotations else None
                            for t in tools},
            "outputSchema": {t.name: t.output_schema is not None for t in tools},
        }


async def scenario_calls(a):
    """One call of each flow kind: sealed, compensable, irreversible (a command)."""
    out = {}
    async with connect(a) as c:
        out["protocol"] = c.protocol_version
        out["write"] = seen(await c.call_tool("write", {"path": "notes.md", "content": "one\ntwo\n"}))
        out["read"] = seen(await c.call_tool("read", {"path": "notes.md"}))
        out["edit"] = seen(await c.call_tool("edit", {"path": "notes.md", "oldString": "two", "newString": "2"}))
        out["grep"] = seen(await c.call_tool("grep", {"pattern": "one"}))
        out["glob"] = seen(await c.call_tool("glob", {"pattern": "*.md"}))
        out["ls"] = seen(await c.call_tool("ls", {"path": "."}))
        out["bash"] = seen(await c.call_tool("bash", {"command": "cat notes.md; echo err >&2; exit 3"}))
        out["shell_command"] = seen(await c.call_tool("shell_command", {"command": "echo hi"}))
    return out


async def scenario_call(a):
    """One call: --arg is {"tool": NAME, "input": {...}}; --answer answers an ask."""
    spec = json.loads(a.arg)
    asked = []

    async def answer(ctx, params):
        asked.append(params.message)
        if a.answer == "decline":
            return types.ElicitResult(action="decline")
        content = {"forRun": True} if a.answer == "accept-run" else {}
        return types.ElicitResult(action="accept", content=content)

    kw = {} if a.answer == "none" else {"elicitation_callback": answer}
    async with connect(a, **kw) as c:
        results = []
        for _ in range(spec.get("times", 1)):
            r = await c.call_tool(spec["tool"], spec.get("input", {}))
            results.append(seen(r))
        return {"protocol": c.protocol_version, "results": results, "asked": asked}


async def scenario_plan(a):
    """The plan resource: listed, read before and after update_plan (--arg
    is its input), then a refused update_plan leaves it as it was."""
    spec = json.loads(a.arg)
    async with connect(a) as c:
        listed = (await c.list_resources()).resources

        async def read():
            r = await c.read_resource("sluice://plan")
            return {"mimeType": r.contents[0].mime_type, "json": json.loads(r.contents[0].text)}

        out = {"resources": [{"uri": str(r.uri), "name": r.name, "mimeType": r.mime_type} for r in listed]}
        out["before"] = await read()
        out["call"] = seen(await c.call_tool("update_plan", spec))
        out["after"] = await read()
        bad = {"plan": [{"step": "a", "status": "in_progress"}, {"step": "b", "status": "in_progress"}]}
        out["refused"] = seen(await c.call_tool("update_plan", bad))
        out["still"] = await read()
        return out


async def scenario_progress(a):
    spec = json.loads(a.arg)
    notes = []

    async def on_progress(progress, total, message):
        notes.append({"progress": progress, "message": message, "at": time.monotonic()})

    async with connect(a) as c:
        r = await c.call_tool(spec["tool"], spec["input"], progress_callback=on_progress)
        done = time.monotonic()
        return {"result": seen(r), "notes": [{"progress": n["progress"], "message": n["message"],
                                               "beforeResult": n["at"] <= done} for n in notes]}


async def scenario_cancel(a):
    """Starts a command that sleeps with a marker in its command line,
    cancels the call once that process is there, and watches it: gone
    within how long. (A confined command's $$ is its pid namespace's, so the
    process is found by its command line.)"""
    spec = json.loads(a.arg)
    marker = spec["marker"]
    pid = None
    async with connect(a) as c:
        with anyio.move_on_after(30):
            async with anyio.create_task_group() as tg:
                scope = anyio.CancelScope()

                async def call():
                    with scope:
                        await c.call_tool("bash", {"command": spec["command"]})

                tg.start_soon(call)
                while pid is None:
                    await anyio.sleep(0.05)
                    pid = find(marker)
                cancelled_at = time.monotonic()
                scope.cancel()
        gone = None
        while pid and time.monotonic() - cancelled_at < 10:
            if not alive(pid):
                gone = round(time.monotonic() - cancelled_at, 2)
                break
            await anyio.sleep(0.05)
        # The session still works after a cancellation.
        after = seen(await c.call_tool("ls", {"path": "."}))
        return {"found": pid is not None, "goneAfterS": gone, "after": after["isError"]}


def find(marker: str):
    """The pid of a `sleep MARKER` process, if one runs."""
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            args = open(f"/proc/{d}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if args[:2] == [b"sleep", marker.encode()]:
            return int(d)
    return None


def alive(pid: int) -> bool:
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


async def scenario_job(a):
    async with connect(a) as c:
        started = seen(await c.call_tool("bash", {"command": "while true; do echo tick; sleep 0.1; done", "background": True}))
        job = started["structured"]["jobId"]
        await anyio.sleep(0.5)
        read = seen(await c.call_tool("job_read", {"jobId": job}))
        kill = seen(await c.call_tool("job_kill", {"jobId": job}))
        wait = seen(await c.call_tool("job_wait", {"jobId": job, "timeoutMs": 5000}))
        return {"started": started, "read": read, "kill": kill, "wait": wait}


async def scenario_terminate(a):
    """A session the client ends: it lists the tools, then closes, which
    sends DELETE over HTTP. What the client logged at warning level or above
    while it did (the Python client warns when the server's answer to the
    DELETE is not one it expects)."""
    warned: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            warned.append(record.getMessage())

    keep = Keep(level=logging.WARNING)
    logging.getLogger("mcp").addHandler(keep)
    try:
        async with connect(a) as c:
            tools = (await c.list_tools()).tools
            session = c.protocol_version
    finally:
        logging.getLogger("mcp").removeHandler(keep)
    return {"protocol": session, "tools": len(tools), "warnings": warned}


def error_of(e: MCPError) -> dict:
    return {"code": e.error.code, "message": e.error.message}


async def run_scenario(a, scenarios, error_of=error_of):
    """Runs `a.scenario` (`scenario_NAME` of `scenarios`) and prints what it
    saw as one JSON line; an MCP error it raised is `{"mcpError": ...}`."""
    run = scenarios[f"scenario_{a.scenario.replace('-', '_')}"]
    try:
        result = await run(a)
    except MCPError as e:
        result = {"mcpError": error_of(e)}
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    anyio.run(run_scenario, parse(), globals())
