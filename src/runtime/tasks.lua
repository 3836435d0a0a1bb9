-- Tasks: sluice.spawn, task:await, sluice.all, sluice.map.
--
-- A task is a coroutine (so it gets a task id from where it was made, as
-- coroutine.create gives one) that Rust drives as its own future beside the
-- main chunk: its flow calls run while other tasks' do. The task's body runs
-- under xpcall, so its outcome is kept here, on the task table, and raised at
-- the line that awaits it. Tasks nobody awaited are looked at when the script
-- ends: a failure is reported, and one still running is cancelled.
local raw_spawn, raw_wait, task_id, driving = ...
local pack, unpack = table.pack, table.unpack

local Task = {}
Task.__index = Task
Task.__name = "sluice.task"

-- Tasks not yet awaited (failures to report) or not yet settled (to cancel).
local open = {}
local settled_count = 0
-- task id -> the id of the task it awaits, to refuse a wait that never ends.
local awaiting = {}

local function is_task(t)
  return getmetatable(t) == Task
end

function Task.__tostring(t)
  local state = not t.settled and "running" or (t.result[1] and "done" or "failed")
  return ("task %s (%s)"):format(t.id, state)
end

-- Failures so far, so a wait over many tasks looks for the first failure
-- only when there is a new one.
local failed_count = 0

-- Settles task `t` with `r` (pack(xpcall(...))); `t.on_settled`, when set,
-- hears of it (sluice.map counts its running tasks so).
local function settle(t, r)
  settled_count = settled_count + 1
  t.order = settled_count
  t.result = r
  t.settled = true
  if not r[1] then failed_count = failed_count + 1 end
  if t.on_settled then t.on_settled(t) end
end

-- A task running fn(...), with `on_settled` called when it settles.
local function start(on_settled, fn, ...)
  local t
  local co = coroutine.create(function(...)
    settle(t, pack(xpcall(fn, function(e) return e end, ...)))
  end)
  local id = task_id(co)
  if id:find("~", 1, true) then
    error("sluice.spawn: a task cannot start inside onText (sluice calls it once per piece of a stream, "
      .. "once in all from the record, so its tasks would differ in a replay); keep the pieces and start it after the call", 3)
  end
  t = setmetatable({ id = id, settled = false, awaited = false, on_settled = on_settled }, Task)
  open[t] = true
  raw_spawn(co, t, ...)
  return t
end

local function spawn(fn, ...)
  if type(fn) ~= "function" then
    error(("sluice.spawn(fn, ...): fn is the function the task runs, got %s"):format(type(fn)), 2)
  end
  return start(nil, fn, ...)
end

-- Raises a task's failure at the line `level` above the caller.
local function raise(t, level)
  local e = t.result[2]
  if type(e) == "string" then
    error(("task %s failed: %s"):format(t.id, e), level + 1)
  end
  error(e, level + 1)
end

