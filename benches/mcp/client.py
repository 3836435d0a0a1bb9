"""The MCP bench's client: the official Python `mcp` package (2.x) calling
`read` N times over stdio on one server, after a warm-up. Prints JSON: the
loop's seconds and the server process's CPU seconds (user + system) spent
during it, read from /proc.

    python3 client.py N FORM FILE -- SERVER_COMMAND...
"""

import json
import os
import sys
import time

import anyio
import mcp.client.session as client_session
import mcp_types as types
from mcp import Client, StdioServerParameters


def cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_pid() -> int:
    """The server this process spawned (its only child)."""
    me = str(os.getpid())
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[1] == me:
                    return int(d)
            except OSError:
                pass
    raise SystemExit("no server child found")


async def main():
    n, form, path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    cmd = sys.argv[sys.argv.index("--") + 1:]
    server = StdioServerParameters(command=cmd[0], args=cmd[1:], env=dict(os.environ))
    mode = "2026-07-28" if form == "2026" else "legacy"
    info = types.Implementation(name="sluice-bench", version="1")
    async with Client(server, mode=mode, client_info=info, cache=None) as c:
        for _ in range(20):
            r = await c.call_tool("read", {"path": path})
            assert not r.is_error, r
        pid = server_pid()
        cpu0, t0 = cpu_seconds(pid), time.perf_counter()
        for _ in range(n):
            await c.call_tool("read", {"path": path})
        seconds = time.perf_counter() - t0
        cpu = cpu_seconds(pid) - cpu0
    print(json.dumps({"seconds": seconds, "serverCpu": cpu}))


anyio.run(main)
