-- rmma.lua: the register-resident kernel (rmma.cut), small batches of
-- bf16 and fp16 (any solver; sm_80 and newer) and of tf32 over a cluster
-- (sm_90, Euler): a block (a cluster) of H / 16 warps a group of 8
-- samples, the weights as mma.sync A operands in registers for the whole
-- run.  Its packed copies (the weights in fragment order) serve rmma3 too.

local lib = import("lib")

local M = {name = "rmma", template = "rmma.cut"}

M.names = {"rmma", "rmma_c2", "rmma_c4"}
M.dials = {}

local ROWS = 8  -- samples a block (the n of an m16n8k16 mma)
M.rows = ROWS

-- The layout over a cluster of C blocks (C = 1: one block): 16-unit tiles
-- a warp (mw), W1 in registers or shared memory, the block's threads and
-- shared memory; nil where a thread's registers cannot hold its weights.
-- Two tiles a warp only where that leaves 8 warps or more (a warp's work
-- is serial, on one of the SM's four schedulers); W1 in registers where
-- they hold it.  Over a cluster (tf32, whose weights take twice the
-- registers): every block computes layer 1 in full, owns 1/C of layer 2's
-- tiles (one a warp) and the same share of layer 3's inputs, and sends its
-- warps' partial sums of v to every block, which add b3 and the C sums in
-- rank order: every block keeps the same x.
local function layout(ctx, C)
  local spec = ctx.spec
  local Dp, Hp = lib.round_up(spec.dim, 16), lib.round_up(spec.hidden, 16)
  local es = spec.precision == "tf32" and 4 or 2  -- bytes a weight copy's element
  local tiles = Hp // 16
  local widths = tiles % 2 == 0 and tiles // 2 >= 8 and {2, 1} or {1}
  local places = {true, false}  -- W1 in registers, then in shared memory
  if C > 1 then
    if not ctx.device.clusters or spec.solver ~= "euler" then return nil end
    widths = {1}
  end
  for _, mw in ipairs(widths) do
    if tiles % (mw * C) == 0 then
      local warps = tiles // (mw * C)
      local threads = 32 * warps
      for _, w1_regs in ipairs(places) do
        -- Shared memory: W1 (16-bit or tf32) unless in registers, layer 3's
        -- partials (a Dp x 8 fp32 tile a warp), the B operands of x and h1;
        -- over a cluster, the blocks' sums of the partials (two steps'
        -- worth) and two mbarriers.
        local shared = (w1_regs and 0 or es * Hp * Dp) + 4 * warps * Dp * 8 + es * (Dp + Hp) * 8
            + (C > 1 and 2 * C * 4 * Dp * 8 + 16 or 0)
        -- Registers a thread: its fragments of W1 (C mw Dp / 4, where there),
        -- W2 (mw Hp / 4) and W3 (mw Dp / 4), twice that in tf32; 3 for one
        -- state element, 8 an element (9 with a stage sum) and 2 a warp (the
        -- update's loads in flight) for several, at most 8; 42 more (fitted
        -- to ptxas 13.0's counts on sm_90, spills included).  Over a cluster
        -- a thread takes whole float4s of v (4 elements each).
        local per_thread = C > 1 and 4 * ((2 * Dp + threads - 1) // threads)
            or (8 * Dp + threads - 1) // threads
        local multi = #ctx.solver.c > 1
        local elements = per_thread == 1 and 3
            or (multi and 9 or 8) * per_thread + 2 * warps
        -- tf32: and layer 1's accumulators past two tiles a warp (8 a tile)
        local regs = mw * (Hp + Dp + (w1_regs and C * Dp or 0)) * es // 8 + elements + 42 + 8 * (mw - 1)
            + (es == 4 and 8 * math.max(0, C * mw - 2) or 0)
        local limit = math.min(255, 65536 // threads // 8 * 8)
        if regs <= limit and threads <= 1024 and per_thread <= 8
            and (C == 1 or shared <= ctx.device.shared_per_block) then
          return {dim_pad = Dp, hidden_pad = Hp, warp_tiles = mw, w1_regs = w1_regs,
                  threads = threads, shared = shared, cluster = C,
                  name = C > 1 and "rmma_c" .. C or "rmma"}
        end
      end
    end
  end
  return nil
end

-- The model family: the seed's depth, any activation and time, no
-- conditioning (plan.lua leaves it out for the others).
function M.serves(ctx) return lib.serves(ctx.spec, {act = true, sin = true}) end

-- The layout where the kernel applies (bf16, fp16: one block; tf32: over
-- clusters of 2, else 4, the first that fits), else nil and why not.
function M.layout(ctx)
  local spec = ctx.spec
  if spec.arch < 80 then return nil, "mma.sync from sm_80" end
  local l
  if spec.precision == "tf32" then
    if not ctx.device.clusters or spec.solver ~= "euler" then
      return nil, "tf32 over clusters: sm_90 and Euler only"
    end
    l = layout(ctx, 2) or layout(ctx, 4)
  elseif spec.precision == "bf16" or spec.precision == "fp16" then
    l = layout(ctx, 1)
  else
    return nil, "bf16, fp16 and tf32 only (fp32: rmma3)"
  end
  if not (l and l.shared <= ctx.device.shared_per_block) then
    return nil, "the weights do not fit a thread's registers"
  end
  return l
end

-- The batches it takes: two waves of blocks (one a SM) in bf16 and fp16;
-- five waves of clusters of 2 in tf32 (measured faster than the cluster
-- kernel and than the matrix-unit kernels up to there on an H200).
function M.last(ctx, l)
  local sms = ctx.device.sms
  if l.cluster > 1 then return 5 * (sms // 2) * ROWS end
  return 2 * ROWS * sms
end

-- The samples a cluster of the cluster kernel's variants before it (0:
-- none): in tf32 up to 3 whatever D; in bf16 and fp16 one where D >= 64
-- (rmma's layers 1 and 3 grow with D, the cluster kernel's step barely
-- does).
function M.clusters_before(ctx, l)
  if l.cluster > 1 then return 3 end
  return ctx.spec.dim >= 64 and 1 or 0
end

function M.variant(ctx, l)
  return lib.variant(ctx.spec, {module = l.module or M.name, name = l.name, template = l.template or M.template,
                                reads = {"rmma"}},
                     {threads = l.threads, rows = l.rows or ROWS, blocks = l.cluster, shared = l.shared},
                     {dim_pad = l.dim_pad, hidden_pad = l.hidden_pad, warp_tiles = l.warp_tiles,
                      w1_regs = l.w1_regs})
end

-- The copies of W1, W2, W3 in fragment order (D, H rounded up to Dp, Hp),
-- one after another (each part's three are one block of params): kind
-- bf16 or fp16 (16-bit pairs), tf32, or fp32 (tf32x3: the high parts, then
-- the low ones).
function M.segments(ctx, kind, Dp, Hp)
  local out = {}
  local function copies(tag, copy, layout)
    local what = copy .. " copy of W%d for " .. layout
    local per = copy == "tf32" and 1 or 2  -- elements a float
    out[#out + 1] = {name = "w1" .. tag, count = Hp * Dp // per, what = string.format(what, 1, Hp, Dp)}
    out[#out + 1] = {name = "w2" .. tag, count = Hp * Hp // per, what = string.format(what, 2, Hp, Hp)}
    out[#out + 1] = {name = "w3" .. tag, count = Dp * Hp // per, what = string.format(what, 3, Dp, Hp)}
  end
  local tf32_frag = "mma.sync: %d outputs x %d inputs, 16 x 8 tiles in fragment order, inputs 2 p and 2 p + 1 as k = p and p + 4"
  if kind == "fp32" then  -- tf32x3: the high parts, then the low ones
    copies("r", "tf32", tf32_frag .. ", high parts")
    copies("rl", "tf32", tf32_frag .. ", low parts (each weight less its high part)")
  else
    copies("r", kind, kind == "tf32" and tf32_frag
           or "mma.sync: %d outputs x %d inputs, 16 x 16 tiles in fragment order")
  end
  for _, s in ipairs(out) do s.owner, s.kind, s.dim_pad, s.hidden_pad = M.name, kind, Dp, Hp end
  return out
end

return M
