-- ctx-lsp for Neovim 0.11+: no plugin needed. Put this in your init.lua (README "Neovim" embeds this file).
vim.lsp.config('ctx_lsp', {
  cmd = { 'ctx-lsp', 'serve' },            -- or { 'python', '-m', 'ctx_lsp', 'serve' }
  filetypes = { 'python' },
  root_markers = { 'pyproject.toml', 'setup.py', 'setup.cfg', '.git' },
  init_options = { budget = 4000 },        -- same JSON as VS Code's initializationOptions
  settings = { ctx = {} },                 -- answered to workspace/configuration (section "ctx")
})
vim.lsp.enable('ctx_lsp')

-- :CtxContext {question}  puts the ContextPack in the quickfix list (one entry per item, with its reasons).
-- :CtxCursor              the same for the symbol under the cursor (ctx.contextAtCursor).
local function show_pack(err, pack)
  if err then
    vim.notify('ctx-lsp: ' .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
    return
  end
  local items = {}
  for _, it in ipairs(pack.items or {}) do
    local why = {}
    for _, r in ipairs(it.reasons or {}) do table.insert(why, r.via) end
    table.insert(items, {
      filename = vim.uri_to_fname(it.uri), lnum = it.start_line, end_lnum = it.end_line,
      text = string.format('%s [%s] %s', it.symbol ~= vim.NIL and it.symbol or it.path, it.detail, table.concat(why, ', ')),
    })
  end
  vim.fn.setqflist({}, ' ', { title = 'ctx: ' .. (pack.query or ''), items = items })
  vim.cmd('copen')
end

local function ctx_client(bufnr)
  return vim.lsp.get_clients({ bufnr = bufnr, name = 'ctx_lsp' })[1]
end

vim.api.nvim_create_user_command('CtxContext', function(opts)
  local client = ctx_client(0)
  if not client then return vim.notify('ctx-lsp is not attached to this buffer', vim.log.levels.WARN) end
  client:exec_cmd({ title = 'ctx', command = 'ctx.getContext', arguments = { { query = opts.args } } },
    { bufnr = 0 }, show_pack)
end, { nargs = '+' })

vim.api.nvim_create_user_command('CtxCursor', function()
  local client = ctx_client(0)
  if not client then return vim.notify('ctx-lsp is not attached to this buffer', vim.log.levels.WARN) end
  local p = vim.lsp.util.make_position_params(0, client.offset_encoding)
  client:exec_cmd({ title = 'ctx', command = 'ctx.contextAtCursor',
    arguments = { { uri = p.textDocument.uri, position = p.position } } }, { bufnr = 0 }, show_pack)
end, {})
