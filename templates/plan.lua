-- plan.lua: the planner.  For a spec (dim, hidden, steps, solver,
-- precision, arch, device, tune, ...) it gives the chain of variants that
-- serves every batch, in batch order, the packed weights they read and how
-- each is launched; file.cut renders it and the runtime launches it.  Each
-- strategy is a module (cluster.lua with cluster.cut, ...): it says whether
-- it can serve the spec and lays its variants out.  This file says which
-- serves which batches:
--
--   small batches, weights on chip         large batches, on the matrix units
--   (rmma and rmma3 after the cluster       where the precision has them
--   kernel's first variants, or alone)
--
--   fp32       cluster, rmma3 (by 8, 16)    tiled8, tiled, wgstream3 | mma,
--                                           gemm_b1024, gemm (sm_90a; on
--                                           mma.sync gemm, then mma)
--   tf32       cluster, rmma (clusters)     mma16, wgstream | mma,
--                                           gemm_b1024, gemm (H >= 512, sm_90a)
--   bf16/fp16  cluster, rmma                mma16 | wgmma64, wgmma | mma,
--                                           gemm_b1024, gemm (H >= 512, sm_90a)
--
-- and where the weights take 512 KB or more, in every precision: grid
-- first (up to 64 samples), then the tiled kernel's cluster split where the
-- weights take 128 KB or more; where a precision's matrix-unit kernel does
-- not fit, the tiled kernels, then gemm on the precision's operands (on
-- sm_90a in tf32, bf16 and fp16: gemm right after the grids, the split
-- their fallback alone; from batch 9 where the weights take 16 MB or
-- more; to batch 1024 gemm_b1024, whose tiles may split).  The batch
-- ranges are each strategy's (its `last`): where it was measured faster
-- than what follows on an H200 or an H100.

local lib = import("lib")
local device = import("device")
local tune = import("tune")
local params = import("params")
local launch = import("launch")

local S = {}
for _, name in ipairs({"cluster", "rmma", "rmma3", "tiled", "grid", "gemm", "mma", "wgmma", "wgstream"}) do
  S[name] = import(name)
end

-- The strategies that serve some members of the model family only.
local SPECIALIZED = {"cluster", "rmma", "rmma3", "wgmma", "wgstream"}

local LARGE_WEIGHTS, SPLIT_WEIGHTS, WAVES_WEIGHTS = 512 * 1024, 128 * 1024, 256 * 1024
-- (fp32 bytes) tf32, bf16 and fp16 on wgmma: gemm from batch 9
-- (gemm_b1024 first), in place of grid_b64 and the tiled split, where the
-- weights take this much (with less, grid_b64 was faster; grid_b8 is
-- faster up to 8 samples: docs/performance.md, "Wide models")
local GEMM_SMALL_WEIGHTS = 16 * 1024 * 1024

-- The chain under construction: the variants so far and the first batch
-- no variant serves yet.
local Chain = {}
Chain.__index = Chain

local function new_chain() return setmetatable({variants = {}, next = 1, plain = false}, Chain) end

