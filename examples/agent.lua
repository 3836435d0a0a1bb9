-- agent.lua: a coding agent. It asks a model to make the workspace's
-- failing tests pass, giving it sluice's flows as tools; every read, edit
-- and command the model asks for passes the policy, the sandbox and the
-- record like any other call. Try it on a copy of examples/calc against any
-- OpenAI-compatible server (llama.cpp's llama-server, vLLM, Ollama, ...):
--
--   cp -r examples/calc /tmp/calc
--   sluice run examples/agent.lua --workspace /tmp/calc \
--     --provider local=openai:http://127.0.0.1:8080/v1 \
--     --approve 'model:call:local/**' --approve 'net:private:http://127.0.0.1:8080' \
--     -- MODEL ["the task"]
--
-- The key, if the server needs one, is credential `local`
-- (SLUICE_CREDENTIAL_LOCAL). `sluice replay RUN` replays the whole run,
-- every turn answered from the record, without the model.
--
-- When the project declares a test runner (a policy's `test = {command =
-- ...}`), the model gets the `test` flow as a tool: it runs the suite (or a
-- selection) and says which tests fail, and whether a failure belongs to
-- the command rather than the code (`invalidProbe`), so a model that named
-- a test that does not exist is told so instead of chasing a bug.

local agent = require("sluice.agent")

local model = sluice.args[1] or "local-model"
local task = sluice.args[2]
  or "The tests of this project fail: run `python3 -m unittest -q` to see how. "
  .. "Fix the code (not the tests) so that they pass, then run them again to check."

local runner = sluice.test_runner
local how_to_test = runner
  and "run the tests with the test tool (a `selection` narrows it; an `invalidProbe` in its result means your selection named something that does not exist, not that the code is wrong)"
  or "run the tests with bash"
local tools = { "read", "ls", "grep", "edit", "apply_patch", "bash" }
if runner then
  table.insert(tools, "test")
end

local system = table.concat({
  "You are a careful software engineer working in the project at " .. sluice.workspace .. ".",
  "Use the tools: read files before you change them, prefer small edits, and " .. how_to_test .. ".",
  "When the tests pass, answer with one short paragraph saying what was wrong and what you changed.",
}, " ")

local result, err = agent.run{
  provider = "local",
  model = model,
  system = system,
  task = task,
  tools = sluice.tools(tools),
  maxTurns = 30,
  onStep = function(step)
    if step.kind == "tool" then
      local said = step.isError and ("refused or failed: " .. step.result:sub(1, 160)) or "ok"
      print(("[turn %d] %s %s: %s"):format(step.turn, step.name, sluice.json.encode(step.input), said))
    elseif step.reply.text ~= "" then
      print(("[turn %d] model: %s"):format(step.turn, step.reply.text))
    end
  end,
}
if not result then
  error(tostring(err))
end

print(("\n%s after %d turns (%d tokens in, %d out)"):format(
  result.stopReason, result.turns, result.usage.inputTokens, result.usage.outputTokens))
print(result.text)

if runner then
  local check, e = sluice.test{}
  if not check then
    print("the tests could not run: " .. e.message)
  else
    print(check.exitCode == 0 and "the tests pass"
      or ("the tests still fail: %d failed, %d passed"):format(#check.failed, check.passed))
  end
else
  local check = sluice.bash{ command = "python3 -m unittest -q" }
  print(check and check.exitCode == 0 and "the tests pass" or "the tests still fail")
end
