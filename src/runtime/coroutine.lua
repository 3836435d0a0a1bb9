-- Coroutines that can wait on flows. A flow that has to wait (a sleep, later a
-- process or a request) pauses the Lua thread running it by yielding a
-- "pending" marker to the Rust poller. Inside a script's own coroutine that
-- yield would land in the script's coroutine.resume instead, so resume passes
-- the marker up, and when the poller comes back, resumes the coroutine again.
local PENDING = ...
local raw_resume, raw_yield, raw_status, raw_create =
  coroutine.resume, coroutine.yield, coroutine.status, coroutine.create
local pack, unpack = table.pack, table.unpack

local function forward(co, ok, first, ...)
  if ok and first == PENDING and raw_status(co) == "suspended" then
    raw_yield(PENDING)
    return forward(co, raw_resume(co))
  end
  return ok, first, ...
end

function coroutine.resume(co, ...)
  return forward(co, raw_resume(co, ...))
end

function coroutine.wrap(f)
  local co = raw_create(f)
  return function(...)
    local r = pack(coroutine.resume(co, ...))
    if not r[1] then error(r[2], 0) end
    return unpack(r, 2, r.n)
  end
end