-- v serves the batches from the next one to `last` (nil: no end).
function Chain:take(v, last)
  v.min_batch, v.max_batch = self.next, last and math.max(self.next, last) or -1
  self.variants[#self.variants + 1] = v
  self.next = v.max_batch + 1
  self.plain = self.plain or v.grid_blocks_per_sm == 0
end

-- Variants that come with their ranges (the cluster kernel's).
function Chain:append(list)
  for _, v in ipairs(list) do
    self.variants[#self.variants + 1] = v
    self.next = v.max_batch + 1
    self.plain = true
  end
end

-- What applies to the spec, within the overrides.
local function choose(ctx)
  local spec, t = ctx.spec, ctx.tune
  local function may(module, name) return t:allows(module, name) end
  local c = {}
  -- The specialized strategies serve some members of the model family
  -- only: the others are left out, as if they could not serve the spec
  -- (the generic ones, tiled, mma, grid and gemm, serve every member).
  local serves = {}
  for _, name in ipairs(SPECIALIZED) do
    local ok, why = S[name].serves(ctx)
    serves[name] = ok
    if not ok then ctx.left_out[#ctx.left_out + 1] = name .. ": " .. why end
  end
  -- The precision's matrix-unit kind; fp32's (tf32x3) pays where a layer
  -- has outputs for every warp.
  c.kind = S.mma.kinds[spec.precision]
  if c.kind == "tf32x3" and spec.hidden < 64 and not t:forces("mma", "mma") then c.kind = nil end
  -- whether the precision's mma kernel fits (its activations in shared
  -- memory: up to H of about 2048)
  c.fits = c.kind and S.mma.variant(ctx, c.kind, 64, "") ~= nil
  -- the gemm variant on the precision's operands: fp32's with large
  -- weights; the other precisions' where their mma kernel does not fit, in
  -- place of the tiled kernels' fp32 FMA (faster: docs/performance.md)
  local wide = t:forces("gemm", "gemm") or (c.kind == "tf32x3" and ctx.weights >= LARGE_WEIGHTS)
      or (c.kind and c.kind ~= "tf32x3" and not c.fits)
  c.gemm = c.kind and wide and may("gemm", "gemm") and S.gemm.variant(ctx, c.kind, {}) ~= nil
  if c.kind and not c.gemm and not c.fits then c.kind = nil end
  -- tf32, bf16 and fp16 where gemm is on wgmma (sm_90a) and H >= 512:
  -- gemm in place of the mma kernel even where that fits (tf32 and bf16
  -- 1.2x to 3x faster from B=2113 at H=512, tf32 3x to 6x from B=113 at
  -- H=1024: docs/performance.md), or where only= names it
  c.gemm_over_mma = (c.kind == "bf16" or c.kind == "fp16" or c.kind == "tf32") and c.fits
      and (spec.hidden >= 512 or t:forces("gemm", "gemm")) and may("gemm", "gemm") and S.gemm.on_wgmma(ctx, c.kind)
  c.grid = t:allows_any("grid") and (ctx.weights >= LARGE_WEIGHTS or t:forces_any("grid")) and S.grid.applies(ctx)
  -- gemm from batch 9, after grid_b1 and grid_b8 (no grid_b64)
  c.gemm_early = (c.kind == "bf16" or c.kind == "fp16" or c.kind == "tf32") and (c.gemm or c.gemm_over_mma)
      and ctx.weights >= GEMM_SMALL_WEIGHTS and S.gemm.on_wgmma(ctx, c.kind)
  c.wgmma = serves.wgmma and t:allows_any("wgmma") and S.wgmma.applies(ctx)
  if spec.precision == "fp32" then
    c.rmma = serves.rmma3 and t:allows_any("rmma3") and S.rmma3.layout(ctx, 8) or nil
    c.wide = c.rmma and may("rmma3", "rmma3_r16") and S.rmma3.wide(ctx) or nil
  else
    c.rmma = serves.rmma and S.rmma.layout(ctx) or nil
    if c.rmma and not may("rmma", c.rmma.name) then c.rmma = nil end
  end
  c.ws = c.kind and serves.wgstream and may("wgstream", spec.precision == "fp32" and "wgstream3" or "wgstream")
      and S.wgstream.layout(ctx) or nil
  c.cluster = serves.cluster and t:allows_any("cluster")
  return c
end

-- Small batches: the register-resident kernel (rmma, rmma3) after the
-- cluster kernel's first variants, or the cluster kernel alone.
local function small_batches(ctx, chain, c)
  local spec, rm = ctx.spec, c.rmma
  if rm then
    local fp32 = spec.precision == "fp32"
    local last = fp32 and S.rmma3.last(ctx, rm, c.wide, c.ws and c.ws.split) or S.rmma.last(ctx, rm)
    local rows = fp32 and S.rmma3.clusters_before() or S.rmma.clusters_before(ctx, rm)
    if c.cluster and rows > 0 and last > 1 then
      chain:append(S.cluster.chain(ctx, 1, math.min(rows * S.cluster.at_once(ctx) + 1, last) - 1))
    end
    local narrow_last = c.wide and math.min(last, S.rmma3.narrow_last(ctx, c.wide)) or last
    for _, l in ipairs({{rm, narrow_last}, {c.wide, last}}) do
      if l[1] and chain.next <= l[2] and ctx.tune:allows(l[1].module or "rmma", l[1].name) then
        chain:take(S.rmma.variant(ctx, l[1]), l[2])
      end
    end
  elseif c.cluster then
    -- the last variant over more waves where the weights are large (three
    -- in fp32, two in tf32, where they beat what follows)
    local waves = ctx.weights >= WAVES_WEIGHTS and (spec.precision == "fp32" and 3 or 2) or 1
    chain:append(S.cluster.chain(ctx, 1, nil, waves))
  end
  if #chain.variants > 0 then return end
  if c.grid then
    -- bf16 and fp16 read the mma kernel's 16-bit copies (packed wherever
    -- the precision's kind is planned)
    local half = c.kind == "bf16" or c.kind == "fp16"
    local w16 = half and {kind = c.kind, weights = S.mma.weights(c.kind, spec)} or nil
    for _, v in ipairs(S.grid.variants(ctx, w16)) do
      if ctx.tune:allows("grid", v.strategy) and not (c.gemm_early and v.max_batch > 8) then
        chain:take(v, v.max_batch)
      end
    end
  end
  -- weights the cluster kernel cannot hold: the tiled kernel's split
  -- (where gemm on wgmma follows it, the grids' fallback alone:
  -- fallback_split)
  local blocks = S.tiled.split_blocks(ctx)
  local name = "tiled8c" .. blocks
  if ctx.device.clusters and blocks > 1 and ctx.tune:allows("tiled", name)
      and (ctx.weights >= SPLIT_WEIGHTS or ctx.tune:forces("tiled", name)) then
    local v = S.tiled.split(ctx, blocks)
    chain:take(v, S.tiled.split_last(ctx, v))
  end
end

-- gemm (wide) from the chain's next batch to `last` (nil: no end); on
-- wgmma its batches to `reach` (default 1024) first (gemm_b1024, its
-- tiles' inputs split over the SMs where they are fewer: 1.04x to 2.1x
-- faster than whole tiles at B=8 to 256, H >= 2048, as fast or faster at
-- B=1024: docs/performance.md), then `between` (a variant) to its
-- `between_last` where given.
local function take_gemm(ctx, chain, c, wide, last, reach, between, between_last)
  local split_last = S.gemm.SPLIT_LAST
  -- (not where gemm=FROM:TO places gemm)
  local small = wide.gemm_wgmma and chain.next <= split_last and not ctx.tune.ranges.gemm
      and ctx.tune:allows("gemm", "gemm_b" .. split_last)
      and S.gemm.variant(ctx, c.kind, S.mma.weights(c.kind, ctx.spec), split_last)
  if small then
    reach = reach or split_last
    chain:take(small, last and math.min(last, reach) or reach)
    if last and chain.next > last then return end
  end
  if between and between_last >= chain.next then chain:take(between, between_last) end
  chain:take(wide, last)
end

-- Large batches, tf32, bf16 and fp16: mma16 while its blocks fill the GPU
-- once (wgmma64 in its place with wgmma: 64 samples a block spread over
-- every SM), then the streamed or resident warpgroup kernel, else mma.
-- Where gemm on wgmma follows (H >= 512 on sm_90a), its split tiles take
-- mma16's first batches: in bf16 and fp16 to 1024 (faster than mma16 at
-- B=256 to 1024; at 2048 faster at some shapes, slower at others, so
-- mma16 keeps 1025 to 2112), in tf32 to 4096 and mma16 none (faster than
-- mma16 to 2048, than gemm's whole tiles at 2048 and 4096), unless only=
-- names mma16 (docs/performance.md, "Boundaries").
local TF32_SPLIT_REACH = 4096
local function matrix_batches(ctx, chain, c)
  local sms, t = ctx.device.sms, ctx.tune
  local many = S.mma.variant(ctx, c.kind, 64, "")
  local few = t:allows("mma", "mma16") and S.mma.variant(ctx, c.kind, 16, "16")
  if few and few.rows_per_block >= many.rows_per_block then few = nil end
  -- (wgmma64=FROM: mma16 serves the batches before it)
  local one_from = t.ranges.wgmma64 and t.ranges.wgmma64.from
  local one = c.wgmma and t:allows("wgmma", "wgmma64") and math.max(chain.next, one_from or 0)
  local few_last = few and (one and one - 1 or few.rows_per_block * sms)
  local last = c.ws and S.wgstream.variant(ctx, c.ws)
      or c.wgmma and t:allows("wgmma", "wgmma") and S.wgmma.variant(ctx, 2)
      or t:allows("mma", "mma") and many
  local wide = c.gemm_over_mma and (not last or last == many)
      and S.gemm.variant(ctx, c.kind, S.mma.weights(c.kind, ctx.spec))
  local split_first = wide and wide.gemm_wgmma and few and not one and not t:forces("mma", "mma16")
  if few and not split_first and few_last >= chain.next then chain:take(few, few_last) end
  if one then chain:take(S.wgmma.variant(ctx, 1), S.wgmma.rows * sms) end
  if wide then
    -- at H >= 512 from the first batch the small ones leave (faster than
    -- mma at every batch measured: docs/performance.md); where only=
    -- forces it at H < 512, after mma's first wave of blocks.  And a
    -- variant that is not a grid before it (the fallback) where none is yet
    local from = ctx.spec.hidden >= 512 and chain.next or many.rows_per_block * sms + 1
    if last and (from > chain.next or not chain.plain) then chain:take(last, math.max(from, chain.next + 1) - 1) end
    local tf32 = c.kind == "tf32"
    take_gemm(ctx, chain, c, wide, nil, split_first and tf32 and TF32_SPLIT_REACH or nil,
              split_first and not tf32 and few or nil, few_last)
    return true
  end
  if last then chain:take(last) end
end

-- Large batches, fp32 (and a precision whose matrix-unit kernel does not
-- fit): the tiled kernel, 8 samples a block while that fills the GPU once,
-- then 32; tf32x3 on the matrix units (wgstream3, or mma once its blocks
-- fill the GPU); with large weights the gemm variant from the first batch
-- the small ones leave; on mma.sync the mma kernel after it where that
-- owns 32 samples a block or more (before it otherwise), on wgmma none
-- (gemm 1.7x faster than mma at B=65536, D=32, H=512 and D=66, H=636:
-- docs/performance.md).
local function fp32_batches(ctx, chain, c)
  local spec, t, sms = ctx.spec, ctx.tune, ctx.device.sms
  local few, many = S.tiled.few(ctx), S.tiled.many(ctx)
  local x3 = c.ws and c.ws.split and S.wgstream.variant(ctx, c.ws)
      or c.kind and t:allows("mma", "mma") and S.mma.variant(ctx, c.kind, 64, "") or nil
  local wide = c.gemm and S.gemm.variant(ctx, c.kind, S.mma.weights(c.kind, spec))
  -- at least one variant that is not a grid before it (the fallback where
  -- the grid cannot be resident); then from the first batch the grids and
  -- the split leave on wgmma, and on mma.sync at H >= 1024 (tf32x3 1.5x
  -- to 6x faster than the tiled kernels from B=113 there; at H=512 1.1x to
  -- 1.6x slower to B=512: docs/performance.md), else from the batch after
  -- the 8-row kernel's last
  local stop = wide and math.max(chain.plain and chain.next or chain.next + 1,
                                 (wide.gemm_wgmma or spec.hidden >= 1024) and 0 or 8 * sms + 1)
  local function below(v, last)
    if stop and chain.next >= stop then return end
    if stop and (not last or last >= stop) then last = stop - 1 end
    chain:take(v, last)
  end
  if few.rows_per_block < many.rows_per_block and t:allows("tiled", "tiled8")
      and few.rows_per_block * sms >= chain.next then
    below(few, few.rows_per_block * sms)
  end
  local from = x3 and (x3.strategy == "wgstream3" and chain.next or x3.rows_per_block * sms + 1)
  local resume = wide and not wide.gemm_wgmma and x3 and x3.rows_per_block >= 32 and math.max(from, stop + 1)
  local tiled = t:allows("tiled", "tiled")
  if x3 and not resume then
    if from > chain.next and tiled then below(many, from - 1) end
    below(x3)
  elseif tiled then
    below(many)
  end
  if wide then take_gemm(ctx, chain, c, wide, resume and resume - 1) end
  if resume then chain:take(x3) end
end

-- The tiled kernel's split where gemm on wgmma follows it (tf32, bf16,
-- fp16): gemm takes its batches (2x to 4x faster there:
-- docs/performance.md) and the split serves none of its own, only the
-- persistent grids' where their cooperative launch is refused: first in
-- the plan, at batch 0, which launches nothing.
local function fallback_split(variants)
  for i = 1, #variants - 1 do
    local v, after = variants[i], variants[i + 1]
    if v.module == "tiled" and v.cluster_blocks > 1 and after.gemm_wgmma then
      after.min_batch = math.max(v.min_batch, 1)
      variants[1].min_batch = math.max(variants[1].min_batch, 1)
      v.min_batch, v.max_batch = 0, 0
      table.remove(variants, i)
      table.insert(variants, 1, v)
      return
    end
  end
end

-- The packed segments of the copies the plan's strategies read.
local function copies(ctx, c, variants, scratch)
  local spec = ctx.spec
  local out = {cluster = S.cluster.segments(ctx, variants)}
  -- the matrix units' copies, unless wgstream3 takes the mma kernel's
  -- place and no gemm variant reads them
  -- (with gemm on wgmma, also its tiled copies)
  -- (fp32's gemm on wgmma reads the tiled ones alone: the others only
  -- where an mma kernel or gemm on mma.sync is planned too)
  local tiled, plain = false, spec.precision ~= "fp32"
  for _, v in ipairs(variants) do
    tiled = tiled or v.gemm_wgmma or false
    plain = plain or v.module == "mma" or (v.module == "gemm" and not v.gemm_wgmma)
  end
  if c.kind and not (c.ws and c.ws.split and not c.gemm) then
    local kept = {}
    for _, s in ipairs(S.mma.segments(ctx, c.kind, tiled)) do
      if s.tiled or plain then kept[#kept + 1] = s end
    end
    out.mma = kept
  end
  if c.wgmma then out.wgmma = S.wgmma.segments(ctx) end
  if c.ws then out.wgstream = S.wgstream.segments(ctx, c.ws) end
  if c.rmma then out.rmma = S.rmma.segments(ctx, spec.precision, c.rmma.dim_pad, c.rmma.hidden_pad) end
  if scratch > 0 then out.grid = S.grid.segments(ctx, scratch) end
  return out
end

return function(spec)
  lib.family(spec)
  local solver = lib.solvers[spec.solver]
  if not solver then refuse("solver " .. spec.solver .. " has no tableau") end
  if not S.mma.kinds[spec.precision] then refuse("precision " .. spec.precision .. " has no strategy") end
  local ctx = {spec = spec, solver = solver, device = device.of(spec), weights = lib.weight_bytes(spec),
               left_out = {}}
  ctx.tune = tune.parse(spec.tune, S)
  local c = choose(ctx)
  local chain = new_chain()
  small_batches(ctx, chain, c)
  local t = ctx.tune
  if c.kind and spec.precision ~= "fp32" and c.fits
      and (c.ws or c.wgmma or t:allows("mma", "mma16") or t:allows("mma", "mma")) then
    -- gemm only where the chain took it (a named one has no place in this
    -- chain otherwise: no scratch area for it)
    c.gemm = matrix_batches(ctx, chain, c) or false
  else
    fp32_batches(ctx, chain, c)
  end
  local variants = chain.variants
  if #variants == 0 then
    local why = #ctx.left_out > 0 and " (left out for the model: " .. table.concat(ctx.left_out, "; ") .. ")" or ""
    refuse("tune: no strategy left to serve this spec" .. why)
  end
  variants[1].min_batch, variants[#variants].max_batch = 0, -1
  -- (gemm=FROM: moved by hand, the split keeps what it leaves)
  if not ctx.tune.ranges.gemm then fallback_split(variants) end
  ctx.tune:move_ranges(variants)
  for _, v in ipairs(variants) do
    if v.batch_limit and (v.max_batch < 0 or v.max_batch > v.batch_limit) then
      refuse(string.format("tune: %s serves %d samples at most", v.strategy, v.batch_limit))
    end
  end
  launch.describe(variants)
  -- the scratch area of the persistent grids (planned or not: kept so);
  -- gemm's arrays after the grid variants' (whole 128-byte lines on):
  -- their words would otherwise find gemm's activations where they wait
  -- for an epoch, which a pair of 16-bit values can match
  local scratch = c.grid and S.grid.scratch_activations(ctx, S.grid.ROWS, spec.dim, spec.hidden, false) or 0
  if c.gemm then
    local at, split = lib.round_up(scratch, 32), false
    for _, v in ipairs(variants) do
      if v.module == "gemm" then v.scratch_data = v.scratch_data + at end
      split = split or (v.gemm_split or 1) > 1
    end
    scratch = at + S.gemm.scratch(ctx, c.kind, split)
  end
  local segments, floats = params.layout(spec, copies(ctx, c, variants, scratch), #solver.c)
  for _, v in ipairs(variants) do v.params_bytes = 4 * floats end
  return {
    template = "file.cut",
    solver = solver,
    device = ctx.device,
    params = segments,
    params_floats = floats,
    mma_kind = c.kind,
    variants = variants,
    left_out = ctx.left_out,  -- "strategy: why", those that do not serve the model
  }
end
