-- The default policy: what `sluice run` uses when no --policy is given.
--
-- Reads and writes inside the workspace, except its .git and .sluice
-- folders (hooks and config that run code later; the audit record); .env
-- files nowhere. Commands may run (the sandbox confines them). GET requests
-- to public hosts. Everything else, POSTs, private addresses and anything
-- outside the workspace, asks the person at the terminal first.
local p = require("sluice.policy")

return {
  rules = {
    p.deny("fs:*:${workspace}/.git", "the repository's internals (hooks, config) run code later"),
    p.deny("fs:*:${workspace}/.git/**", "the repository's internals (hooks, config) run code later"),
    p.deny("fs:write:${workspace}/**/.git/**", "a nested repository's internals run code later too"),
    p.deny("fs:*:${workspace}/.sluice/**", "the audit record is not the workflow's to touch"),
    p.deny("fs:*:**/.env", "secrets stay out of agents' reach"),

    p.allow "fs:read:${workspace}",
    p.allow "fs:read:${workspace}/**",
    p.allow "fs:write:${workspace}",
    p.allow "fs:write:${workspace}/**",
    p.allow "proc:spawn:*",
    p.allow "net:get:*",

    p.ask "net:post:*",
    p.ask("fs:*", "it is outside the workspace, so a person decides"),
  },
}
