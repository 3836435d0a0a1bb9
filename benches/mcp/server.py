"""The MCP bench's peer: a minimal server written with the Python `mcp`
package's own server API (MCPServer), whose one tool reads a file, as
sluice's `read` does. Over stdio."""

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("py-read", version="1.0.0", log_level="WARNING")


@server.tool(description="Returns the UTF-8 text of the file at `path`.")
def read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise ToolError(str(e)) from e


if __name__ == "__main__":
    server.run()
