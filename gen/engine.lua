-- flowgen's template engine.  Trusted code, built into the library (it is
-- not a template and --template-dir does not replace it).
--
-- It runs the planner (plan.lua) and renders the kernel templates (*.cut),
-- each in its own sandbox environment: no io, os, package, debug, load or
-- pcall; only text chunks; the C side caps instructions, memory, time and
-- the length of strings (gen/sandbox.c).
--
-- Template syntax (*.cut):
--   | lua code          a line whose first non-blank character is '|'
--   text $(expr) text  any other line: CUDA, with Lua expressions inlined
--   $$                 a literal '$'
-- One template line becomes one Lua line, so errors carry the template's own
-- line numbers.

-- read_template: C function, name -> text, chunkname | nil, message.
-- library: the sandbox's find, rep and table functions (gen/sandbox_lib.c),
-- which count their work against the time limit.
local read_template, library = ...
local str = string  -- the full string library, for the engine's own use

local engine = {}

-- A planner's refusal of a shape: a distinct error object, so the C side
-- reports "unsupported" rather than "template error".
local Refusal = {}
Refusal.__index = Refusal
Refusal.__tostring = function(r) return r.message end

local function refuse(message)
  error(setmetatable({message = tostring(message)}, Refusal), 0)
end

-- pairs() in sandboxes visits keys in sorted order: the same input gives the
-- same bytes, whatever the hash seed.
local function key_less(a, b)
  local ta, tb = type(a), type(b)
  if ta ~= tb then return ta < tb end
  if ta == "number" or ta == "string" then return a < b end
  return tostring(a) < tostring(b)
end

