-- Drives a real headless Neovim against ctx-lsp: loads the README's configuration (CTX_NVIM_CONFIG),
-- opens a file of the fixture workspace, runs :CtxContext, a call-hierarchy round trip and
-- ctx.getContext, and writes what came back as JSON to CTX_NVIM_OUT. pytest asserts on that file.
local out_path = assert(os.getenv('CTX_NVIM_OUT'))
local result = { errors = {} }

local function finish()
  local f = assert(io.open(out_path, 'w'))
  f:write(vim.json.encode(result))
  f:close()
  vim.cmd('qa!')
end

local function fail(msg)
  table.insert(result.errors, msg)
  finish()
end

local ok, err = pcall(function()
  dofile(assert(os.getenv('CTX_NVIM_CONFIG')))
  vim.cmd.edit(assert(os.getenv('CTX_NVIM_FILE')))
  vim.bo.filetype = 'python'  -- -u NONE: no filetype detection
  local bufnr = vim.api.nvim_get_current_buf()
  local client
  if not vim.wait(30000, function()
    client = vim.lsp.get_clients({ bufnr = bufnr, name = 'ctx_lsp' })[1]
    return client ~= nil and client.initialized
  end, 50) then
    return fail('ctx_lsp did not attach')
  end
  result.offset_encoding = client.offset_encoding
  result.root_dir = client.root_dir

  local function exec(command, args)
    local resp = client:request_sync('workspace/executeCommand', { command = command, arguments = { args } }, 20000, bufnr)
    if not resp then error(command .. ': no response') end
    if resp.err then error(command .. ': ' .. vim.inspect(resp.err)) end
    return resp.result
  end

  -- wait for the first indexing to finish
  local status
  if not vim.wait(60000, function()
    status = exec('ctx.indexStatus', {})
    return status.indexing == false
  end, 100) then
    return fail('indexing did not finish')
  end
  result.status = { files = status.files, stale = status.stale }

  -- the README's :CtxContext command fills the quickfix list
  vim.cmd('CtxContext who calls checkout')
  vim.wait(20000, function() return #vim.fn.getqflist() > 0 end, 50)
  result.quickfix = {}
  for _, q in ipairs(vim.fn.getqflist()) do
    table.insert(result.quickfix, { file = vim.api.nvim_buf_get_name(q.bufnr), lnum = q.lnum, text = q.text })
  end

  vim.cmd('cclose')  -- back to the source window
  local win = vim.fn.bufwinid(bufnr)
  vim.api.nvim_set_current_win(win)

  local pack = exec('ctx.getContext', { query = 'who calls checkout', budget = 800 })
  result.pack = { budget = pack.budget, tokens = pack.tokens, symbols = {} }
  for _, it in ipairs(pack.items) do table.insert(result.pack.symbols, it.symbol) end

  -- incoming calls of the function under the cursor: the cursor on the call of open_inventory()
  -- that follows "café 😀 — naïve" on the same line (byte column in Neovim, utf-8 on the wire)
  local lines = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  for i, l in ipairs(lines) do
    local s = l:find('open_inventory()', 1, true)
    if s and l:find('naïve', 1, true) then
      vim.api.nvim_win_set_cursor(win, { i, s - 1 + 5 })  -- inside the name
      result.cursor = { line = i - 1, byte = s - 1 + 5 }
    end
  end
  local params = vim.lsp.util.make_position_params(win, client.offset_encoding)
  local prep = client:request_sync('textDocument/prepareCallHierarchy', params, 20000, bufnr)
  if not prep or prep.err or not prep.result or #prep.result == 0 then
    return fail('prepareCallHierarchy: ' .. vim.inspect(prep))
  end
  result.prepared = prep.result[1].name
  local calls = client:request_sync('callHierarchy/incomingCalls', { item = prep.result[1] }, 20000, bufnr)
  result.incoming = {}
  for _, c in ipairs(calls.result or {}) do
    table.insert(result.incoming, { name = c.from.name, ranges = c.fromRanges })
  end

  -- a file written by another program (a terminal, an agent): Neovim on Linux sends no
  -- workspace/didChangeWatchedFiles, so only the server's own watcher can bring it in
  local ext = vim.fs.joinpath(vim.fs.dirname(assert(os.getenv('CTX_NVIM_FILE'))), 'external_audit.py')
  local f = assert(io.open(ext, 'w'))
  f:write('from shop.service import checkout\n\n\ndef external_audit(cart):\n    return checkout(cart)\n')
  f:close()
  local function has_symbol(name)
    local resp = client:request_sync('workspace/symbol', { query = name }, 5000, bufnr)
    return resp ~= nil and resp.result ~= nil and #resp.result > 0
  end
  local function symbol_arrives(name)  -- within 20 s
    local deadline = vim.uv.now() + 20000
    while vim.uv.now() < deadline do  -- not vim.wait(cond): request_sync inside it waits past its timeout
      if has_symbol(name) then return true end
      vim.wait(200)
      vim.uv.update_time()
    end
    return false
  end
  result.external = symbol_arrives('external_audit')
  result.external_status = exec('ctx.indexStatus', {}).folders[1]

  -- a checkout under way (the workspace is a git work tree): while git holds its index lock the
  -- server's own watcher holds the batch, and the server says so with a work-done progress, which
  -- Neovim turns into LspProgress events; once git is done the file goes in and the progress ends
  local git_dir = vim.fs.joinpath(client.root_dir, '.git')
  if vim.uv.fs_stat(git_dir) then
    local begun, ended = {}, {}
    vim.api.nvim_create_autocmd('LspProgress', { callback = function(ev)
      local v = ev.data.params.value
      if v.kind == 'begin' then begun[ev.data.params.token] = v.title end
      if v.kind == 'end' then ended[ev.data.params.token] = true end
    end })
    local function git_token()
      for token, title in pairs(begun) do
        if title:find('waiting for git', 1, true) then return token end
      end
    end
    local lock = vim.fs.joinpath(git_dir, 'index.lock')
    assert(io.open(lock, 'w')):close()
    local added = vim.fs.joinpath(vim.fs.dirname(ext), 'added_by_checkout.py')
    local g = assert(io.open(added, 'w'))
    g:write('def added_by_checkout():\n    return 1\n')
    g:close()
    result.git_wait = {}
    vim.wait(20000, function() return git_token() ~= nil end, 50)
    local token = git_token()
    result.git_wait.title = token and begun[token] or vim.NIL
    result.git_wait.busy = exec('ctx.indexStatus', {}).folders[1].git_busy
    result.git_wait.held = not has_symbol('added_by_checkout')
    os.remove(lock)
    result.git_wait.applied = symbol_arrives('added_by_checkout')
    vim.wait(5000, function() return token ~= nil and ended[token] == true end, 50)
    result.git_wait.ended = token ~= nil and ended[token] == true
  end
  finish()
end)
if not ok then fail(tostring(err)) end
