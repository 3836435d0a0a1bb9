-- Unattended runs (CI): an explicit allow-list and no asks. Whatever the
-- list does not name is denied, so a run never stalls waiting for a person.
-- Commands get the default policy's limits: a runaway test must not take
-- the runner (and the jobs beside it) down.
local p = require("sluice.policy")

return {
  rules = {
    p.deny("fs:write:${workspace}/.git", "the repository's internals (hooks, config) run code later"),
    p.deny("fs:write:${workspace}/.git/**", "the repository's internals (hooks, config) run code later"),
    p.deny("fs:*:${workspace}/.sluice", "the audit record is not the workflow's to touch"),
    p.deny("fs:*:${workspace}/.sluice/**", "the audit record is not the workflow's to touch"),
    p.deny("fs:*:**/.env", "secrets stay out of agents' reach"),
    p.deny("net:post:*", "CI runs do not send data out"),

    p.programs,
    p.allow "fs:read:${workspace}",
    p.allow "fs:read:${workspace}/**",
    p.allow "fs:write:${workspace}/**",
    p.allow "proc:spawn:cargo *",
    p.allow "proc:spawn:git status",
    p.allow "proc:spawn:git diff",
    p.allow "proc:spawn:git diff *",
    p.allow "proc:spawn:git log",
    p.allow "proc:spawn:git log *",
    p.allow "proc:spawn:make *",
  },
  limits = {memoryMb = 8192, pids = 2048, cpuSeconds = 7200, fileSizeMb = 4096},
  otherwise = "deny",
}
