-- cluster.lua: the cluster kernel (cluster.cut), the small-batch strategy
-- in fp32 whatever the precision: a thread-block cluster per `rows`
-- samples, every weight in registers across the cluster for the whole run,
-- one exchange of partials a step through distributed shared memory.

local lib = import("lib")

local M = {name = "cluster", template = "cluster.cut"}

M.dials = {blocks = {2, 4, 8, 16}}  -- blocks a cluster (default 4)

local ROWS = {1, 2, 3, 4, 6, 8}  -- samples a cluster, one variant each

M.names = {}
for _, b in ipairs(M.dials.blocks) do
  for _, r in ipairs(ROWS) do M.names[#M.names + 1] = string.format("cluster%d_r%d", b, r) end
end

-- The weights a thread keeps in registers, array by array, in the order of
-- its thread-major copy in params (segment wc, or wcf where layer 3 is
-- folded): float4 c of thread t of block r at (r W + c) T + t (W float4s a
-- thread, T threads a block), so that each of a warp's loads is 512
-- contiguous bytes.  cluster.cut declares and loads the arrays, and packs
-- them.  Each array: its name, its C dimensions, the matrix it holds (w1,
-- w2, w3 or m = W1[:, :D] W3) and element n's output and input there, C
-- expressions of rank, tid and n.
local function thread_weights(D, H, blocks, lanes3, by_warp, fold)
  local J, L2, L3 = H // blocks, blocks, lanes3
  local opw = 32 // L3  -- layer 3's outputs a warp
  local arrays = {}
  local function add(name, dims, matrix, out, input, what)
    arrays[#arrays + 1] = {name = name, dims = dims, matrix = matrix, out = out, input = input, what = what}
  end
  if fold then
    add("w1", {D}, "w1", "tid", "n", "layer 1: unit tid (z at the start only)")
    add("wm", {J}, "m", "tid", string.format("%d * rank + n", J), "the fold: row tid of M, the own units' columns")
  else
    add("w1", {2, D // 2}, "w1", string.format("tid - tid %% 2 + n / %d", D // 2),
        string.format("8 * (n %% %d / 4) + 4 * (tid %% 2) + n %% 4", D // 2),
        "layer 1: units tid - tid % 2 and + 1, inputs 8 c + 4 (tid % 2) to + 3")
  end
  if by_warp then
    add("w2", {J // 32, 32}, "w2", string.format("%d * rank + %d * (tid %% 32) + n / 32", J, J // 32),
        "32 * (tid / 32) + n % 32", "layer 2: own units kUnits2 lane to + kUnits2 - 1, inputs 32 warp to + 31")
  else
    add("w2", {H // L2}, "w2", string.format("%d * rank + tid / %d", J, L2),
        string.format("4 * (tid %% %d + %d * (n / 4)) + n %% 4", L2, L2), "layer 2: own unit `unit`, lane `lane2`'s inputs")
  end
  add("w3", {J // L3}, "w3", string.format("tid / 32 * %d + tid %% %d", opw, opw),
      string.format("%d * rank + 4 * (tid %% 32 / %d + %d * (n / 4)) + n %% 4", J, opw, L3),
      "layer 3: output `out`, lane `lane3`'s own inputs")
  local per_thread = 0
  for _, a in ipairs(arrays) do
    a.first = per_thread  -- float index in the thread's list (a multiple of 4)
    a.count = 1
    for _, d in ipairs(a.dims) do a.count = a.count * d end
    per_thread = per_thread + a.count
  end
  return {segment = fold and "wcf" or "wc", fold = fold, arrays = arrays, threads = H,
          floats_per_thread = per_thread, floats = blocks * H * per_thread}
end

-- The variant of `rows` samples a cluster, folded where `fold` asks and
-- it fits; nil where the shape does not split evenly or its weights do not
-- fit the registers.
--
-- Layer 2 by warp where own units come in 32s: each warp takes the 32
-- units of h1 it computed for every own unit, the warps' partials summed
-- in shared memory, so every shared load of h1 is a broadcast (by lanes, a
-- load reads kLanes2 addresses).  The fold (Euler, layer 2 by warp):
-- layer 3 and the next step's layer 1 are one linear map, so a step loses
-- layer 3 and the Euler barrier but each block receives H-wide partials.
local function layout(ctx, blocks, rows, fold)
  local spec = ctx.spec
  local D, H = spec.dim, spec.hidden
  local threads = H  -- layer 1: a thread per hidden unit
  if not ctx.device.clusters or H % 32 ~= 0 or H > 1024 or D % 4 ~= 0 then return nil end
  if not lib.is_pow2(blocks) or blocks > 16 or H % (4 * blocks) ~= 0 then return nil end
  local own, lanes2 = H // blocks, blocks
  if threads % D ~= 0 then return nil end
  local lanes3 = threads // D
  -- (own % (4 lanes3) == 0 makes D a multiple of 8: layer 1 by pairs of lanes)
  if not lib.is_pow2(lanes3) or lanes3 > 8 or own % (4 * lanes3) ~= 0 then return nil end
  local by_warp = own % 32 == 0
  local weights_per_thread = D + H // lanes2 + own // lanes3
  -- Guided, h1 and layer 2's partials hold two rows a sample (its
  -- conditional and its null one), h2 the blend of the two (one).
  local hrows = spec.guidance and 2 * rows or rows
  local static_shared = 4 * rows * (D + own + 2 * blocks * D) + 4 * hrows * (H + (by_warp and threads // 32 * own or 0)) + 16
  if weights_per_thread > 160 or static_shared > 48 * 1024 then return nil end
  fold = fold and by_warp and #ctx.solver.c == 1 and 2 * own + own // lanes3 <= 160
      and static_shared + 4 * rows * 2 * blocks * (H - D) <= 48 * 1024
  return lib.variant(spec, {module = M.name, name = string.format("cluster%d_r%d", blocks, rows),
                            template = M.template, reads = {"cluster"}},
                     {threads = threads, rows = rows, blocks = blocks, shared = 0}, {
    own = own,
    lanes2 = lanes2, lanes3 = lanes3,
    layer2_by_warp = by_warp,
    fold = fold or false,
    -- a block's own partial stays in registers, not sent to itself
    own_local = fold or false,
    thread_weights = thread_weights(D, H, blocks, lanes3, by_warp, fold or false),
  })
end

-- The model family: the seed's depth, any activation, time, conditioning
-- and guidance (plan.lua leaves it out for the others).
function M.serves(ctx) return lib.serves(ctx.spec, {act = true, sin = true, cond = true, guidance = true}) end

local function blocks_of(ctx) return ctx.tune:dial(M.name, "blocks", 4) end

function M.applies(ctx)
  if not ctx.device.clusters then return false, "no thread-block clusters" end
  if not layout(ctx, blocks_of(ctx), 1, false) then
    return false, "the shape does not split over a cluster, or a thread's weights exceed its registers"
  end
  return true
end

-- The clusters the GPU runs at once.
function M.at_once(ctx)
  return ctx.device.clusters_at_once[blocks_of(ctx)] or 4
end

-- The variants, a sample a cluster first, each up to one wave of clusters
-- (rows x at_once) from the first batch the ones before leave, each after
-- `first` - 1; up to batch `cap` (nil: all of them, the last over `waves`
-- waves).  Folded where H <= 128, at one sample a cluster or wherever H <=
-- 2 D (measured faster there on an H200).
function M.chain(ctx, first, cap, waves)
  local spec = ctx.spec
  local blocks, at_once = blocks_of(ctx), M.at_once(ctx)
  local probe = spec.hidden <= 128 and layout(ctx, blocks, 1, true)
  local fold = probe and probe.fold
  local covered, out = first - 1, {}
  for _, rows in ipairs(ROWS) do
    -- Guided, a sample takes two rows through the hidden layers: up to 4
    -- samples a cluster (8 rows, the unguided registers' most).
    if spec.guidance and rows > 4 then break end
    if cap and covered >= cap then break end
    local limit = cap and math.min(cap, rows * at_once) or rows * at_once
    local v = layout(ctx, blocks, rows, fold and (rows == 1 or spec.hidden <= 2 * spec.dim))
    if v and limit > covered and ctx.tune:allows(M.name, v.strategy) then
      v.min_batch, v.max_batch = covered + 1, limit
      out[#out + 1] = v
      covered = limit
    end
  end
  if not cap and #out > 0 then
    local last = out[#out]
    last.max_batch = last.rows_per_block * at_once * waves
  end
  return out
end

-- The packed segments of the variants' thread-major copies (wc, or wcf
-- and c = W1[:, :D] b3 where folded), in segment order.
function M.segments(ctx, variants)
  local copies, seen = {}, {}
  for _, v in ipairs(variants) do
    local c = v.thread_weights
    if c and not seen[c.segment] then
      seen[c.segment] = true
      copies[#copies + 1] = c
    end
  end
  table.sort(copies, function(a, b) return a.segment < b.segment end)
  local out = {}
  for _, c in ipairs(copies) do
    out[#out + 1] = {name = c.segment, count = c.floats, owner = M.name, copy = c, what = string.format(
      "the cluster kernel's weights%s by thread: float4 c of thread t of block r at (%d r + c) %d + t",
      c.fold and " (folded)" or "", c.floats_per_thread // 4, c.threads)}
    if c.fold then
      out[#out + 1] = {name = "w1b3", count = ctx.spec.hidden, owner = M.name,
                       what = "c = W1[:, :D] b3 (fp64, rounded)"}
    end
  end
  return out
end

return M
