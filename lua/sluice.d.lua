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

--- Calls any flow by name (a dash stays a dash: "http-post").
---@param name string
---@param input table
---@return table?, sluice.Error?
function sluice.call(name, input) end

--- Milliseconds since the Unix epoch.
---@return integer
function sluice.now() end

--- Waits `ms` milliseconds without blocking other work.
---@param ms integer
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
