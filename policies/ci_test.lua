-- Tests of policies/ci.lua: sluice policy test policies/
local ws = policy.workspace

function test_the_allow_list()
  policy.allows("fs:write:" .. ws .. "/target/out.txt")
  policy.allows("proc:spawn:cargo test --all")
  policy.allows("proc:spawn:git status")
  policy.allows("proc:spawn:git diff")
end

function test_nothing_asks()
  for _, cap in ipairs{"net:post:api.example.com", "proc:spawn:curl x", "fs:read:/var/lib/dpkg/status", "net:get:example.org"} do
    local d = policy.decide(cap)
    assert(d.decision == "deny", cap .. " should be denied, got " .. d.decision)
  end
end

function test_protected_paths_stay_denied()
  policy.denies("fs:write:" .. ws .. "/.git/config")
  policy.denies("fs:read:" .. ws .. "/.env")
end

function test_programs_trees_are_readable_so_commands_start()
  policy.allows("fs:read:/usr/bin/cargo")
  policy.allows("fs:read:" .. policy.home .. "/.rustup/toolchains")
end
