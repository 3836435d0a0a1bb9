-- Tests of policies/readonly.lua: sluice policy test policies/
local ws = policy.workspace

function test_reads_inside_the_workspace()
  policy.allows("fs:read:" .. ws .. "/README.md", {flow = "read"})
  policy.allows("fs:read:" .. ws, {flow = "ls"})
end

function test_everything_else_is_denied_not_asked()
  policy.denies("fs:write:" .. ws .. "/README.md")
  policy.denies("proc:spawn:ls")
  policy.denies("net:get:example.org")
  policy.denies("net:private:http://127.0.0.1:80")
  policy.denies("model:call:any")
  policy.denies("fs:read:/etc/passwd")
end
