-- Tasks: sluice.spawn, task:await, sluice.all, sluice.map.
--
-- A task is a coroutine (so it gets a task id from where it was made, as
-- coroutine.create gives one) that Rust drives as its own future beside the
-- main chunk: its flow calls run while other tasks' do. The task's body runs
-- under xpcall, so its outcome is kept here, on the task table, and raised at
-- the line that awaits it. Tasks nobody awaited are looked at when the script
-- ends: a failure is reported, and one still running is cancelled.
local raw_spawn, raw_wait, task_id = ...
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

local function spawn(fn, ...)
  if type(fn) ~= "function" then
    error(("sluice.spawn(fn, ...): fn is the function the task runs, got %s"):format(type(fn)), 2)
  end
  local t
  local co = coroutine.create(function(...)
    local r = pack(xpcall(fn, function(e) return e end, ...))
    settled_count = settled_count + 1
    t.order = settled_count
    t.result = r
    t.settled = true
  end)
  t = setmetatable({ id = task_id(co), settled = false, awaited = false }, Task)
  open[t] = true
  raw_spawn(co, t, ...)
  return t
end

-- Raises a task's failure at the line `level` above the caller.
local function raise(t, level)
  local e = t.result[2]
  if type(e) == "string" then
    error(("task %s failed: %s"):format(t.id, e), level + 1)
  end
  error(e, level + 1)
end

local function check_cycle(t)
  local me = task_id()
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
  local me = task_id()
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
local function gather(list, level)
  local pending = function()
    for _, t in ipairs(list) do
      if not t.settled then return true end
    end
    return false
  end
  for _, t in ipairs(list) do
    t.awaited = true
    check_cycle(t)
  end
  wait_until(list[1] and list[1].id, function() return first_failure(list) or not pending() end)
  for _, t in ipairs(list) do
    if t.settled then open[t] = nil end
  end
  local failed = first_failure(list)
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
  local tasks = {}
  local function running()
    local n = 0
    for _, t in ipairs(tasks) do
      if not t.settled then n = n + 1 end
    end
    return n
  end
  for i, item in ipairs(list) do
    if running() >= limit then
      wait_until(nil, function() return running() < limit or first_failure(tasks) end)
    end
    if first_failure(tasks) then break end
    tasks[i] = spawn(fn, item, i)
  end
  return gather(tasks, 2)
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
  open, awaiting, settled_count = {}, {}, 0
end

return {
  spawn = spawn,
  all = all,
  map = map,
  unsettled = unsettled,
  unawaited_failures = unawaited_failures,
  reset = reset,
}
