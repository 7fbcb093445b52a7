-- tune.lua: the overrides a user or the benchmark gives the planner (the
-- CLI's --tune, "key=value,..."; docs/tuning.md).  Four forms:
--   only=NAME[:NAME...]  plan only these strategies, each in its place in
--                        the chain wherever it can serve (the weight sizes
--                        that choose between strategies do not keep it out)
--   skip=NAME[:NAME...]  leave these out, as if they could not serve
--   NAME=FROM:TO         NAME's variants serve batches FROM to TO (either
--                        left out: as planned), where the plan has them;
--                        the others keep the batches left to them
--   MODULE.DIAL=N        a strategy's dial (its module's `dials`)
-- A NAME is a strategy as --describe prints it (cluster4_r1, mma16, tiled,
-- ...), or a module none of whose strategies has its name (cluster, rmma3,
-- grid), which names all its strategies.  Anything else is refused.

local M = {}
M.__index = M

-- The largest number a dial or a batch boundary takes (no overflow in the
-- sizes computed from it).
local DIAL_MAX, BATCH_MAX = 1 << 20, 1 << 40

local function number(key, text, max)
  local v = math.tointeger(tonumber(text))
  if not v or v < 0 or v > max then
    refuse(string.format("tune: %s=%s is not a whole number from 0 to %d", key, text, max))
  end
  return v
end

