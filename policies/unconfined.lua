-- Everything is granted, and commands run without a sandbox when nothing
-- needs protecting (no audit record, no repository, no policy file in
-- reach): `sluice run job.lua --policy unconfined --no-audit`. For trusted
-- automation on a throwaway machine only; with a record or a repository in
-- reach, commands still run confined so those stay read-only. No `limits`
-- either: a limit needs a sandbox (a command with every file writable could
-- leave its cgroups), and nothing here is to be sandboxed.
local p = require("sluice.policy")

return {
  rules = {
    p.allow "fs:read:**",
    p.allow "fs:write:/",
    p.allow "fs:write:/**",
    p.allow "proc:spawn:*",
    p.allow "net:get:*",
    p.allow "net:post:*",
    p.allow "net:private:*",
  },
}
