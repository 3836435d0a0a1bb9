--- Helpers for policy files. A rule is a plain table; the kernel reads
--- `effect`, `pattern`, the optional `reason` and, on a deny, the optional
--- `except` list.
---
--- local p = require("sluice.policy")
--- return {
---   rules = {
---     p.allow "fs:read:${workspace}/**",
---     p.deny("fs:*:**/.env", "secrets stay out of agents' reach"),
---     p.deny("fs:write:${workspace}/src/**", "sources are reviewed",
---            {except = {"fs:write:${workspace}/src/generated/**"}}),
---     p.ask "net:post:*",
---   },
---   decide = function(req) ... end,   -- optional: "allow" | "deny" | "ask" | nil | {decision=, reason=}
---   route = function(req) ... end,    -- optional: nil (host) or a container name, for process flows
---   otherwise = "ask",                -- optional: what nothing matching means ("ask" or "deny")
--- }
---
--- An `except` takes what it names out of that deny alone: it allows
--- nothing by itself (the capability goes on to the other denies, the
--- hooks, allow, ask and `otherwise`).
local M = {}

-- The second value `require` hands sluice's own modules: where the code
-- that calls into this module is written, as `FILE:LINE`.
local _, caller_line = ...

local function rule(effect)
  return function(pattern, reason, options)
    if type(pattern) ~= "string" then
      error(("%s takes a capability pattern string, e.g. %s \"fs:read:${workspace}/**\""):format(effect, effect), 2)
    end
    if reason ~= nil and type(reason) ~= "string" then
      error(("%s(%q, reason): the reason must be a string"):format(effect, pattern), 2)
    end
    local except
    if options ~= nil then
      if type(options) ~= "table" then
        error(("%s(%q, reason, options): options is a table such as {except = {...}}"):format(effect, pattern), 2)
      end
      for key in pairs(options) do
        if key ~= "except" then
          error(("%s(%q, reason, options): unknown option %s; the one option is except = {patterns}"):format(
            effect, pattern, tostring(key)), 2)
        end
      end
      except = options.except
    end
    return { effect = effect, pattern = pattern, reason = reason, except = except,
             source = caller_line and caller_line() }
  end
end

---@type fun(pattern: string, reason?: string): table
M.allow = rule("allow")
--- A deny; `options.except` lists patterns (of the deny's own actions) that
--- this deny leaves out.
---@type fun(pattern: string, reason?: string, options?: {except?: string[]}): table
M.deny = rule("deny")
---@type fun(pattern: string, reason?: string): table
M.ask = rule("ask")

--- What programs need to run, for reading: the system trees and the
--- toolchains people install under their home folder. A confined command
--- sees only what the policy lets it read, so a policy that runs commands
--- names these, as one item of its rules: `rules = { p.programs, ... }`.
--- Folders that do not exist on a machine open nothing.
local trees = {
  "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
  -- Where /etc/resolv.conf points on systemd machines.
  "/run/systemd/resolve",
  "~/.cargo/bin", "~/.rustup", "~/.local/bin", "~/.local/lib", "~/.pyenv",
  "~/.nvm", "~/.volta", "~/.bun/bin", "~/.deno/bin", "~/go/bin",
}
M.programs = {}
for _, tree in ipairs(trees) do
  table.insert(M.programs, M.allow("fs:read:" .. tree, "programs need it to run"))
  table.insert(M.programs, M.allow("fs:read:" .. tree .. "/**", "programs need it to run"))
end

return M