local function sorted_pairs(t)
  local keys = {}
  for k in next, t do keys[#keys + 1] = k end
  table.sort(keys, key_less)
  local i = 0
  return function()
    i = i + 1
    local k = keys[i]
    if k ~= nil then return k, t[k] end
  end
end

-- An fp32 literal that reads back exactly: rounds to float, prints the
-- shortest round-trip form of up to 9 digits, always with a '.' or exponent.
local function f32(x)
  if type(x) ~= "number" then error("f32: expected a number, got " .. type(x), 2) end
  local v = string.unpack("<f", string.pack("<f", x))
  if v ~= v or v == math.huge or v == -math.huge then
    error("f32: " .. tostring(x) .. " has no finite fp32 literal", 2)
  end
  local s
  for digits = 1, 9 do
    s = string.format("%." .. digits .. "g", v)
    if string.unpack("<f", string.pack("<f", tonumber(s))) == v then break end
  end
  if not str.find(s, "[%.eEn]") then s = s .. ".0" end
  return s .. "f"
end

-- Safe library subsets.  string.dump is left out (bytecode), math.random
-- too (output must be deterministic).
local function copy(t, names)
  local c = {}
  for _, n in ipairs(names) do c[n] = t[n] end
  return c
end

-- No Lua patterns in templates: their backtracking runs in C, out of reach
-- of the instruction limit.  find() is plain text search, rep() checks the
-- size first: both the sandbox's.
local safe_string = copy(string, {"byte", "char", "format", "len", "lower",
  "reverse", "sub", "upper", "pack", "packsize", "unpack"})
safe_string.find = library.find
safe_string.rep = library.rep

-- String methods ("x"):upper() go through the string metatable: give it the
-- same subset (the C side hides the metatable itself).
local string_metatable = getmetatable("")
string_metatable.__index = safe_string
string_metatable.__metatable = false
local safe_table = copy(library, {"concat", "insert", "move", "remove", "sort",
  "unpack"})
safe_table.pack = table.pack
local safe_math = copy(math, {"abs", "ceil", "floor", "fmod", "huge", "max",
  "maxinteger", "min", "mininteger", "modf", "pi", "sqrt", "tointeger", "type",
  "ult", "exp", "log"})
local safe_utf8 = copy(utf8, {"char", "charpattern", "codepoint", "codes",
  "len", "offset"})

-- A finalizer runs with hooks off, beyond the instruction limit: refused.
local function safe_setmetatable(t, mt)
  if type(mt) == "table" and rawget(mt, "__gc") ~= nil then
    error("__gc metamethods are not allowed in templates", 2)
  end
  return setmetatable(t, mt)
end

local function base_env()
  return {
    assert = assert, error = error, ipairs = ipairs, next = next,
    pairs = sorted_pairs, select = select, tonumber = tonumber,
    tostring = tostring, type = type, setmetatable = safe_setmetatable,
    getmetatable = getmetatable, rawequal = rawequal, rawget = rawget,
    rawlen = rawlen, rawset = rawset,
    string = safe_string, table = safe_table, math = safe_math,
    utf8 = safe_utf8,
    refuse = refuse, f32 = f32,
  }
end

-- Reading an undefined global is an error in templates (catches typos).
local function strict(env, name)
  return setmetatable(env, {
    __index = function(_, k)
      error(string.format("undefined variable '%s' in %s", tostring(k), name), 2)
    end,
  })
end

-- ---- template compiler ------------------------------------------------------

local function compile_text_line(line)
  local parts, pos = {}, 1
  while true do
    local s = str.find(line, "%$", pos)
    if not s then break end
    if str.sub(line, s + 1, s + 1) == "$" then
      parts[#parts + 1] = string.format("%q", str.sub(line, pos, s))
      pos = s + 2
    else
      local expr = str.match(line, "^%b()", s + 1)
      if not expr then
        return nil, "'$' must be followed by '(' expression ')' or another '$'"
      end
      if s > pos then parts[#parts + 1] = string.format("%q", str.sub(line, pos, s - 1)) end
      parts[#parts + 1] = "_text" .. expr
      pos = s + 1 + #expr
    end
  end
  if pos <= #line then parts[#parts + 1] = string.format("%q", str.sub(line, pos)) end
  parts[#parts + 1] = '"\\n"'
  return "_out(" .. table.concat(parts, ", ") .. ")"
end

-- Template text -> Lua source with the same line numbers, as a list of
-- pieces (one string of it all could pass the sandbox's length limit).
local function compile_template(text, chunkname)
  local lines, rest = {}, 1  -- the last line may lack its "\n"
  for line, after in str.gmatch(text, "([^\n]*)\n()") do
    lines[#lines + 1], rest = line, after
  end
  if rest <= #text then lines[#lines + 1] = str.sub(text, rest) end
  local out = {}
  for n, line in ipairs(lines) do
    line = str.gsub(line, "\r$", "")
    local code = str.match(line, "^%s*|(.*)$")
    if not code then
      local message
      code, message = compile_text_line(line)
      if not code then
        error(string.format("%s:%d: %s", str.sub(chunkname, 2), n, message), 0)
      end
    end
    out[n] = code .. "\n"  -- never empty: "" would end load()'s reading
  end
  return out
end

-- A load() reader that gives the pieces in turn.
local function reader(pieces)
  local i = 0
  return function()
    i = i + 1
    return pieces[i]
  end
end

-- ---- rendering --------------------------------------------------------------

local function load_file(name)
  local text, chunkname = read_template(name)
  if not text then error(chunkname, 0) end
  return text, "@" .. chunkname
end

local function text_of(v)
  local t = type(v)
  if t == "string" then return v end
  if math.type(v) == "integer" then return tostring(v) end
  if t == "number" then
    error("a float in $(...) is ambiguous: format it with f32() or string.format", 2)
  end
  if t == "boolean" then return v and "true" or "false" end
  error("$(...) evaluated to " .. t, 2)
end

-- load() with the chunk's file named in every error; source is the text or
-- a reader of it.
local function load_chunk(source, chunkname, env)
  local chunk, message = load(source, chunkname, "t", env)
  if not chunk then
    local file = str.sub(chunkname, 2)
    if str.sub(message, 1, #file) ~= file then message = file .. ": " .. message end
    error(message, 0)
  end
  return chunk
end

-- Renders template `name` with `vars` visible as globals; appends to `buf`.
-- A template's Lua source, compiled from its text once per state: a
-- kernel's parts are included once a variant.
local compiled = {}

local function render_into(buf, name, vars)
  local entry = compiled[name]
  if not entry then
    local text, chunkname = load_file(name)
    entry = {compile_template(text, chunkname), chunkname}
    compiled[name] = entry
  end
  local source, chunkname = reader(entry[1]), entry[2]
  local env = base_env()
  for k, v in next, vars do env[k] = v end
  env._out = function(...)
    for i = 1, select("#", ...) do buf[#buf + 1] = (select(i, ...)) end
  end
  env._text = text_of
  env.include = function(child, child_vars)
    local merged = {}
    for k, v in next, vars do merged[k] = v end
    for k, v in next, (child_vars or {}) do merged[k] = v end
    render_into(buf, child, merged)
  end
  load_chunk(source, chunkname, strict(env, str.sub(chunkname, 2)))()
end

-- import(name): the value of the plan module name.lua (a strategy, the
-- device's figures, ...), run once per generation in an environment of its
-- own (the base one and import), so that every module and template that
-- imports it shares that value.
local function importer()
  local loaded, loading = {}, {}
  local function import(name)
    if type(name) ~= "string" then error("import: expected a module name", 2) end
    if loaded[name] == nil then
      if loading[name] then error("import: " .. name .. ".lua imports itself", 2) end
      loading[name] = true
      local text, chunkname = load_file(name .. ".lua")
      local env = base_env()
      env.import = import
      local value = load_chunk(text, chunkname, strict(env, str.sub(chunkname, 2)))()
      loaded[name] = value == nil and true or value
      loading[name] = nil
    end
    return loaded[name]
  end
  return import
end

-- Runs plan.lua: it returns a function(spec) -> plan table.
local function make_plan(spec, import)
  local text, chunkname = load_file("plan.lua")
  local env = base_env()
  env.import = import
  env = strict(env, str.sub(chunkname, 2))
  local planner = load_chunk(text, chunkname, env)()
  if type(planner) ~= "function" then
    error(str.sub(chunkname, 2) .. ": must return a function(spec)", 0)
  end
  local plan = planner(spec)
  if type(plan) ~= "table" or type(plan.template) ~= "string"
      or type(plan.variants) ~= "table" or #plan.variants == 0 then
    error(str.sub(chunkname, 2) .. ": the planner must return a table with "
      .. "'template' and a non-empty 'variants' list", 0)
  end
  return plan
end

-- The launch configuration each variant must give (templates/launch.lua
-- describes it), checked here so that C reads plain values only.
local variant_fields = {
  {"strategy", "string"}, {"symbol", "string"}, {"pack_symbol", "string"},
  {"min_batch", "integer"}, {"max_batch", "integer"},
  {"block_threads", "integer"}, {"rows_per_block", "integer"},
  {"cluster_blocks", "integer"}, {"shared_bytes", "integer"},
  {"params_bytes", "integer"}, {"pack_threads", "integer"},
  {"cond_threads", "integer", 0}, {"cond_blocks_per_sm", "integer", 0},  -- optional
  {"grid_blocks_per_sm", "integer", 0},  -- optional, with its default
  {"cooperative", "boolean", false}, {"fallback", "integer", 0},
  {"nonportable_cluster", "boolean", false},
}

local function plain_variants(plan)
  local out = {}
  for i, v in ipairs(plan.variants) do
    if type(v) ~= "table" then
      error(string.format("plan.lua: variants[%d] is not a table", i), 0)
    end
    local p = {}
    for _, f in ipairs(variant_fields) do
      local name, kind = f[1], f[2]
      local value = rawget(v, name)
      if value == nil then value = f[3] end
      local ok = (kind == "string" and type(value) == "string")
        or (kind == "integer" and math.type(value) == "integer")
        or (kind == "boolean" and type(value) == "boolean")
      if not ok then
        error(string.format("plan.lua: variants[%d].%s must be a%s %s, got %s",
          i, name, kind == "integer" and "n" or "", kind, type(value)), 0)
      end
      p[name] = value
    end
    out[i] = p
  end
  return out
end

-- "key=value,..." -> table, for the planner (which has no patterns and
-- refuses keys it does not know); an entry of another form, or a key
-- given twice, is refused here.  Empty entries (",,") are skipped.
local function parse_tune(text)
  local t = {}
  for entry in string.gmatch(text or "", "([^,]*)") do
    if entry ~= "" then
      local key, value = string.match(entry, "^([%w_.]+)=([%w_.:]+)$")
      if not key then
        refuse(string.format("tune: '%s' is not key=value (a key of letters, digits, _ and ., "
                             .. "a value of those and :)", entry))
      end
      if t[key] then refuse(string.format("tune: %s given twice", key)) end
      t[key] = value
    end
  end
  return t
end

-- The part of the plan to render (spec.part: "all", "pack", "variant" with
-- spec.part_variant, 1-based, "batch" with spec.part_batch, or "plan":
-- nothing): sets
-- plan.part and plan.rendered, the variants whose kernels the source holds
-- (a list, in plan order), and plan.pack, whether it holds the pack
-- kernel.  The plan itself (its variants, their launch descriptions, the
-- params layout) stays the whole plan's.
local function select_part(spec, plan)
  local part, variants = spec.part or "all", plan.variants
  plan.part, plan.pack, plan.rendered = part, part ~= "variant" and part ~= "plan", {}
  if part == "all" then
    for i = 1, #variants do plan.rendered[i] = variants[i] end
    return {}
  end
  local chosen = {}
  if part == "variant" then
    local i = spec.part_variant
    if not variants[i] then
      refuse(string.format("variant %d: the plan has variants 0 to %d", i - 1, #variants - 1))
    end
    chosen[i] = true
  elseif part == "batch" then
    local b = spec.part_batch
    for i, v in ipairs(variants) do
      if b >= v.min_batch and (v.max_batch < 0 or b <= v.max_batch) then
        chosen[i] = true
        if v.cooperative then chosen[v.fallback] = true end
        break
      end
    end
  end
  local indices = {}
  for i = 1, #variants do
    if chosen[i] then
      plan.rendered[#plan.rendered + 1] = variants[i]
      indices[#indices + 1] = i
    end
  end
  return indices
end

-- Entry point from C: returns true, source pieces (C joins them: the
-- whole could pass the length limit of a string), variants, the indices
-- (1-based) of the variants rendered (empty: all, or the pack alone) |
-- false, message, refused (a planner's refusal of the shape rather than a
-- template error).
function engine.generate(spec)
  local ok, source, variants, rendered = xpcall(function()
    spec.tune_text = spec.tune or ""
    spec.tune = parse_tune(spec.tune)
    local import = importer()
    local plan = make_plan(spec, import)
    local indices = select_part(spec, plan)
    local buf = {}
    if plan.part ~= "plan" then
      render_into(buf, plan.template, {spec = spec, plan = plan, import = import})
    end
    return buf, plain_variants(plan), indices
  end, function(e)
    if getmetatable(e) == Refusal then return e end
    return type(e) == "string" and e or ("error object is a " .. type(e))
  end)
  if ok then return true, source, variants, rendered end
  if getmetatable(source) == Refusal then return false, source.message, true end
  return false, source, false
end

return engine
