-- hello.lua: a first workflow. It writes a file, reads it back, edits one
-- line by its exact text and another by its line range, then lists the
-- workspace, printing what each step did.
--
--   sluice run examples/hello.lua --workspace "$(mktemp -d)"

local function check(out, err)
  if not out then error(tostring(err), 2) end
  return out
end

print("workspace: " .. sluice.workspace)

local w = check(sluice.write{
  path = "notes/todo.md",
  content = "# Todo\n\n- write the report\n- review the patch\n- ship it\n",
})
print(("write: %d bytes to notes/todo.md (created: %s)"):format(w.bytesWritten, tostring(w.created)))

local page = check(sluice.read{path = "notes/todo.md"})
print(("read: lines %d-%d of %d"):format(page.startLine, page.endLine, page.totalLines))
print(page.content)

local e1 = check(sluice.edit{
  path = "notes/todo.md",
  oldString = "- review the patch",
  newString = "- [x] review the patch",
})
print(("edit by text: %d replacement, hunk lines %d-%d:"):format(e1.replacements, e1.startLine, e1.endLine))
print(e1.hunk)

local e2 = check(sluice.edit{
  path = "notes/todo.md",
  startLine = 5, endLine = 5,
  expect = "- ship it",
  newString = "- ship it on Friday",
})
print(("edit by range: hunk lines %d-%d:"):format(e2.startLine, e2.endLine))
print(e2.hunk)

-- A missed anchor is an ordinary outcome: nil plus an error that shows what
-- the file really holds. This one remembers line 4 as it was before the edit.
local _, miss = sluice.edit{
  path = "notes/todo.md",
  oldString = "- write the report\n- review the patch",
  newString = "x",
}
print("a missed anchor: " .. miss.code .. " (nearest region: lines "
  .. miss.nearest.startLine .. "-" .. miss.nearest.endLine .. " hold:)")
print(miss.nearest.content)

for _, entry in ipairs(check(sluice.ls{path = "notes"}).entries) do
  print(("ls: %s (%s)"):format(entry.name, entry.kind))
end

-- Commands are flows too: the exit code is a value, the output is bounded.
local wc = check(sluice.bash{command = "grep -c '^- ' notes/todo.md"})
print(("bash: %d items in the list (exit %d)"):format(tonumber(wc.stdout), wc.exitCode))
