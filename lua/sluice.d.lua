---@meta
-- LuaLS annotations for the `sluice` module that workflow scripts see.
-- Point your editor's Lua language server at this folder ("workspace.library")
-- for completion and type checks. Field names match the flows' JSON exactly.

---@class sluice.Error
---@field code "invalid_input"|"not_found"|"not_a_file"|"not_a_directory"|"is_directory"|"binary_file"|"offset_out_of_range"|"invalid_pattern"|"no_match"|"permission_denied"|"permission_required"|"outside_declared_reads"|"outside_declared_writes"|"outside_container"|"command_failed"|"request_failed"|"timeout"|"rate_limited"|"provider_unavailable"|"unsupported"|"unsupported_content_type"|"response_too_large"|"replay_diverged"
---@field message string what went wrong and what to do next
---@field field? string the input field at fault (invalid_input)
---@field path? string
---@field nearest? string|sluice.Region the nearest existing folder (not_found) or region (edit's no_match)
---@field actual? sluice.Region what a line range really holds (edit's expect)
---@field lines? integer[] every line a repeated anchor starts on
---@field capability? string the capability refused (permission_denied)
---@field busy? boolean another writer holds the file's lock: retry later
---@field stale? boolean a dead process left the lock: a person must remove `lock`
---@field lock? string the lock folder
---@field limit? integer the limit a pattern ran past (invalid_pattern: 16384 bytes of grep pattern, 10 MiB compiled)
---@field timeoutMs? integer the deadline a grep or glob ran out of (timeout); the error then also carries what it found so far, in its output's fields (`matches`, `files`, `totalMatches`, ... or `paths`, `total`, ...)
---@field interrupted? string the signal that stopped a grep or glob ("SIGTERM"), when the run was interrupted

---@class sluice.Region
---@field startLine integer
---@field endLine integer
---@field content string

---@class sluice.ReadInput
---@field path string file, relative to the workspace or absolute
---@field offset? integer first line, 1-based (default 1)
---@field limit? integer lines in the page (default 2000)

---@class sluice.ReadOutput
---@field content string raw page text: no gutter, every \r kept, no final \n
---@field startLine integer
---@field endLine integer
---@field totalLines integer
---@field truncated boolean
---@field notice? string what was shown out of what there was

---@class sluice.WriteInput
---@field path string
---@field content string

---@class sluice.WriteOutput
---@field bytesWritten integer
---@field created boolean

---@class sluice.EditInput
---@field path string
---@field oldString? string exact bytes, occurring once (or replaceAll)
---@field newString string
---@field replaceAll? boolean
---@field startLine? integer inclusive, with endLine
---@field endLine? integer inclusive; its final \n stays
---@field expect? string what the range must hold now

---@class sluice.EditOutput
---@field startLine integer first line of hunk
---@field endLine integer last line of hunk
---@field replacements integer
---@field hunk string the edited region with two lines of context

---@class sluice.LsInput
---@field path? string default: the workspace
---@field offset? integer 1-based
---@field limit? integer at most 1000

---@class sluice.LsEntry
---@field name string
---@field kind "file"|"directory"|"symlink"|"other"

---@class sluice.LsOutput
---@field entries sluice.LsEntry[]
---@field total integer
---@field truncated boolean
---@field notice? string

---@class sluice.BashInput
---@field command? string a line for /bin/sh -c, run exactly as written (or give script)
---@field script? string program text fed to interpreter on stdin, never quoted or escaped
---@field interpreter? string default "bash" (-s); python/python3 get -, others nothing
---@field args? string[] arguments for script, passed as arguments
---@field stdin? string text for the command's stdin (command form); otherwise stdin is closed
---@field cwd? string relative to the workspace (default: the workspace)
---@field env? table<string, string> extra variables after the allowlist (PATH, HOME, USER, LANG, LC_*, TERM, TMPDIR, SHELL)
---@field timeoutMs? integer default and cap 600000 (ten minutes)
---@field mode? "unhermetic"|"hermetic" hermetic checks literal paths against reads/writes first
---@field reads? string[] hermetic: path globs the command may read
---@field writes? string[] hermetic: path globs the command may write
---@field background? boolean start as a job and return a sluice.Job at once
---@field sandboxPermissions? "workspace-write"|"danger-full-access" a strictly wider sandbox mode for this call only; always asks, showing justification
---@field justification? string why the wider mode is needed (with sandboxPermissions)

---@class sluice.InvalidProbe
---@field reason "unknown-command"|"unknown-path"|"unknown-test"|"unknown-module"|"unknown-environment"
---@field evidence string what the host observed
---@field message string what the result does and does not prove

---@class sluice.BashOutput
---@field exitCode integer a non-zero exit is a value, not an error (128+N after signal N)
---@field stdout string at most 30,000 bytes: first and last 15,000 with "[N bytes omitted]" between
---@field stderr string bounded like stdout
---@field stdoutTruncated boolean a fragment: never write it to a file as if it were the output
---@field stderrTruncated boolean
---@field stdoutDroppedBytes integer
---@field stderrDroppedBytes integer
---@field signal? string the signal that ended the command, e.g. "SIGKILL"
---@field stdoutSpillPath? string the complete stream (up to 64 MiB), while the run lasts or with --keep-spill
---@field stderrSpillPath? string
---@field invalidProbe? sluice.InvalidProbe the command never reached any code
---@field sandbox? sluice.SandboxFacts how the command was confined; absent when the policy confines nothing

---@class sluice.SandboxFacts
---@field mode "read-only"|"workspace-write"|"danger-full-access" what the command could change
---@field denied boolean the sandbox refused it a file operation (nonzero exit, the runner's words on stderr)
---@field enforcement "full"|"partial" partial: a policy rule the runner cannot express (a deny by wildcard, a decide hook)
---@field runnerFailed? boolean background jobs only (in the foreground it is a provider_unavailable error)

---@class sluice.JobRead
---@field stdout string output since the previous read
---@field stderr string
---@field lossy boolean unread output was lost; the spill files hold all of it
---@field stdoutSpillPath? string
---@field stderrSpillPath? string

---@class sluice.Job
---@field jobId integer
---@field pid integer
---@field status "running"|"exited"|"killed" live
---@field exitCode? integer live; nil while running or after a signal
---@field signal? string live
---@field sandbox? sluice.SandboxFacts once settled, when it ran confined; runnerFailed = true when the runner broke before the command ran
local Job = {}
--- Output produced since the previous read; never repeats a byte.
---@return sluice.JobRead
function Job:read() end
--- Waits until the job ends, at most `ms` (nil: no limit). True when it has ended.
---@param ms? integer
---@return boolean
function Job:wait(ms) end
--- TERM to the job's process group, KILL after 3 s. False if it had already ended.
---@return boolean
function Job:kill() end

---@class sluice.ShellCommandInput
---@field command string
---@field workdir? string
---@field timeout_ms? integer default 10000

---@class sluice.ShellCommandOutput
---@field output string "Exit code: N\nWall time: S seconds\nOutput:\n..." as Codex renders it
---@field exitCode integer 124 after a timeout

---@class sluice.ApplyPatchInput
---@field input string Codex's V4A patch: *** Begin Patch ... *** End Patch
---@field cwd? string where the patch's relative paths resolve (default: the workspace)

---@class sluice.ApplyPatchOutput
---@field added string[]
---@field modified string[]
---@field deleted string[]
---@field output string what Codex prints: "Success. Updated the following files:\nA path\n..."

---@class sluice.GlobInput
---@field pattern string e.g. "**/*.rs"
---@field root? string default: the workspace
---@field hidden? boolean include dot-files
---@field noIgnore? boolean ignore .gitignore and .ignore
---@field limit? integer default and cap 1000
---@field timeoutMs? integer deadline of the walk (default 60000, at most 600000); past it: nil, err with code "timeout" and the paths found so far

---@class sluice.GlobOutput
---@field paths string[] sorted
---@field total integer
---@field truncated boolean
---@field notice? string

---@class sluice.GrepInput
---@field pattern string a regex (or a literal with fixedStrings); at most 16 KiB, and 10 MiB compiled, else invalid_pattern
---@field root? string a folder or one file (default: the workspace)
---@field fixedStrings? boolean
---@field ignoreCase? boolean
---@field smartCase? boolean
---@field globs? string[] as rg -g
---@field beforeContext? integer
---@field afterContext? integer
---@field context? integer
---@field maxCount? integer matches per file
---@field filesWithMatches? boolean only `files`
---@field hidden? boolean
---@field noIgnore? boolean
---@field limit? integer matches in all (default 200)
---@field timeoutMs? integer deadline of the search (default 60000, at most 600000); past it: nil, err with code "timeout" and the matches found so far

---@class sluice.GrepMatch
---@field file string
---@field line integer 1-based
---@field text string at most 500 characters
---@field before? string[]
---@field after? string[]

---@class sluice.GrepOutput
---@field matches? sluice.GrepMatch[]
---@field files string[]
---@field totalMatches? integer matching lines found (absent with filesWithMatches)
---@field totalFiles integer files with a match
---@field filesSearched integer
---@field skippedBinary integer
---@field truncated boolean
---@field notice? string

---@class sluice.FetchInput
---@field url string absolute http or https, no user:password@
---@field headers? table<string, string> authorization and cookie are dropped when a redirect leaves the origin
---@field timeout? number seconds for the whole request and body (default 30, at most 120)

---@class sluice.FetchOutput
---@field status integer an error status is a value
---@field body string the body as text, its first 60,000 bytes
---@field truncated boolean
---@field notice? string kept and total bytes, when cut

---@class sluice.HttpPostInput: sluice.FetchInput
---@field body? string sent verbatim
---@field contentType? string default "application/json"

---@class sluice.WebfetchInput: sluice.FetchInput
---@field format? "markdown"|"text"|"html" how an HTML page comes back (default markdown)

---@class sluice.WebfetchOutput
---@field url string where the redirects ended
---@field status integer
---@field contentType string
---@field content string
---@field truncated boolean
---@field notice? string

---@class sluice.WebsearchInput
---@field query string
---@field numResults? integer 1-20, default 8
---@field freshness? "day"|"week"|"month"|"year"

---@class sluice.SearchResult
---@field title string
---@field url string
---@field snippet string at most 2,000 characters
---@field publishedAt? string

---@class sluice
---@field args string[] the script's arguments
---@field workspace string the canonical workspace folder
---@field run_id string
sluice = {}

---@param input sluice.ReadInput
---@return sluice.ReadOutput?, sluice.Error?
function sluice.read(input) end

---@param input sluice.WriteInput
---@return sluice.WriteOutput?, sluice.Error?
function sluice.write(input) end

---@param input sluice.EditInput
---@return sluice.EditOutput?, sluice.Error?
function sluice.edit(input) end

---@param input sluice.LsInput
---@return sluice.LsOutput?, sluice.Error?
function sluice.ls(input) end

--- Runs a command line or a script; with background = true returns a sluice.Job.
---@param input sluice.BashInput
---@return (sluice.BashOutput|sluice.Job)?, sluice.Error?
function sluice.bash(input) end

--- Codex CLI's shell_command: Codex's fields in, Codex's text out.
---@param input sluice.ShellCommandInput
---@return sluice.ShellCommandOutput?, sluice.Error?
function sluice.shell_command(input) end

--- Applies a Codex V4A patch; all of it or, on failure, none of it.
---@param input sluice.ApplyPatchInput
---@return sluice.ApplyPatchOutput?, sluice.Error?
function sluice.apply_patch(input) end

--- Lists paths matching a glob, sorted, honouring ignore files.
---@param input sluice.GlobInput
---@return sluice.GlobOutput?, sluice.Error?
function sluice.glob(input) end

--- Searches file contents with ripgrep's engine.
---@param input sluice.GrepInput
---@return sluice.GrepOutput?, sluice.Error?
function sluice.grep(input) end

--- GETs a URL; every hop and private address is checked.
---@param input sluice.FetchInput
---@return sluice.FetchOutput?, sluice.Error?
function sluice.fetch(input) end

--- POSTs a body verbatim (irreversible); redirects are not followed.
---@param input sluice.HttpPostInput
---@return sluice.FetchOutput?, sluice.Error?
function sluice.http_post(input) end

--- Fetches a page rendered as Markdown, text or HTML.
---@param input sluice.WebfetchInput
---@return sluice.WebfetchOutput?, sluice.Error?
function sluice.webfetch(input) end

--- Searches the web through the provider the run binds (--search).
---@param input sluice.WebsearchInput
---@return {results: sluice.SearchResult[]}?, sluice.Error?
function sluice.websearch(input) end

--- Calls any flow by name (a dash stays a dash: "http-post").
---@param name string
---@param input table
---@return table?, sluice.Error?
function sluice.call(name, input) end

--- Milliseconds since the Unix epoch. Recorded with the run (as are
--- `os.time()`, `os.date()`, `os.clock()` and `math.random`'s seed), so a
--- replay sees the same value.
---@return integer
function sluice.now() end

--- Waits `ms` milliseconds without blocking other work; true when done. `ms`
--- is from 0 to 600000 (ten minutes): a negative, NaN, infinite or larger
--- one is nil, err (invalid_input). A stop signal ends the wait at once.
---@param ms number
---@return true?, sluice.Error?
function sluice.sleep(ms) end

sluice.json = {}
--- Stands for JSON null inside decoded values.
sluice.json.null = nil

---@param value any
---@param opts? {pretty?: boolean}
---@return string
function sluice.json.encode(value, opts) end

---@param text string
---@return any?, sluice.Error?
function sluice.json.decode(text) end

return sluice
