-- Coroutines that can wait on flows. A flow that has to wait (a sleep, later a
-- process or a request) pauses the Lua thread running it by yielding a
-- "pending" marker to the Rust poller. Inside a script's own coroutine that
-- yield would land in the script's coroutine.resume instead, so resume passes
-- the marker up, and when the poller comes back, resumes the coroutine again.
--
-- Each coroutine is also a task, with an id that says where it was made:
-- "0" is the main chunk, "0.2" the second coroutine the main chunk created,
-- "0.2.1" the first that one created. Audit records key calls by task and
-- sequence within it, so ids must not depend on how tasks interleave.
-- Nor on how often sluice calls a callback back (`onText`, once per piece
-- of a stream, once in all from the record): a coroutine made inside one
-- (`aside`) is not counted, and its id, with "~", never names a task.
local PENDING = ...
local raw_resume, raw_yield, raw_status, raw_create, raw_running =
  coroutine.resume, coroutine.yield, coroutine.status, coroutine.create, coroutine.running
local pack, unpack = table.pack, table.unpack
local ids = setmetatable({}, { __mode = "k" })
local made = setmetatable({}, { __mode = "k" })
-- The coroutine that last resumed each one through coroutine.resume.
local resumer = setmetatable({}, { __mode = "k" })

-- The id of coroutine `co`, or of the one running now.
local function task(co)
  return ids[co or (raw_running())] or "0"
end

-- Callbacks running now (`aside`).
local aside_depth = 0

function coroutine.create(f)
  local co = raw_create(f)
  if aside_depth > 0 then
    ids[co] = task() .. ".~"
    return co
  end
  local parent = raw_running()
  made[parent] = (made[parent] or 0) + 1
  ids[co] = task() .. "." .. made[parent]
  return co
end

local function forward(co, ok, first, ...)
  if ok and first == PENDING and raw_status(co) == "suspended" then
    raw_yield(PENDING)
    return forward(co, raw_resume(co))
  end
  return ok, first, ...
end

function coroutine.resume(co, ...)
  resumer[co] = raw_running()
  return forward(co, raw_resume(co, ...))
end

-- The id of the coroutine that is driving the one running now: following
-- the coroutines that resumed it while they wait on it (status "normal")
-- up to the one sluice resumes itself (a task, or the main chunk). A task
-- blocks only when that one waits, whichever coroutine inside it awaits.
local function driving()
  local co = raw_running()
  while resumer[co] and raw_status(resumer[co]) == "normal" do
    co = resumer[co]
  end
  return ids[co] or "0"
end

function coroutine.wrap(f)
  local co = coroutine.create(f)
  return function(...)
    local r = pack(coroutine.resume(co, ...))
    if not r[1] then error(r[2], 0) end
    return unpack(r, 2, r.n)
  end
end

-- Calls `f(...)` as a callback sluice makes (see above).
local function aside(f, ...)
  aside_depth = aside_depth + 1
  local r = pack(pcall(f, ...))
  aside_depth = aside_depth - 1
  if not r[1] then error(r[2], 0) end
  return unpack(r, 2, r.n)
end

return task, aside, driving
