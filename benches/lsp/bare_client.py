"""A bare LSP client, the yardstick benches/lsp.rs holds sluice against:
it starts the server (unconfined, as an editor would), initializes it with
the workspace, opens a file, and then, for each command read on stdin
(one JSON object a line), does one thing and prints how long it took:

  {"op": "definition", "path": P, "line": L, "character": C}
      -> {"ms": ..., "result": ...} (0-based positions, as sent)
  {"op": "change", "path": P, "text": T, "expect": S}
      -> sends didChange (and didSave) and waits for the diagnostics of P
         whose messages contain S (or none when S is empty):
         {"ms": ..., "diagnostics": [...]}

Usage: bare_client.py WORKSPACE LANGUAGE_ID SERVER ARGS...
"""

import json
import os
import subprocess
import sys
import time

ws = os.path.realpath(sys.argv[1])
server = subprocess.Popen(sys.argv[3:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ws)
IN, OUT = server.stdout, server.stdin
next_id = [0]
versions = {}
published = {}


def uri(path):
    return "file://" + os.path.join(ws, path)


def send(message):
    body = json.dumps(message).encode()
    OUT.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    OUT.flush()


def read():
    length = 0
    while True:
        line = IN.readline().strip()
        if not line:
            break
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            length = int(value)
    return json.loads(IN.read(length))


def take(message):
    """Handles what is not a reply; returns a reply's id."""
    method = message.get("method")
    if method and "id" in message:
        result = [None] * len(message.get("params", {}).get("items", [])) if method == "workspace/configuration" else None
        send({"jsonrpc": "2.0", "id": message["id"], "result": result})
    elif method == "textDocument/publishDiagnostics":
        published[message["params"]["uri"]] = message["params"]["diagnostics"]
    return None if method else message.get("id")


def request(method, params):
    next_id[0] += 1
    send({"jsonrpc": "2.0", "id": next_id[0], "method": method, "params": params})
    while True:
        message = read()
        if take(message) == next_id[0]:
            return message.get("result")


caps = request("initialize", {"processId": os.getpid(), "rootUri": uri(""), "workspaceFolders": [{"uri": uri(""), "name": "ws"}],
                              "capabilities": {"textDocument": {"publishDiagnostics": {"versionSupport": True}, "definition": {"linkSupport": True}},
                                               "workspace": {"configuration": True}}})["capabilities"]
send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
pulls = bool(caps.get("diagnosticProvider"))


def sync(path):
    if path in versions:
        return
    versions[path] = 1
    with open(os.path.join(ws, path)) as f:
        text = f.read()
    send({"jsonrpc": "2.0", "method": "textDocument/didOpen",
          "params": {"textDocument": {"uri": uri(path), "languageId": sys.argv[2], "version": 1, "text": text}}})


for line in sys.stdin:
    cmd = json.loads(line)
    sync(cmd["path"])
    start = time.perf_counter()
    if cmd["op"] == "definition":
        result = request("textDocument/definition", {"textDocument": {"uri": uri(cmd["path"])},
                                                    "position": {"line": cmd["line"], "character": cmd["character"]}})
        print(json.dumps({"ms": (time.perf_counter() - start) * 1000, "result": result}), flush=True)
        continue
    versions[cmd["path"]] += 1
    u = uri(cmd["path"])
    published.pop(u, None)
    send({"jsonrpc": "2.0", "method": "textDocument/didChange",
          "params": {"textDocument": {"uri": u, "version": versions[cmd["path"]]}, "contentChanges": [{"text": cmd["text"]}]}})
    send({"jsonrpc": "2.0", "method": "textDocument/didSave", "params": {"textDocument": {"uri": u}, "text": cmd["text"]}})
    matches = lambda ds: all(cmd["expect"] in d["message"] for d in ds) and (bool(ds) == bool(cmd["expect"]))
    while True:
        if pulls:
            ds = request("textDocument/diagnostic", {"textDocument": {"uri": u}})["items"]
        else:
            while u not in published:
                take(read())
            ds = published.pop(u)
        ds = [d for d in ds if d.get("severity", 1) == 1]
        if matches(ds):
            break
    print(json.dumps({"ms": (time.perf_counter() - start) * 1000, "diagnostics": ds}), flush=True)
