-- The request loop of a run that serves callers outside the script
-- (sluice mcp). Each request runs as a task nothing awaits, so its calls are
-- numbered, scheduled and recorded as any task's, and requests run side by
-- side. A built-in flow or a job operation is run by Rust whole; a Lua tool
-- runs here, in the request's task, so its own flow calls are the request's.
local next_request, detach, tools = ...

local function caught(e) return e end

local function serve(req)
  local tool = tools[req:lua_tool() or false]
  if not tool then return req:run() end
  local fits, input = req:bind()
  if not fits then return end   -- refused: the input does not fit the tool's schema
  req:finish(xpcall(tool, caught, input))
end

while true do
  local req = next_request()
  if req == nil then return end
  detach(serve, req)
end
