-- A read-only seat: the workspace may be read, nothing else happens.
-- Writes, commands, the network and model calls are denied outright, and
-- reads outside the workspace are denied too rather than asked. No
-- `limits`: no command ever runs here.
local p = require("sluice.policy")

return {
  rules = {
    p.deny("fs:write", "this seat is read-only"),
    p.deny("proc:spawn", "this seat is read-only"),
    p.deny("net:*", "this seat is read-only"),
    p.deny("model:call", "this seat is read-only"),

    p.allow "fs:read:${workspace}",
    p.allow "fs:read:${workspace}/**",
  },
  otherwise = "deny",
}
