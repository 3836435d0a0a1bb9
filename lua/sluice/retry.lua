--- Retrying a flow call while another writer holds the file's lock.
--- A busy file is `no_match` with `err.busy = true`; anything else, and a
--- stale lock (`err.stale`), is returned at once, since waiting cannot fix it.
---
--- local retry = require("sluice.retry")
--- local out, err = retry.busy(function() return sluice.edit{...} end, {attempts = 50, delayMs = 20})
local M = {}

---@param fn fun(): any, table?
---@param opts? {attempts?: integer, delayMs?: integer}
---@return any out, table? err
function M.busy(fn, opts)
  opts = opts or {}
  local attempts = opts.attempts or 50
  local delay = opts.delayMs or 20
  local out, err
  for attempt = 1, attempts do
    out, err = fn()
    if out ~= nil or not (err and err.busy) then
      return out, err
    end
    if attempt < attempts then
      local slept, why = sluice.sleep(delay)
      -- A delay sleep refuses (over ten minutes, negative) is the caller's mistake.
      if not slept then error("sluice.retry: delayMs: " .. why.message, 2) end
    end
  end
  return out, err
end

return M