-- "a:b:c" -> {"a", "b", "c"} (empty parts kept, as "")
local function split(text)
  local out, start = {}, 1
  while true do
    local stop = string.find(text, ":", start)
    out[#out + 1] = string.sub(text, start, (stop or #text + 1) - 1)
    if not stop then return out end
    start = stop + 1
  end
end

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  return keys
end

-- modules: name -> strategy module (each with `names`, a list of its
-- strategies' names, and `dials`, {dial = allowed values}).
function M.parse(tune, modules)
  local t = setmetatable({modules = modules, only = nil, skip = {}, ranges = {}, dials = {},
                          strategies = {}}, M)
  local known = {}
  for name, m in pairs(modules) do
    for _, s in ipairs(m.names) do
      known[s] = name
      t.strategies[s] = true
    end
  end
  for name in pairs(modules) do known[name] = known[name] or name end
  local function names(key, text)
    local set = {}
    for _, name in ipairs(split(text)) do
      if not known[name] then
        refuse(string.format("tune: %s=%s: '%s' is no strategy (modules: %s)", key, text, name,
                             table.concat(sorted_keys(modules), ", ")))
      end
      set[name] = true
    end
    return set
  end
  for _, key in ipairs(sorted_keys(tune)) do
    local value = tune[key]
    local dot = string.find(key, ".")
    if key == "only" then
      t.only = names(key, value)
    elseif key == "skip" then
      t.skip = names(key, value)
    elseif dot then
      local module, dial = string.sub(key, 1, dot - 1), string.sub(key, dot + 1)
      local m = modules[module]
      local allowed = m and m.dials and m.dials[dial]
      if not allowed then
        local have = {}
        for d in pairs(m and m.dials or {}) do have[#have + 1] = module .. "." .. d end
        refuse(string.format("tune: unknown dial %s (%s)", key,
                             #have > 0 and "known: " .. table.concat(have, ", ")
                             or m and module .. " has none" or "no strategy " .. module))
      end
      local v = number(key, value, DIAL_MAX)
      local ok = false
      for _, a in ipairs(allowed) do ok = ok or a == v end
      if not ok then
        refuse(string.format("tune: %s=%d is not one of %s", key, v, table.concat(allowed, ", ")))
      end
      t.dials[module] = t.dials[module] or {}
      t.dials[module][dial] = v
    elseif known[key] then
      local parts = split(value)
      if #parts ~= 2 then refuse(string.format("tune: %s=%s is not FROM:TO (batches)", key, value)) end
      local from = parts[1] ~= "" and number(key, parts[1], BATCH_MAX) or nil
      local to = parts[2] ~= "" and number(key, parts[2], BATCH_MAX) or nil
      if from and to and from > to then
        refuse(string.format("tune: %s=%s: %d is past %d", key, value, from, to))
      end
      t.ranges[key] = {from = from, to = to}
    else
      refuse(string.format("tune: unknown key %s (only, skip, a strategy's NAME=FROM:TO or "
                           .. "MODULE.DIAL; modules: %s)", key, table.concat(sorted_keys(modules), ", ")))
    end
  end
  return t
end

-- Whether the set names the strategy `name` of `module`.
function M:named(set, module, name)
  return set[name] or (set[module] and not self.strategies[module]) or false
end

-- Whether the strategy `name` (of `module`) may be planned.
function M:allows(module, name)
  if self.only and not self:named(self.only, module, name) then return false end
  return not self:named(self.skip, module, name)
end

-- Whether any strategy of `module` may be.
function M:allows_any(module)
  for _, name in ipairs(self.modules[module].names) do
    if self:allows(module, name) then return true end
  end
  return false
end

-- Whether only= names it: planned wherever it can serve.
function M:forces(module, name)
  return self.only ~= nil and self:named(self.only, module, name)
end

function M:forces_any(module)
  for _, name in ipairs(self.modules[module].names) do
    if self:forces(module, name) then return true end
  end
  return false
end

-- A module's dial, or `default`.
function M:dial(module, dial, default)
  local d = self.dials[module]
  if d and d[dial] ~= nil then return d[dial] end
  return default
end

local function matches(t, v, name) return t:named({[name] = true}, v.module, v.strategy) end

local function range_text(v)
  return v.max_batch < 0 and string.format("%d and up", v.min_batch)
      or string.format("%d to %d", v.min_batch, v.max_batch)
end

-- NAME=FROM:TO over the planned variants (in batch order) that serve
-- batches from `start`: the run of NAME's variants takes [FROM, TO]; the
-- others give it up (dropped where nothing is left of theirs); a batch
-- left to no variant goes to the one beside it that is not NAME's.
local function move_over(t, variants, name, from, to, start)
  local first, last
  for i, v in ipairs(variants) do
    if matches(t, v, name) then
      if last and last ~= i - 1 then
        refuse(string.format("tune: %s names variants apart in the plan: name one of them", name))
      end
      first, last = first or i, i
    end
  end
  if not first then return end  -- (as skip=: one override for many shapes)
  local lo = from or variants[first].min_batch
  local hi = to or variants[last].max_batch  -- -1: no end
  local function inside(b) return b >= lo and (hi < 0 or b <= hi) end
  local kept = {}
  for i, v in ipairs(variants) do
    if i >= first and i <= last then
      if i == first then v.min_batch = lo end
      if i == last then v.max_batch = hi end
      v.min_batch = math.max(v.min_batch, lo)
      if hi >= 0 and (v.max_batch < 0 or v.max_batch > hi) then v.max_batch = hi end
      if v.max_batch < 0 or v.min_batch <= v.max_batch then kept[#kept + 1] = v end
    else
      local before = v.min_batch < lo
      local after = hi >= 0 and (v.max_batch < 0 or v.max_batch > hi)
      if before and after then
        refuse(string.format("tune: %s=%s:%s falls inside %s's batches (%s)", name, from or "", to or "",
                             v.strategy, range_text(v)))
      elseif before then
        if v.max_batch < 0 or v.max_batch >= lo then v.max_batch = lo - 1 end
        kept[#kept + 1] = v
      elseif after then
        if inside(v.min_batch) then v.min_batch = hi + 1 end
        kept[#kept + 1] = v
      end
    end
  end
  -- (a variant left batch 0 alone serves nothing)
  for i = #kept, 1, -1 do
    if kept[i].max_batch == 0 then table.remove(kept, i) end
  end
  table.sort(kept, function(a, b) return a.min_batch < b.min_batch end)
  -- the gaps, to the neighbour that is not NAME's
  for i = 1, #kept - 1 do
    local a, b = kept[i], kept[i + 1]
    if a.max_batch + 1 < b.min_batch then
      if not matches(t, a, name) then a.max_batch = b.min_batch - 1 else b.min_batch = a.max_batch + 1 end
    end
  end
  if kept[1].min_batch > 1 then
    refuse(string.format("tune: %s=%s:%s leaves batches 1 to %d to no variant", name, from or "",
                         to or "", kept[1].min_batch - 1))
  end
  if kept[#kept].max_batch >= 0 then
    refuse(string.format("tune: %s=%s:%s leaves the batches past %d to no variant", name, from or "",
                         to or "", kept[#kept].max_batch))
  end
  kept[1].min_batch = start
  for i = 1, #variants do variants[i] = kept[i] end
end

-- NAME=FROM:TO over the plan's variants.  The persistent grids' fallback
-- at batch 0 (plan.lua, fallback_split) serves no batch of its own: it
-- stays first, and the others move from batch 1.
local function move(t, variants, name, from, to)
  local head = variants[1]
  if #variants < 2 or head.min_batch ~= 0 or head.max_batch ~= 0 or matches(t, head, name) then
    return move_over(t, variants, name, from, to, 0)
  end
  table.remove(variants, 1)
  move_over(t, variants, name, from, to, 1)
  table.insert(variants, 1, head)
end

-- The NAME=FROM:TO overrides, over the plan's variants (in batch order).
function M:move_ranges(variants)
  for _, name in ipairs(sorted_keys(self.ranges)) do
    local r = self.ranges[name]
    move(self, variants, name, r.from, r.to)
  end
end

return M
