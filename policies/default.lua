-- The default policy: what `sluice run` uses when no --policy is given.
--
-- Reads and writes inside the workspace; its .git folder is read-only (its
-- hooks and config run code later) and its .sluice folder (the audit
-- record) out of reach; .env files nowhere. Commands may run, and see only
-- what this policy lets them read: the workspace, the system trees and the
-- toolchains programs need (p.programs), never the credential stores
-- denied below. GET requests to public hosts. Everything else, POSTs,
-- private addresses and anything outside the workspace, asks the person at
-- the terminal first. Each command is bounded (`limits`) so a runaway one
-- cannot take the machine: far above what a build or a test suite uses.
local p = require("sluice.policy")

local secret = "credentials stay out of agents' reach"

return {
  rules = {
    p.deny("fs:write:${workspace}/.git", "the repository's internals (hooks, config) run code later"),
    p.deny("fs:write:${workspace}/.git/**", "the repository's internals (hooks, config) run code later"),
    p.deny("fs:write:${workspace}/**/.git/**", "a nested repository's internals run code later too"),
    p.deny("fs:*:${workspace}/.sluice", "the audit record is not the workflow's to touch"),
    p.deny("fs:*:${workspace}/.sluice/**", "the audit record is not the workflow's to touch"),
    p.deny("fs:*:**/.env", "secrets stay out of agents' reach"),

    -- Credential stores, by name: hidden from commands, refused to flows.
    p.deny("fs:*:~/.ssh", secret), p.deny("fs:*:~/.ssh/**", secret),
    p.deny("fs:*:~/.gnupg", secret), p.deny("fs:*:~/.gnupg/**", secret),
    p.deny("fs:*:~/.aws", secret), p.deny("fs:*:~/.aws/**", secret),
    p.deny("fs:*:~/.azure", secret), p.deny("fs:*:~/.azure/**", secret),
    p.deny("fs:*:~/.config/gcloud", secret), p.deny("fs:*:~/.config/gcloud/**", secret),
    p.deny("fs:*:~/.kube", secret), p.deny("fs:*:~/.kube/**", secret),
    p.deny("fs:*:~/.docker/config.json", secret),
    p.deny("fs:*:~/.netrc", secret),
    p.deny("fs:*:~/.git-credentials", secret),
    p.deny("fs:*:~/.config/gh", secret), p.deny("fs:*:~/.config/gh/**", secret),
    p.deny("fs:*:~/.npmrc", secret),
    p.deny("fs:*:~/.pypirc", secret),
    p.deny("fs:*:~/.cargo/credentials", secret), p.deny("fs:*:~/.cargo/credentials.toml", secret),
    p.deny("fs:*:~/.config/sluice", secret), p.deny("fs:*:~/.config/sluice/**", secret),
    p.deny("fs:*:~/.local/share/keyrings", secret), p.deny("fs:*:~/.local/share/keyrings/**", secret),
    p.deny("fs:*:~/.password-store", secret), p.deny("fs:*:~/.password-store/**", secret),
    p.deny("fs:*:~/.mozilla", secret), p.deny("fs:*:~/.mozilla/**", secret),
    p.deny("fs:*:~/.config/google-chrome", secret), p.deny("fs:*:~/.config/google-chrome/**", secret),
    p.deny("fs:*:~/.config/chromium", secret), p.deny("fs:*:~/.config/chromium/**", secret),
    p.deny("fs:*:~/.config/BraveSoftware", secret), p.deny("fs:*:~/.config/BraveSoftware/**", secret),
    p.deny("fs:*:~/.config/microsoft-edge", secret), p.deny("fs:*:~/.config/microsoft-edge/**", secret),
    p.deny("fs:*:/etc/shadow", secret), p.deny("fs:*:/etc/gshadow", secret),
    p.deny("fs:*:/etc/shadow-", secret), p.deny("fs:*:/etc/gshadow-", secret),
    p.deny("fs:*:/etc/sudoers", secret), p.deny("fs:*:/etc/sudoers.d", secret),
    p.deny("fs:*:/etc/sudoers.d/**", secret),
    p.deny("fs:*:/etc/ssh/ssh_host_*_key", secret),

    p.programs,
    p.allow "fs:read:${workspace}",
    p.allow "fs:read:${workspace}/**",
    p.allow "fs:write:${workspace}",
    p.allow "fs:write:${workspace}/**",
    p.allow "proc:spawn:*",
    p.allow "net:get:*",

    p.ask "net:post:*",
    p.ask("fs:*", "it is outside the workspace, so a person decides"),
  },
  limits = {
    memoryMb = 8192,    -- the whole command, every process together
    pids = 2048,        -- its processes and threads at once
    cpuSeconds = 7200,  -- each process's CPU time (a long-lived job's too)
    fileSizeMb = 4096,  -- any one file a process writes
  },
}
