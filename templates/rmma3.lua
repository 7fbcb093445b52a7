-- rmma3.lua: fp32 at small and middle batches (rmma3.cut): rmma's cluster
-- form in tf32x3 (every product three tf32 products: fp32 accuracy), sm_90
-- and Euler.  The weights' high and low parts take four times bf16's
-- bytes, so a cluster of 4 blocks owns each 8 samples (rows = 8) or 16
-- (two n-tiles a weight operand: rows = 16): every block computes layer 1
-- in full (W1's parts in shared memory) and owns a quarter of layer 2's
-- m-tiles, two warps a tile, each over half of its inputs (W2's parts in
-- registers), and layer 3 over that warp's 8 units (W3's).  It reads rmma's
-- packed copies (kind fp32: high and low parts).

local lib = import("lib")

local M = {name = "rmma3", template = "rmma3.cut"}

M.names = {"rmma3_r8", "rmma3_r16"}
M.dials = {}

local CLUSTER = 4

-- The model family: the seed's depth, any activation and time, no
-- conditioning (plan.lua leaves it out for the others).
function M.serves(ctx) return lib.serves(ctx.spec, {act = true, sin = true}) end

-- The layout of `rows` samples a cluster (8 or 16), else nil and why not.
function M.layout(ctx, rows)
  local spec = ctx.spec
  if not ctx.device.clusters or spec.solver ~= "euler" then return nil, "sm_90 and Euler only" end
  -- (not where H < 64, whose few weights the tiled kernel streams quickly)
  if spec.hidden < 64 then return nil, "H < 64" end
  -- (H rounded up to 16 C, so that every block owns as many m-tiles: the
  -- padding's units have zero weights and biases)
  local C, N = CLUSTER, rows // 8
  local Dp, Hp = lib.round_up(spec.dim, 16), lib.round_up(spec.hidden, 16 * C)
  local own = Hp // 16 // C
  local warps = 2 * own
  -- Registers a thread: W2's and W3's parts, (H + D) / 2 (both padded), 3
  -- for each state element (whole float4s of v a thread), 4 for each of
  -- layer 3's output tiles a warp finishes (half of them), 12 more where D
  -- is padded, within 190; and not two float4s of the state where D / 16
  -- (layer 3's m-tiles) is odd (fitted to ptxas 13.0's counts on sm_90,
  -- spills included).
  local words = 2 * Dp * N  -- float4s of v
  local elements = 4 * ((words + 32 * warps - 1) // (32 * warps))
  local tiles3 = Dp // 16 * N
  local regs = (Hp + Dp) // 2 + 3 * elements + 4 * ((tiles3 + 1) // 2) + (Dp ~= spec.dim and 12 or 0)
  if regs > 190 or elements > 8 or (elements > 4 and (Dp // 16) % 2 == 1) then
    return nil, "the weights do not fit a thread's registers"
  end
  -- Shared memory: W1's parts (8 Hp Dp bytes), layer 3's partials (a
  -- tile pair's Dp x rows, fp32) and the blocks' sums of them (two steps'
  -- worth), the B operands of x and h1 (high and low parts), the tile
  -- pairs' swap of layer 2, two mbarriers.
  local shared = 8 * Hp * Dp + 16 * words * (own + 2 * C) + 64 * N * (Dp + Hp) + 256 * N * warps + 16
  if shared > ctx.device.shared_per_block then return nil, "W1 does not fit shared memory" end
  return {dim_pad = Dp, hidden_pad = Hp, threads = 32 * warps, shared = shared, cluster = C, rows = rows,
          elements = elements, module = M.name, template = M.template, name = "rmma3_r" .. rows}
end

-- By 16 samples a cluster only where each thread keeps at most 4 state
-- elements, and after two waves by 8 where its blocks have fewer than 6
-- warps (measured faster so on an H200).
local WIDE_ELEMENTS, WIDE_WARPS, NARROW_WAVES = 4, 6, 2

function M.wide(ctx)
  local l = M.layout(ctx, 16)
  return l and l.elements <= WIDE_ELEMENTS and l or nil
end

-- The last batch: four waves of clusters of 16 samples where by 16 is
-- planned; else by 8, the 8-row tiled kernel's last batch where wgstream3
-- follows it, four waves of 16 samples' worth where H > 128 and the tiled
-- kernel would follow, three waves otherwise (measured faster than what
-- follows up to there on an H200).
function M.last(ctx, narrow, wide, wgstream3)
  local at_once = ctx.device.clusters_at_once[CLUSTER]
  if wide then return 4 * at_once * 16 end
  if wgstream3 then return 8 * ctx.device.sms end
  return narrow.hidden_pad > 128 and 4 * at_once * 16 or 3 * at_once * 8
end

-- By 8 samples a cluster for one wave of clusters (two where the blocks by
-- 16 have fewer than 6 warps), where by 16 follows.
function M.narrow_last(ctx, wide)
  local waves = wide.threads < 32 * WIDE_WARPS and NARROW_WAVES or 1
  return 8 * ctx.device.clusters_at_once[CLUSTER] * waves
end

-- The cluster kernel's variants up to 8 samples a cluster come first.
function M.clusters_before() return 8 end

return M
