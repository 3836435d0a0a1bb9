---@meta
-- LuaLS annotations for the `sluice` module that workflow scripts see.
-- Point your editor's Lua language server at this folder ("workspace.library")
-- for completion and type checks. Field names match the flows' JSON exactly.
-- Generated from the flows' schemas by `sluice flows --lua`; change the
-- schemas (src/flows/), not this file.

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
---@field path string File to read, relative to the workspace or absolute.
---@field limit? integer Lines in the page. Default 2000.
---@field offset? integer First line of the page, 1-based. Default 1.

---@class sluice.ReadOutput
---@field content string The page's lines, raw: no line-number gutter, every \r kept, joined by \n, without the final \n.
---@field startLine integer The first line of the page, 1-based.
---@field endLine integer The last line of the page (startLine - 1 when it is empty).
---@field totalLines integer Lines in the whole file.
---@field truncated boolean Whether the page leaves lines out or clips one; `notice` then says what.
---@field notice? string What the page shows out of what there is, and which lines were clipped; present when truncated.

---@class sluice.WriteInput
---@field path string File to write, relative to the workspace or absolute. Missing parent folders are created.
---@field content string The whole new contents, written byte for byte.

---@class sluice.WriteOutput
---@field bytesWritten integer Bytes the file now holds.
---@field created boolean Whether the file did not exist before.
---@field diagnostics? sluice.Diagnostics What the language server bound to the file's language says after the change; absent when the run declares no language server.

