-- Tests of policies/default.lua: sluice policy test policies/
local ws = policy.workspace

function test_reads_and_writes_inside_the_workspace()
  policy.allows("fs:read:" .. ws)
  policy.allows("fs:read:" .. ws .. "/src/main.rs")
  policy.allows("fs:write:" .. ws .. "/src/main.rs", {flow = "edit"})
end

function test_git_internals_and_the_audit_record_are_denied()
  policy.denies("fs:write:" .. ws .. "/.git/hooks/pre-commit")
  policy.denies("fs:read:" .. ws .. "/.git/config")
  policy.denies("fs:write:" .. ws .. "/.sluice/audit.db")
end

function test_env_files_are_denied_anywhere()
  policy.denies("fs:read:" .. ws .. "/.env")
  policy.denies("fs:read:" .. ws .. "/deploy/.env")
end

function test_outside_the_workspace_asks()
  local d = policy.asks("fs:read:/etc/passwd")
  assert(d.reason:find("outside the workspace"), d.reason)
  policy.asks("fs:write:/tmp/x")
end

function test_commands_run_and_public_gets_are_allowed()
  policy.allows("proc:spawn:cargo test")
  policy.allows("net:get:crates.io")
end

function test_posts_and_private_destinations_ask()
  policy.asks("net:post:api.example.com")
  policy.asks("net:private:http://127.0.0.1:8080")
end
