-- Tests of policies/default.lua: sluice policy test policies/
local ws = policy.workspace
local home = policy.home

function test_reads_and_writes_inside_the_workspace()
  policy.allows("fs:read:" .. ws)
  policy.allows("fs:read:" .. ws .. "/src/main.rs")
  policy.allows("fs:write:" .. ws .. "/src/main.rs", {flow = "edit"})
end

function test_git_internals_are_read_only_and_the_audit_record_out_of_reach()
  policy.allows("fs:read:" .. ws .. "/.git/HEAD")
  policy.denies("fs:write:" .. ws .. "/.git/hooks/pre-commit")
  policy.denies("fs:write:" .. ws .. "/.git/config")
  policy.denies("fs:write:" .. ws .. "/vendor/lib/.git/config")
  policy.denies("fs:read:" .. ws .. "/.sluice/audit.db")
  policy.denies("fs:write:" .. ws .. "/.sluice/audit.db")
end

function test_env_files_are_denied_anywhere()
  policy.denies("fs:read:" .. ws .. "/.env")
  policy.denies("fs:read:" .. ws .. "/deploy/.env")
end

function test_programs_trees_are_readable()
  policy.allows("fs:read:/usr/bin/git")
  policy.allows("fs:read:/etc/passwd")
  policy.allows("fs:read:" .. home .. "/.cargo/bin/cargo")
  policy.allows("fs:read:" .. home .. "/.rustup/toolchains")
end

function test_credential_stores_are_denied_by_name()
  for _, path in ipairs({
    "/.ssh/id_ed25519", "/.gnupg/private-keys-v1.d/k", "/.aws/credentials", "/.azure/msal_token_cache.json",
    "/.config/gcloud/credentials.db", "/.kube/config", "/.docker/config.json", "/.netrc", "/.git-credentials",
    "/.config/gh/hosts.yml", "/.npmrc", "/.pypirc", "/.cargo/credentials.toml", "/.config/sluice/credentials",
    "/.local/share/keyrings/login.keyring", "/.mozilla/firefox/profiles.ini",
    "/.config/google-chrome/Default/Cookies", "/.config/chromium/Default/Login Data",
  }) do
    policy.denies("fs:read:" .. home .. path)
  end
  for _, path in ipairs({"/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/sudoers.d/90-cloud", "/etc/ssh/ssh_host_ed25519_key"}) do
    policy.denies("fs:read:" .. path)
  end
end

function test_outside_the_workspace_asks()
  local d = policy.asks("fs:read:/var/lib/dpkg/status")
  assert(d.reason:find("outside the workspace"), d.reason)
  policy.asks("fs:write:/tmp/x")
  policy.asks("fs:write:/usr/bin/git")
  policy.asks("fs:read:" .. home .. "/notes.txt")
end

function test_commands_run_and_public_gets_are_allowed()
  policy.allows("proc:spawn:cargo test")
  policy.allows("net:get:crates.io")
end

function test_posts_and_private_destinations_ask()
  policy.asks("net:post:api.example.com")
  policy.asks("net:private:http://127.0.0.1:8080")
end