---@class sluice.Diagnostics
---@field status "clean"|"errors"|"unchecked"|"timeout" clean: no errors; errors: see `errors`; unchecked: no server looked (none is bound to this language, or it failed); timeout: the server did not answer in time, so nothing is known.
---@field errors sluice.DiagnosticError[] At most 20 error-severity diagnostics.
---@field reason? string Why nothing is known, with unchecked and timeout: no server serves the file, or what the server did (its standard error's tail when it died).

---@class sluice.DiagnosticError
---@field path string The file, relative to the workspace inside it.
---@field line integer 1-based line.
---@field character integer 1-based character on the line.
---@field message string What the server says.
---@field code? string The server's code for it.
---@field source? string Who found it (the server's checker).

---@class sluice.EditInput
---@field path string File to edit, relative to the workspace or absolute.
---@field newString string Replacement bytes, literal (keep \r to keep CRLF endings).
---@field endLine? integer Last line to replace, inclusive; its final \n stays. Needs startLine.
---@field expect? string What lines startLine..endLine must hold now, checked byte for byte. Only with a line range.
---@field oldString? string Exact bytes to replace; must occur once unless replaceAll. Not with startLine/endLine.
---@field replaceAll? boolean Replace every occurrence of oldString. Not with a line range.
---@field startLine? integer First line to replace, 1-based, inclusive. Needs endLine.

---@class sluice.EditOutput
---@field startLine integer The first line of `hunk`, 1-based.
---@field endLine integer The last line of `hunk` (startLine - 1 when it is empty).
---@field replacements integer Regions replaced (more than 1 only with replaceAll).
---@field hunk string The edited region as it now stands, raw, with two lines of context on each side.
---@field diagnostics? sluice.Diagnostics What the language server bound to the file's language says after the change; absent when the run declares no language server.

---@class sluice.ApplyPatchInput
---@field input string The patch: '*** Begin Patch', then '*** Add File: path' with '+' lines, '*** Delete File: path', or '*** Update File: path' (optionally '*** Move to: path') with '@@' chunks of ' ', '-', '+' lines, then '*** End Patch'.
---@field cwd? string Folder the patch's relative paths resolve against, relative to the workspace or absolute. Default: the workspace.

---@class sluice.ApplyPatchOutput
---@field added string[] Files the patch added, as written in it.
---@field modified string[] Files the patch updated (a moved file under its new name), as written in it.
---@field deleted string[] Files the patch deleted, as written in it.
---@field output string What Codex prints on success: "Success. Updated the following files:" and a line per file (A, M or D, then the path).
---@field diagnostics? sluice.Diagnostics What the language server bound to the file's language says after the change; absent when the run declares no language server.

---@class sluice.LsInput
---@field limit? integer Entries in the page, at most 1000. Default 1000.
---@field offset? integer First entry of the page, 1-based. Default 1.
---@field path? string Folder to list, relative to the workspace or absolute. Default: the workspace.

---@class sluice.LsOutput
---@field entries sluice.LsEntry[] The page's entries, sorted by name.
---@field total integer Entries in the whole folder.
---@field truncated boolean Whether entries lie outside the page; `notice` then says how to page on.
---@field notice? string Which entries the page shows out of how many; present when truncated.

---@class sluice.LsEntry
---@field name string The entry's name in the folder.
---@field kind "file"|"directory"|"symlink"|"other" What the entry is; a symlink is not followed.

---@class sluice.GlobInput
---@field pattern string Glob matched against paths relative to root: `*` stays in one folder, `**` crosses folders, e.g. `**/*.rs` or `src/*/mod.rs`.
---@field hidden? boolean Include names starting with `.` (`.git` and `.sluice` never). Default false.
---@field limit? integer Paths returned, at most 1000. Default 1000.
---@field noIgnore? boolean Disregard .gitignore, .ignore and .git/info/exclude. Default false.
---@field root? string Folder to search, relative to the workspace or absolute. Default: the workspace.
---@field timeoutMs? integer Milliseconds the walk may take (default 60000, at most 600000); past it the call fails with `timeout`, carrying the paths found so far.

---@class sluice.GlobOutput
---@field paths string[] The matching paths, relative to the workspace (absolute outside it), sorted.
---@field total integer Every path that matched, before `limit`.
---@field truncated boolean Whether paths were left out for `limit`.
---@field skippedDenied integer Paths the policy denies, left out and only counted here.
---@field skippedUnreadable integer Entries that could not be read (no permission, vanished mid-walk); the notice names the first few.
---@field skippedNames integer Names that are not UTF-8 or hold a control character, skipped with what is below them.
---@field notice? string What was cut or skipped, or why nothing matched; present when there is something to say.

---@class sluice.GrepInput
---@field pattern string Regular expression (Rust regex syntax, as rg), or a literal with fixedStrings; at most 16 KiB, and at most 10 MiB compiled.
---@field afterContext? integer Lines of context after each match (0-100). Default: context, or 0.
---@field beforeContext? integer Lines of context before each match (0-100). Default: context, or 0.
---@field context? integer Lines of context before and after each match (0-100). Default 0.
---@field filesWithMatches? boolean Return only the files with a match, not the lines. Default false.
---@field fixedStrings? boolean Treat pattern as a literal string. Default false.
---@field globs? string[] Only paths matching these globs, as rg -g: `*.rs` at any depth, `!*.md` excludes.
---@field hidden? boolean Search names starting with `.` (`.git` never). Default false.
---@field ignoreCase? boolean Match case-insensitively. Default false.
---@field limit? integer Matches returned overall (files, with filesWithMatches). Default 200.
---@field maxCount? integer Matching lines per file, at most.
---@field noIgnore? boolean Disregard .gitignore, .ignore and .git/info/exclude. Default false.
---@field root? string Folder (or one file) to search, relative to the workspace or absolute. Default: the workspace.
---@field smartCase? boolean Match case-insensitively when the pattern has no upper-case letter. Default false.
---@field timeoutMs? integer Milliseconds the search may take (default 60000, at most 600000); past it the call fails with `timeout`, carrying the matches found so far.

---@class sluice.GrepOutput
---@field files string[] The files with a match, sorted (at most limit with filesWithMatches, else 1000).
---@field totalFiles integer Files with a match.
---@field filesSearched integer Text files searched (binary ones are counted in skippedBinary).
---@field skippedBinary integer Files skipped as binary (a NUL byte in what was read).
---@field skippedDenied integer Paths the policy denies, left out and only counted here.
---@field skippedUnreadable integer Entries that could not be read (no permission, vanished mid-walk); the notice names the first few.
---@field skippedNames integer Names that are not UTF-8 or hold a control character, skipped with what is below them.
---@field truncated boolean Whether matches or files were left out for `limit`.
---@field matches? sluice.GrepMatch[] The matching lines, sorted by file, then line; absent with filesWithMatches.
---@field notice? string What was cut, clipped or skipped; present when there is something to say.
---@field totalMatches? integer Matching lines found (each file's capped by maxCount); absent with filesWithMatches.

---@class sluice.GrepMatch
---@field file string The file, relative to the workspace (absolute outside it).
---@field line integer The matching line's number, 1-based.
---@field text string The line without its terminator, at most 500 characters.
---@field after? string[] The lines after the match, when afterContext (or context) was asked for.
---@field before? string[] The lines before the match, when beforeContext (or context) was asked for.
---@field clipped? boolean Present (true) when `text` was clipped at 500 characters.

---@class sluice.BashInput
---@field args? string[] Arguments for `script`, passed as arguments, never interpolated.
---@field background? boolean Start the command as a job and return its handle at once (no timeout).
---@field command? string A command line, run by the platform shell (/bin/sh -c) exactly as written. For bash syntax give `script` (default interpreter bash). Give this or `script`.
---@field container? string A container to run in (the policy's `route` may refuse or rewrite it); provider_unavailable when the run has no route there (no --container-engine, not declared). Relative cwd is under the container's workdir.
---@field cwd? string Working folder, relative to the workspace or absolute (default: the workspace).
---@field env? table<string, any> Extra environment entries, applied after the allowlist (PATH, HOME, USER, LANG, LC_*, TERM, TMPDIR, SHELL): text, or sluice.credential(NAME) (needs cred:use:NAME@command; not with background).
---@field interpreter? string Program that runs `script` (default bash): bash, zsh, sh and dash get -s, python and python3 get -, others nothing.
---@field justification? string Why the wider sandbox mode is needed; shown when asking.
---@field mode? "unhermetic"|"hermetic" hermetic checks the command's literal paths against `reads` and `writes` before it runs.
---@field reads? string[] Hermetic mode: path globs the command may read.
---@field sandboxPermissions? "workspace-write"|"danger-full-access" Run this once with a strictly wider sandbox mode than the policy gives; asks first, showing `justification`. Give both or neither.
---@field script? string Program text delivered to `interpreter` on stdin; nothing quotes or escapes it.
---@field stdin? string Text written to the command's stdin (with `command` only). Without it stdin is closed.
---@field timeoutMs? integer Milliseconds before the command is stopped (default 600000, also the cap).
---@field writes? string[] Hermetic mode: path globs the command may write.

---@class sluice.BashOutput
---@field exitCode integer The exit status; a non-zero exit is a value, not an error (128+N after signal N).
---@field stdout string At most 30,000 bytes: the first and last 15,000 with "[N bytes omitted]" between.
---@field stderr string Bounded like stdout.
---@field stdoutTruncated boolean Whether stdout is a fragment: never write it to a file as if it were the output.
---@field stderrTruncated boolean Whether stderr is a fragment.
---@field stdoutDroppedBytes integer Bytes of stdout left out.
---@field stderrDroppedBytes integer Bytes of stderr left out.
---@field invalidProbe? sluice.InvalidProbe Present when the command never reached any code, so its exit code is no verdict on it.
---@field sandbox? sluice.PlaceFacts How the command was confined, or the container it ran in; absent when the policy confines nothing.
---@field signal? string The signal that ended the command, e.g. "SIGKILL".
---@field stderrSpillPath? string A file with the complete stderr, like stdoutSpillPath.
---@field stdoutSpillPath? string A file with the complete stdout (up to 64 MiB) when it was truncated, kept while the run lasts or with --keep-spill.

---@class sluice.InvalidProbe
---@field reason "unknown-command"|"unknown-path" unknown-command: no such program or interpreter; unknown-path: no such working folder.
---@field evidence string What the host observed.
---@field message string What the result does and does not prove.

---@class sluice.PlaceFacts
---@field mode "read-only"|"workspace-write"|"danger-full-access"|"container" What the command could change; container: it ran in a container, which its mounts bound.
---@field denied boolean Whether the sandbox refused it a file operation (a nonzero exit, the runner's words on stderr).
---@field enforcement "full"|"partial" partial: the runner could not express part of the policy (a deny by wildcard, a decide hook), or the command ran in a container.
---@field container? string The container the command ran in (mode container).
---@field engine? "podman"|"docker" The engine that reached it (mode container).
---@field hidden? string[] Mode container: the container's paths masked (the audit store, what the policy hides from commands).
---@field limits? sluice.Limits The policies' resource limits for the command (the strictest value of each), how each was enforced, and what it hit; absent when no policy sets limits.
---@field network? "open"|"closed" Whether the command could open network sockets (closed: a connection fails; it opens only with net:get:*, net:post:* and net:private:* allowed). Absent in mode container, where the container decides.
---@field partial? string[] What the sandbox could not express, when enforcement is partial.
---@field protected? boolean Mode container: whether the run started the container, with repositories read-only and the audit store and what the policy hides masked over its mounts (false: a container it only reached, which has none of these).
---@field readOnly? string[] Mode container: the container's paths its mounts keep read-only (repositories, the policies' files).
---@field reverted? string[] Repositories and git control files the command made, removed when it ended.
---@field runnerFailed? boolean Present (true) when the runner broke before the command ran (background jobs only; in the foreground that is a provider_unavailable error).

---@class sluice.Limits
---@field enforcement sluice.LimitsEnforcement What enforced each limit set.
---@field cpuSeconds? integer seconds of CPU time for each process
---@field fileSizeMb? integer MiB for any one file a process writes
---@field hit? sluice.LimitHit[] The limits the command hit: it was stopped or refused by them, not crashed.
---@field memoryMb? integer MiB of memory for the whole command
---@field notice? string Which limit the command hit and where to raise it; present when it hit one.
---@field partial? string[] What a mechanism could not express of its limit.
---@field pids? integer processes and threads of the command at once

---@class sluice.LimitsEnforcement
---@field cpuSeconds? "cgroup-v2"|"cgroup-v1"|"rlimit"|"none" What enforced this limit: a cgroup (v2, v1), a per-process rlimit, or nothing.
---@field fileSizeMb? "cgroup-v2"|"cgroup-v1"|"rlimit"|"none" What enforced this limit: a cgroup (v2, v1), a per-process rlimit, or nothing.
---@field memoryMb? "cgroup-v2"|"cgroup-v1"|"rlimit"|"none" What enforced this limit: a cgroup (v2, v1), a per-process rlimit, or nothing.
---@field pids? "cgroup-v2"|"cgroup-v1"|"rlimit"|"none" What enforced this limit: a cgroup (v2, v1), a per-process rlimit, or nothing.

---@class sluice.LimitHit
---@field limit "memoryMb"|"pids"|"cpuSeconds"|"fileSizeMb" Which limit.
---@field how string What happened, and what says so (a cgroup's count, a signal, the system's words).

---@class sluice.ShellCommandInput
---@field command string The shell command to execute.
---@field timeout_ms? integer The timeout for the command in milliseconds (default 10000).
---@field workdir? string The working directory to execute the command in (default: the workspace).

---@class sluice.ShellCommandOutput
---@field output string Codex's text: "Exit code: N\nWall time: S seconds\n", maybe "Total output lines: N\n", "Output:\n", then the output.
---@field exitCode integer The command's exit status; 124 after a timeout.
---@field sandbox? sluice.PlaceFacts How the command was confined, or the container it ran in; absent when the policy confines nothing.

---@class sluice.FetchInput
---@field url string Absolute http or https URL, without user:password@.
---@field headers? table<string, any> Request headers: text, or sluice.credential(NAME) (needs cred:use:NAME@ORIGIN). authorization, cookie and credentials are dropped when a redirect leaves the URL's origin.
---@field timeout? number Seconds for the whole request and body (default 30, at most 120).

---@class sluice.FetchOutput
---@field status integer The HTTP status; an error status (404, 500) is a value, not an error.
---@field body string The response body as text, decoded by its charset, its first 60,000 bytes.
---@field truncated boolean Whether `body` was cut at 60,000 bytes.
---@field notice? string The bytes kept of how many; present when truncated.

---@class sluice.HttpPostInput
---@field url string Absolute http or https URL, without user:password@.
---@field body? string Sent verbatim.
---@field contentType? string The content-type header (default application/json).
---@field headers? table<string, any> Request headers: text, or sluice.credential(NAME) (needs cred:use:NAME@ORIGIN). authorization, cookie and credentials are dropped when a redirect leaves the URL's origin.
---@field timeout? number Seconds for the whole request and body (default 30, at most 120).

---@class sluice.HttpPostOutput
---@field status integer The HTTP status; an error status (404, 500) is a value, not an error.
---@field body string The response body as text, decoded by its charset, its first 60,000 bytes.
---@field truncated boolean Whether `body` was cut at 60,000 bytes.
---@field notice? string The bytes kept of how many; present when truncated.

---@class sluice.WebfetchInput
---@field url string Absolute http or https URL, without user:password@.
---@field format? "markdown"|"text"|"html" How an HTML page comes back (default markdown); other text passes through.
---@field headers? table<string, any> Request headers: text, or sluice.credential(NAME) (needs cred:use:NAME@ORIGIN). authorization, cookie and credentials are dropped when a redirect leaves the URL's origin.
---@field timeout? number Seconds for the whole request and body (default 30, at most 120).

---@class sluice.WebfetchOutput
---@field url string Where the last redirect ended.
---@field status integer The HTTP status; an error status is a value, not an error.
---@field contentType string The media type, lower-cased, without parameters (text/plain when the server named none).
---@field content string The body, its first 60,000 bytes: an HTML page rendered in `format`, other text as it came.
---@field truncated boolean Whether `content` was cut at 60,000 bytes.
---@field notice? string The bytes kept of how many; present when truncated.

---@class sluice.WebsearchInput
---@field query string What to search for.
---@field freshness? "day"|"week"|"month"|"year" Only results published within the last day, week, month or year.
---@field numResults? integer How many results to return, 1 through 20 (default 8).

---@class sluice.WebsearchOutput
---@field results sluice.SearchResult[] The results, best first, at most numResults.

---@class sluice.SearchResult
---@field title string The page's title.
---@field url string The page's URL.
---@field snippet string What the provider quotes of the page, trimmed, at most 2,000 characters.
---@field publishedAt? string When the page was published, as the provider wrote it; absent when unknown.

---@class sluice.ModelInput
---@field provider string A provider the operator declared (the policy's `providers`, or --provider).
---@field model string The provider's name for the model.
---@field messages sluice.Message[] The conversation, oldest first.
---@field jsonSchema? table Structured output: the reply's text is JSON of this schema.
---@field maxTokens? integer The most tokens the reply may have.
---@field stop? string[] Sequences that end the reply.
---@field stream? boolean Stream the reply (default: true when onText is given). onText, a function, is called with each piece of text.
---@field system? string The system prompt.
---@field temperature? number Sampling temperature.
---@field timeoutMs? integer Milliseconds for the whole call, retries included (default 120000, at most 600000).
---@field toolChoice? string "auto" (default), "none", "required", or a tool's name.
---@field tools? sluice.Tool[] Tools the model may call (sluice.tools{...} builds them from flows).

---@class sluice.Message
---@field role "user"|"assistant"|"tool" Who wrote it; a tool result is `tool`.
---@field content? string|sluice.Part[] Text, or a list of parts ({type = "text", text = ...}, {type = "image", url = ...}).
---@field isError? boolean A tool result: whether the tool failed or was refused.
---@field toolCallId? string A tool result: the id of the call it answers.
---@field toolCalls? sluice.ToolCall[] An assistant message's tool calls, as the reply gave them.

---@class sluice.Part
---@field type "text"|"image" A text part or an image part.
---@field text? string The text of a text part.
---@field url? string An image part's URL: https://..., or data:MEDIA;base64,...

---@class sluice.ToolCall
---@field id string The call's id; a tool result answers it as `toolCallId`.
---@field name string The tool to run.
---@field input table The tool's input, decoded from the model's JSON.

---@class sluice.Tool
---@field name string 1 to 64 letters, digits, `_` or `-`.
---@field input table JSON Schema of the tool's input (an object).
---@field description? string What the tool does, for the model.

---@class sluice.ModelOutput
---@field text string The model's text (empty when it only called tools).
---@field toolCalls sluice.ToolCall[] The tools the model asks to run, in its order.
---@field stopReason "end_turn"|"tool_use"|"max_tokens"|"stop_sequence"|"content_filter"|"other" Why it stopped: `end_turn`, a final answer (OpenAI's `stop`); `tool_use`, it asks for the toolCalls (run them and call again with their results); `max_tokens`, it reached maxTokens and the text is cut (raise maxTokens or ask for less); `stop_sequence`, a stop sequence ended it; `content_filter`, the provider's filter or the model refused (Anthropic's `refusal`, OpenAI's `content_filter`); `other`, any other reason the provider gave (Anthropic's `pause_turn`, for one) or none.
---@field usage sluice.ModelUsage Tokens the call used.
---@field model string The model that answered, as the provider names it.
---@field latencyMs integer Milliseconds from the request to the whole reply, retries included.
---@field firstTokenMs integer Milliseconds until the first text arrived (streamed), or the reply (not streamed).

---@class sluice.ModelUsage
---@field inputTokens integer Tokens of input, cached ones included.
---@field outputTokens integer Tokens the model wrote.
---@field cachedTokens integer Input tokens served from the provider's prompt cache.

---@class sluice.TestInput
---@field against? "workspace"|"base" workspace (the default) runs the selection here; base also runs it in a checkout of the runner's baseRef first and reports introduced, preexisting and fixed failures.
---@field selection? string[] Tests to run: names or paths as the runner takes them (tests/test_a.py::test_x, a cargo test filter, a file), passed to the runner's command as arguments, never as shell text. Empty: the whole suite.
---@field timeoutMs? integer Milliseconds before each run is stopped (default: the runner's timeoutMs, else 600000).

---@class sluice.TestOutput
---@field exitCode integer The runner's exit status (128+N after signal N).
---@field passed integer Tests that passed, as the report counts them.
---@field failed sluice.TestFailure[] Tests that failed (and errors the runner counts with them).
---@field skipped integer Tests skipped or ignored.
---@field parsed boolean Whether one known runner's report was recognised (two runners' signatures, or none, is false: counts are then 0).
---@field command string The command that ran: the runner's command with the selection quoted after it.
---@field tail string The last 30,000 bytes of the output (stdout and stderr as they were interleaved).
---@field tailTruncated boolean Whether output came before the tail.
---@field tailDroppedBytes integer Bytes of output before the tail.
---@field base? sluice.TestBase against = "base": the same selection's run in a checkout of baseRef.
---@field fixed? string[] Failing in the base, not here.
---@field introduced? string[] Failing here, not in the base (only when both reports parsed).
---@field invalidProbe? sluice.TestInvalidProbe Present when the failure belongs to the command, not the code: the runner never reached the code under test.
---@field judgeNote? string Why a judge's answer did not count (an error, a confidence under 0.7, evidence not in the output).
---@field judgedBy? "rules"|"lua"|"model" Who decided, for a failing run: the built-in rules, the host's Lua judge, or its model.
---@field preexisting? string[] Failing here and in the base.
---@field runner? "pytest"|"unittest"|"libtest"|"nextest"|"go"|"tap"|"node"|"jest"|"vitest" The runner whose report was parsed.
---@field sandbox? sluice.PlaceFacts How the command was confined, or the container it ran in; absent when the policy confines nothing.
---@field spillPath? string A file with the complete output (up to 64 MiB) when it was longer than the tail, kept while the run lasts or with --keep-spill.

---@class sluice.TestFailure
---@field name string The test's name as the runner writes it (pass it back in `selection`).
---@field message string The first lines of its failure message (at most 10).
---@field file? string The file the report places the failure in.
---@field line? integer The line the report places the failure at.

---@class sluice.TestBase
---@field exitCode integer The runner's exit status (128+N after signal N).
---@field passed integer Tests that passed, as the report counts them.
---@field failed sluice.TestFailure[] Tests that failed (and errors the runner counts with them).
---@field skipped integer Tests skipped or ignored.
---@field parsed boolean Whether one known runner's report was recognised (two runners' signatures, or none, is false: counts are then 0).
---@field invalidProbe? sluice.TestInvalidProbe Present when the failure belongs to the command, not the code: the runner never reached the code under test.
---@field judgeNote? string Why a judge's answer did not count (an error, a confidence under 0.7, evidence not in the output).
---@field judgedBy? "rules"|"lua"|"model" Who decided, for a failing run: the built-in rules, the host's Lua judge, or its model.
---@field runner? "pytest"|"unittest"|"libtest"|"nextest"|"go"|"tap"|"node"|"jest"|"vitest" The runner whose report was parsed.

---@class sluice.TestInvalidProbe
---@field reason "unknown-command"|"unknown-test"|"unknown-path"|"unknown-module"|"unknown-environment" Which name resolved to nothing: a program, a test, a path, a module, an environment.
---@field evidence string The output's lines (or the host's observation) it rests on.
---@field message string What the result does and does not prove.

---@class sluice.LspInput
---@field operation "hover"|"definition"|"references"|"implementation"|"documentSymbols"|"workspaceSymbols"|"prepareCallHierarchy"|"callHierarchyIncoming"|"callHierarchyOutgoing"|"diagnostics" What to ask the server.
---@field character? integer 1-based character on that line, counted in characters as read and grep count them.
---@field line? integer 1-based line of the symbol (hover, definition, references, implementation, call hierarchy).
---@field path? string The file asked about, relative to the workspace or absolute (required except for workspaceSymbols; there it picks the server).
---@field query? string workspaceSymbols only: the name, or part of it, to look for.
---@field timeoutMs? integer How long to wait for the server, in milliseconds (default: the server's timeoutMs, 30000).

---@class sluice.LspOutput
---@field result any The server's answer as the protocol shapes it (null when it has none), with every position 1-based and every file URI a path (relative inside the workspace).
---@field server string The name of the server that answered, as declared.

---@class sluice.UpdatePlanInput
---@field plan sluice.PlanStep[] The whole plan, in order; at most one step in_progress.
---@field explanation? string Why the plan is what it is now (optional).

---@class sluice.PlanStep
---@field step string What the step does, one short sentence.
---@field status "pending"|"in_progress"|"completed" pending, in_progress or completed.

---@class sluice.UpdatePlanOutput
---@field output string Always "Plan updated".

---@class sluice.ExploreInput
---@field prompt string The question about the workspace, e.g. "Where is the retry delay computed?"

---@class sluice.ExploreOutput
---@field findings sluice.ExploreFinding[] The findings, each with at least one citation the sub-agent was shown.
---@field dropped sluice.ExploreDropped[] Citations of lines the sub-agent was never shown, and findings left without any.
---@field turns integer Model calls made.
---@field stopReason "final"|"max_turns"|"budget" final: the sub-agent answered; max_turns or budget: it was made to answer when its turns or output tokens ran out.
---@field model string PROVIDER/MODEL the sub-agent ran on.
---@field usage sluice.ExploreUsage Tokens all its turns used.
---@field notice? string Why the answer gave no findings, when it could not be read.

---@class sluice.ExploreFinding
---@field claim string What the sub-agent found.
---@field evidence sluice.ExploreEvidence[] The cited lines the sub-agent was shown (others are in `dropped`).

---@class sluice.ExploreEvidence
---@field path string The file, relative to the workspace (absolute outside it).
---@field line integer The line, 1-based.
---@field text string The line as the sub-agent was shown it.

---@class sluice.ExploreDropped
---@field claim string The claim whose citation (or which) was left out.
---@field reason string Why it was left out.
---@field citation? string The citation left out, as path:line; absent when the whole finding was.

---@class sluice.ExploreUsage
---@field inputTokens integer Tokens of input over all turns, cached ones included.
---@field outputTokens integer Tokens the sub-agent wrote over all turns.
---@field cachedTokens integer Input tokens served from the provider's prompt cache.

---@class sluice.JobRead
---@field stdout string output since the previous read
---@field stderr string
---@field lossy boolean unread output was lost; the spill files hold all of it
---@field stdoutSpillPath? string
---@field stderrSpillPath? string

---@class sluice.Job
---@field jobId integer the job's number in the run
---@field pid integer the job's process id
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

---@class sluice
---@field args string[] the script's arguments
---@field workspace string the canonical workspace folder
---@field run_id string
---@field test_runner {command: string, cwd?: string, container?: string, baseRef?: string}? the runner `sluice.test` uses, or nil when the host declared none
sluice = {}

--- Reads one page of a UTF-8 text file, raw and without a line-number gutter, with its line range as fields.
---@param input sluice.ReadInput
---@return sluice.ReadOutput?, sluice.Error?
function sluice.read(input) end

--- Writes a whole file atomically, creating it and its parent folders if needed and keeping an existing file's mode.
---@param input sluice.WriteInput
---@return sluice.WriteOutput?, sluice.Error?
function sluice.write(input) end

--- Edits one region of a text file, anchored by its exact bytes or by a line range, and returns the edited hunk.
---@param input sluice.EditInput
---@return sluice.EditOutput?, sluice.Error?
function sluice.edit(input) end

--- Applies a Codex-format patch that adds, deletes, updates and moves files, all or nothing, and returns Codex's summary.
---@param input sluice.ApplyPatchInput
---@return sluice.ApplyPatchOutput?, sluice.Error?
function sluice.apply_patch(input) end

--- Lists one page of a folder's entries, sorted by name, each with its kind (file, directory, symlink, other).
---@param input sluice.LsInput
---@return sluice.LsOutput?, sluice.Error?
function sluice.ls(input) end

--- Finds the paths under a folder that match a glob, sorted, honoring .gitignore and .ignore, skipping what the policy denies.
---@param input sluice.GlobInput
---@return sluice.GlobOutput?, sluice.Error?
function sluice.glob(input) end

--- Searches files under a folder for lines matching a regular expression, as ripgrep does, with context lines, honoring .gitignore.
---@param input sluice.GrepInput
---@return sluice.GrepOutput?, sluice.Error?
function sluice.grep(input) end

--- Runs a command line or an interpreter script and returns its exit code and bounded stdout and stderr; can start it as a background job.
---@param input sluice.BashInput
---@return (sluice.BashOutput|sluice.Job)?, sluice.Error?
function sluice.bash(input) end

--- Runs a shell command the way Codex CLI's shell_command tool does and returns Codex's text: exit code, wall time and the output.
---@param input sluice.ShellCommandInput
---@return sluice.ShellCommandOutput?, sluice.Error?
function sluice.shell_command(input) end

--- Gets a URL and returns its status and body as text (the first 60,000 bytes); an error status is a value.
---@param input sluice.FetchInput
---@return sluice.FetchOutput?, sluice.Error?
function sluice.fetch(input) end

--- Posts a body verbatim to a URL and returns the response status and body as text; an error status is a value.
---@param input sluice.HttpPostInput
---@return sluice.HttpPostOutput?, sluice.Error?
function sluice.http_post(input) end

--- Fetches a web page and returns it as Markdown, plain text or HTML, following up to 10 redirects.
---@param input sluice.WebfetchInput
---@return sluice.WebfetchOutput?, sluice.Error?
function sluice.webfetch(input) end

--- Searches the web through the host's search provider and returns titles, URLs, snippets and publication dates.
---@param input sluice.WebsearchInput
---@return sluice.WebsearchOutput?, sluice.Error?
function sluice.websearch(input) end

--- Sends a conversation to a language model and returns its text, its tool calls, why it stopped, the tokens used and the time taken.
---@param input sluice.ModelInput
---@return sluice.ModelOutput?, sluice.Error?
function sluice.model(input) end

--- Runs the project's tests with the host's runner, parses the report (pytest, cargo, go, jest, ...), says when a failure belongs to the command, not the code, and compares with a base.
---@param input sluice.TestInput
---@return sluice.TestOutput?, sluice.Error?
function sluice.test(input) end

--- Asks the language server bound to a file's language: hover, definition, references, symbols, call hierarchy, diagnostics.
---@param input sluice.LspInput
---@return sluice.LspOutput?, sluice.Error?
function sluice.lsp(input) end

--- Records the agent's plan: each step pending, in_progress or completed, at most one in progress; the latest plan shows in the audit and to MCP clients.
---@param input sluice.UpdatePlanInput
---@return sluice.UpdatePlanOutput?, sluice.Error?
function sluice.update_plan(input) end

--- Explores the workspace with a read-only sub-agent (read, ls, glob, grep) on the operator's model and returns findings, each citing the path:line it was shown.
---@param input sluice.ExploreInput
---@return sluice.ExploreOutput?, sluice.Error?
function sluice.explore(input) end

--- Calls any flow by name ("http-post" or "http_post").
---@param name string
---@param input table
---@return table?, sluice.Error?
function sluice.call(name, input) end

--- Tool definitions for sluice.model's `tools` (and sluice.agent's): each
--- flow named becomes `{name, description, input}` from its schema; a tool
--- table `{name, description, input, run}` (a Lua tool) is kept as it is.
--- A name that is no flow raises, listing the flows.
---@param list (string|sluice.Tool)[]
---@return sluice.Tool[]
function sluice.tools(list) end

--- Named credential `name` as an opaque value for a `headers` or `env` entry
--- (fetch, http_post, webfetch, bash): its secret never reaches the script or
--- the record. Sending it needs cred:use:NAME@ORIGIN (cred:use:NAME@command
--- for env). It cannot be joined to text: give `prefix` ("Bearer ").
---@param name string
---@param opts? {prefix?: string}
---@return userdata
function sluice.credential(name, opts) end

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

---@class sluice.Task
---@field id string The task's id ("0.2": the second task or coroutine the main chunk made), as the record keys its calls.
---@field settled boolean Whether it has ended.
local Task = {}

--- Waits until the task ends and returns what its function returned, or
--- raises its error here (a string error as "task ID failed: ...").
---@return any ...
function Task:await() end

--- Runs `fn(...)` as a task beside the caller: its flow calls run at once
--- with other tasks', ordered only where their effects overlap (see
--- README, "Tasks"). A task nobody awaits that fails fails the run; one
--- still running when the script ends is cancelled.
---@param fn function
---@param ... any
---@return sluice.Task
function sluice.spawn(fn, ...) end

--- Waits for every task and returns the first value each returned, in the
--- list's order; raises the failure of the first that failed.
---@param tasks sluice.Task[]
---@return any[]
function sluice.all(tasks) end

--- Runs `fn(item, index)` over `list`, each call a task, at most `limit`
--- at once (default: all), and returns their first values in the list's
--- order; raises the first failure and starts no more.
---@param list any[]
---@param fn fun(item: any, index: integer): any
---@param opts? {limit?: integer}
---@return any[]
function sluice.map(list, fn, opts) end

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