-- The task that waits when the running code waits: the one driving it, so a
-- coroutine a task made (or resumed) and awaits in counts as that task.
local function check_cycle(t)
  local me = driving()
  if t.id == me then
    error(("task %s awaits itself, which would never end"):format(me), 3)
  end
  local seen, at = { me }, t.id
  while awaiting[at] do
    at = awaiting[at]
    seen[#seen + 1] = at
    if at == me then
      error(("task %s awaits task %s, which (through %s) awaits it: neither would ever end")
        :format(me, t.id, table.concat(seen, " -> ")), 3)
    end
  end
end

-- Waits, in the calling task, until `ready()` is true.
local function wait_until(target, ready)
  if ready() then return end
  local me = driving()
  awaiting[me] = target
  while not ready() do raw_wait() end
  awaiting[me] = nil
end

function Task:await()
  if not is_task(self) then
    error("task:await(): call it on a task sluice.spawn returned, as t:await()", 2)
  end
  check_cycle(self)
  self.awaited = true
  wait_until(self.id, function() return self.settled end)
  open[self] = nil
  if self.result[1] then return unpack(self.result, 2, self.result.n) end
  raise(self, 2)
end

local function check_tasks(list, label)
  if type(list) ~= "table" then
    error(("%s: expected a list of tasks, got %s"):format(label, type(list)), 3)
  end
  for i, t in ipairs(list) do
    if not is_task(t) then
      error(("%s: item %d is a %s, not a task sluice.spawn returned"):format(label, i, type(t)), 3)
    end
  end
end

-- The task of `list` that failed first, if any has.
local function first_failure(list)
  local failed
  for _, t in ipairs(list) do
    if t.settled and not t.result[1] and (failed == nil or t.order < failed.order) then
      failed = t
    end
  end
  return failed
end

-- Every task's first result, in the list's order; the first failure raises.
-- Each wake looks on from the first task still running and for a failure
-- only when one is new, so waiting on n tasks costs O(n), not O(n^2).
local function gather(list, level)
  for _, t in ipairs(list) do
    t.awaited = true
    check_cycle(t)
  end
  local next_open, seen, failed = 1, -1, nil
  local function ready()
    if seen ~= failed_count then
      seen, failed = failed_count, first_failure(list)
    end
    while list[next_open] and list[next_open].settled do next_open = next_open + 1 end
    return failed ~= nil or list[next_open] == nil
  end
  wait_until(list[1] and list[1].id, ready)
  for _, t in ipairs(list) do
    if t.settled then open[t] = nil end
  end
  failed = first_failure(list)
  if failed then raise(failed, level + 1) end
  local out = {}
  for i, t in ipairs(list) do out[i] = t.result[2] end
  return out
end

local function all(list)
  check_tasks(list, "sluice.all")
  return gather(list, 2)
end

local function map(list, fn, opts)
  if type(list) ~= "table" then
    error(("sluice.map(list, fn, {limit = N}): list is a table, got %s"):format(type(list)), 2)
  end
  if type(fn) ~= "function" then
    error(("sluice.map(list, fn, {limit = N}): fn is called with each item and its index, got %s"):format(type(fn)), 2)
  end
  if opts ~= nil and type(opts) ~= "table" then
    error(("sluice.map: the options are a table {limit = N}, got %s"):format(type(opts)), 2)
  end
  for k in pairs(opts or {}) do
    if k ~= "limit" then
      error(("sluice.map: unknown option %q; the one option is limit (tasks at once)"):format(tostring(k)), 2)
    end
  end
  local limit = opts and opts.limit
  if limit ~= nil and (math.type(limit) ~= "integer" or limit < 1) then
    error(("sluice.map: limit is a whole number of tasks at once, 1 or more, got %s"):format(tostring(limit)), 2)
  end
  limit = limit or math.huge
  -- Counted as they settle: a scan of every task per item would make a
  -- long list quadratic.
  local tasks, running, failed = {}, 0, nil
  local function settled(t)
    running = running - 1
    if not t.result[1] and failed == nil then failed = t end
  end
  for i, item in ipairs(list) do
    if running >= limit then
      wait_until(nil, function() return running < limit or failed ~= nil end)
    end
    if failed then break end
    running = running + 1
    tasks[i] = start(settled, fn, item, i)
  end
  return gather(tasks, 2)
end

-- A task nothing will await (a served request, which answers its caller
-- itself): it leaves `open` when it settles, so a server that lives for
-- days keeps none of its finished requests. Its body catches its own
-- errors; what it could not catch is reported like an unawaited failure.
local function detach(fn, ...)
  return start(function(t)
    if t.result[1] then open[t] = nil end
  end, fn, ...)
end

-- For the run's end: the ids of the tasks still running (now marked
-- cancelled), and the failures nobody awaited.
local function unsettled()
  local ids = {}
  for t in pairs(open) do
    if not t.settled then
      t.cancelled = true
      ids[#ids + 1] = t.id
    end
  end
  table.sort(ids)
  return ids
end

local function unawaited_failures()
  local out = {}
  for t in pairs(open) do
    if t.settled and not t.result[1] and not t.cancelled then
      local e = t.result[2]
      local text = type(e) == "string" and e or tostring(e)
      if type(e) == "table" and e.code and e.message then text = e.code .. ": " .. e.message end
      out[#out + 1] = { id = t.id, order = t.order, error = text }
    end
  end
  table.sort(out, function(a, b) return a.order < b.order end)
  return out
end

local function reset()
  open, awaiting, settled_count, failed_count = {}, {}, 0, 0
end

-- What xpcall could not catch (memory) ended task `t` with `message`.
local function broke(t, message)
  settle(t, { false, message, n = 2 })
end

return {
  spawn = spawn,
  detach = detach,
  all = all,
  map = map,
  unsettled = unsettled,
  unawaited_failures = unawaited_failures,
  reset = reset,
  broke = broke,
}
