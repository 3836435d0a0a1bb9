--- An agent loop, in Lua, on sluice.model and sluice.tools. Each turn asks
--- the model; each tool call it makes runs through the one door (policy,
--- sandbox and record apply), and its result, a refusal or an error goes
--- back to the model as a tool result. The loop ends on a final answer, on
--- `maxTurns`, or when the output tokens reach `maxOutputTokens`.
---
--- local agent = require("sluice.agent")
--- local result, err = agent.run{
---   provider = "local", model = "qwen3-coder",
---   system = "You fix bugs.", task = "Make the failing test pass.",
---   tools = sluice.tools{"read", "grep", "edit", "bash"},
--- }
--- print(result.text, result.stopReason, result.usage.outputTokens)
---
--- A Lua tool is a table `{name, description, input = SCHEMA, run = fn}`;
--- `run(input)` returns a string or a table (sent as JSON), or `nil, err`.
--- Every turn is a recorded call: `sluice replay` answers the whole run
--- without a model, and `sluice resume` re-asks no recorded turn.
local M = {}

--- The most bytes of one tool result sent back to the model.
M.RESULT_LIMIT = 30000

local function json(v)
  return sluice.json.encode(v)
end

--- Text that says what was cut, for a result over the limit.
local function clipped(text)
  if #text <= M.RESULT_LIMIT then return text end
  return text:sub(1, M.RESULT_LIMIT)
    .. ("\n[truncated by the agent loop: kept the first %d of %d bytes]"):format(M.RESULT_LIMIT, #text)
end

--- The notes a flow's output carries about what it cut.
local function truncation(out)
  if type(out) ~= "table" then return nil end
  local cut = {}
  for _, field in ipairs({ "truncated", "stdoutTruncated", "stderrTruncated" }) do
    if out[field] == true then cut[#cut + 1] = field end
  end
  if #cut == 0 then return nil end
  return ("[this output was truncated (%s); ask for a narrower range or a smaller result]")
    :format(table.concat(cut, ", "))
end

--- What a tool call's outcome tells the model: the output as JSON (with a
--- note when it was truncated), or the error's code and message.
local function result_of(out, err)
  if out == nil then
    local e = type(err) == "table" and err or { code = "error", message = tostring(err) }
    return clipped(("error %s: %s"):format(tostring(e.code), tostring(e.message))), true
  end
  local text = type(out) == "string" and out or json(out)
  local note = truncation(out)
  if note then text = text .. "\n" .. note end
  return clipped(text), false
end

--- Runs one tool call: a Lua tool's `run`, else the flow of that name.
local function run_tool(by_name, call)
  local tool = by_name[call.name]
  if tool == nil then
    local names = {}
    for name in pairs(by_name) do names[#names + 1] = name end
    table.sort(names)
    return result_of(nil, {
      code = "invalid_input",
      message = ("there is no tool named %q; the tools are %s"):format(call.name, table.concat(names, ", ")),
    })
  end
  -- The model writes the input: one that is no object (a string, a
  -- number, null) is its mistake, told to it like any other.
  if type(call.input) ~= "table" then
    local got = call.input == sluice.json.null and "null" or type(call.input)
    return result_of(nil, {
      code = "invalid_input",
      message = ("the input of a call to %s is an object of its fields, got %s"):format(call.name, got),
    })
  end
  if tool.run == nil then
    return result_of(sluice.call(tool.name, call.input))
  end
  local ok, out, err = pcall(tool.run, call.input)
  if not ok then
    return result_of(nil, { code = "tool_failed", message = tostring(out) })
  end
  return result_of(out, err)
end

--- Runs one turn's tool calls, each in its own task when there are several,
--- so they run at once where their effects do not overlap (the scheduler
--- orders the rest in the order the model gave them). `{content, failed}`
--- for each call, in that order.
local function run_tools(by_name, calls)
  if #calls == 1 then
    return { { run_tool(by_name, calls[1]) } }
  end
  return sluice.map(calls, function(call)
    return { run_tool(by_name, call) }
  end)
end

local function check(opts)
  if type(opts) ~= "table" then
    error("sluice.agent.run: expected a table {provider, model, task, tools, ...}", 3)
  end
  for _, field in ipairs({ "provider", "model", "task" }) do
    if type(opts[field]) ~= "string" then
      error(("sluice.agent.run: `%s` is a string, got %s"):format(field, type(opts[field])), 3)
    end
  end
  if opts.tools ~= nil and type(opts.tools) ~= "table" then
    error("sluice.agent.run: `tools` is a list from sluice.tools{...}", 3)
  end
  if opts.onStep ~= nil and type(opts.onStep) ~= "function" then
    error("sluice.agent.run: `onStep` is a function(step)", 3)
  end
end

local function add(total, usage)
  total.inputTokens = total.inputTokens + usage.inputTokens
  total.outputTokens = total.outputTokens + usage.outputTokens
  total.cachedTokens = total.cachedTokens + usage.cachedTokens
end

--- Runs the loop. Returns `{text, stopReason, turns, usage, transcript}`,
--- where `stopReason` says why the loop ended:
---   "final"           the model answered without calling a tool (its own
---                     stopReason was end_turn or stop_sequence); `text` is
---                     the answer.
---   "max_turns"       `maxTurns` model calls (default 20) were made and the
---                     last still called tools; `text` is "".
---   "budget"          the output tokens reached `maxOutputTokens` after a
---                     turn of tool calls; `text` is that turn's.
---   "max_tokens"      the last reply reached `maxTokens`: its text is cut.
---   "content_filter"  the provider's filter or the model refused.
---   "other"           the provider gave another reason (Anthropic's
---                     pause_turn, for one) or none.
---   "tool_use"        the provider said tool_use but sent no tool call.
--- A model call that fails returns `nil, err`, with the transcript so far
--- in `err.transcript`.
---@param opts {provider: string, model: string, task: string, system?: string, tools?: table[], maxTurns?: integer, maxOutputTokens?: integer, maxTokens?: integer, temperature?: number, onStep?: fun(step: table), onText?: fun(text: string)}
function M.run(opts)
  check(opts)
  local tools = opts.tools or {}
  local by_name = {}
  for _, t in ipairs(tools) do by_name[t.name] = t end
  local max_turns = opts.maxTurns or 20
  local messages = { { role = "user", content = opts.task } }
  local usage = { inputTokens = 0, outputTokens = 0, cachedTokens = 0 }
  local step = opts.onStep or function() end
  local turns = 0
  local function finish(text, why)
    return { text = text, stopReason = why, turns = turns, usage = usage, transcript = messages }
  end
  while true do
    if turns >= max_turns then return finish("", "max_turns") end
    turns = turns + 1
    local reply, err = sluice.model{
      provider = opts.provider, model = opts.model, system = opts.system,
      messages = messages, tools = tools, maxTokens = opts.maxTokens,
      temperature = opts.temperature, onText = opts.onText,
    }
    if reply == nil then
      err.transcript = messages
      return nil, err
    end
    add(usage, reply.usage)
    local said = { role = "assistant", content = reply.text }
    if #reply.toolCalls > 0 then said.toolCalls = reply.toolCalls end
    messages[#messages + 1] = said
    step{ turn = turns, kind = "model", reply = reply }
    if #reply.toolCalls == 0 then
      local why = reply.stopReason
      if why == "end_turn" or why == "stop_sequence" then why = "final" end
      return finish(reply.text, why)
    end
    for i, outcome in ipairs(run_tools(by_name, reply.toolCalls)) do
      local call, content, failed = reply.toolCalls[i], outcome[1], outcome[2]
      messages[#messages + 1] = { role = "tool", toolCallId = call.id, content = content, isError = failed or nil }
      step{ turn = turns, kind = "tool", name = call.name, input = call.input, result = content, isError = failed }
    end
    if opts.maxOutputTokens and usage.outputTokens >= opts.maxOutputTokens then
      return finish(reply.text, "budget")
    end
  end
end

return M
