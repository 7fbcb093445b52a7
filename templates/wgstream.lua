-- wgstream.lua: the streamed warpgroup kernel (wgstream.cut), tf32 and fp32
-- (as tf32x3: wgstream3) on wgmma (sm_90a, Euler), D up to 64 and H up to
-- 256 (rounded up to 16 and 32).  The weights (4 bytes each: more than a
-- block's shared memory) stream from L2 through a ring of shared-memory
-- stages (bulk copies completing on mbarriers, issued by a producer
-- warpgroup) in the order the products use them, over a cluster of 2
-- blocks each copying half of every piece into both (multicast: half the
-- L2 reads).  Layer 2 goes by chunks of n_chunk outputs, each chunk's SiLU
-- at once the A operand of layer 3's inputs there (h2 is never whole).
-- tf32: 2 consumer warpgroups a block, h1 in registers.  fp32: the
-- weights' high and low parts streamed together, one consumer warpgroup
-- (h1's low part in shared memory), 32 outputs a chunk, the next chunk's
-- layer 2 in flight during a chunk's SiLU, blocks alone.

local lib = import("lib")

local M = {name = "wgstream", template = "wgstream.cut"}

M.names = {"wgstream", "wgstream3"}
M.dials = {
  n = {32, 64},      -- layer 2's outputs a chunk, tf32 (default 64 where they split H)
  blocks = {1, 2},   -- blocks a cluster (default 2 in tf32, 1 in fp32)
}

local GROUPS = 2  -- tf32's consumer warpgroups

-- The model family: the seed's depth, any activation, time and
-- conditioning; guidance in fp32 (plan.lua leaves it out for the others).
-- Guided, a sample's conditional and unconditional rows are rows g and
-- g + 8 of a warp's 16, held by the same thread: each warpgroup owns 32
-- samples.  (tf32's conditional form spills at D=64, H=256, guided or
-- not: guidance stays with the mma kernel there.)
function M.serves(ctx)
  return lib.serves(ctx.spec, {act = true, sin = true, cond = true, guidance = ctx.spec.precision == "fp32"})
end

-- The layout, else nil and why not.
function M.layout(ctx)
  local spec = ctx.spec
  if spec.arch ~= 90 or not spec.arch_specific then return nil, "sm_90a only" end
  if spec.solver ~= "euler" then return nil, "Euler only" end
  local split = spec.precision == "fp32"  -- tf32x3
  if spec.precision ~= "tf32" and not split then return nil, "tf32 and fp32 only" end
  local Dp, Hp = lib.round_up(spec.dim, 16), lib.round_up(spec.hidden, 32)
  if Dp > 64 or Hp > 256 then return nil, "D over 64 or H over 256" end
  -- fp32 is pipelined (the next chunk's layer 2 in flight during a
  -- chunk's SiLU), 32 outputs a chunk; tf32 is not
  local pipelined = split
  local nc = ctx.tune:dial(M.name, "n", Hp % 64 == 0 and not pipelined and 64 or 32)
  if split then nc = 32 end
  if Hp % nc ~= 0 then return nil, "H splits into no chunks of " .. nc end
  local cluster = ctx.tune:dial(M.name, "blocks", (split or not ctx.device.clusters) and 1 or 2)
  if cluster > 1 and not ctx.device.clusters then
    refuse("tune: wgstream.blocks=" .. cluster .. ": the device has no clusters")
  end
  local kc = math.min(128, Hp)
  -- W1's inputs a piece: tf32 32 where D allows and the pieces are no
  -- larger than W2's, fp32 16
  local k1 = 32
  if split or Dp % k1 ~= 0 or Hp * k1 > nc * kc then k1 = 16 end
  -- The pieces of one velocity evaluation (each one contiguous in params'
  -- segment ws, in this order): layer 1 by k1 inputs (all outputs), then
  -- for each chunk of layer 2's outputs its inputs by 128 (kc) and layer
  -- 3's weights on the chunk's outputs.
  local pieces, offset, largest = {}, 0, 0
  local function piece(layer, n0, n, k0, k)
    pieces[#pieces + 1] = {layer = layer, n0 = n0, n = n, k0 = k0, k = k, offset = offset}
    offset = offset + n * k
    largest = math.max(largest, 4 * n * k)
  end
  for k0 = 0, Dp - k1, k1 do piece(1, 0, Hp, k0, k1) end
  for n0 = 0, Hp - nc, nc do
    for k0 = 0, Hp - 1, kc do piece(2, n0, nc, k0, math.min(kc, Hp - k0)) end
    piece(3, 0, Dp, n0, nc)
  end
  if pipelined then
    -- the next chunk's layer 2 in flight during a chunk's SiLU: each
    -- chunk's W2 pieces streamed before the last chunk's W3 piece (params
    -- keeps them by chunk)
    local order, w3 = {}, nil
    for _, p in ipairs(pieces) do
      if p.layer == 3 then
        if w3 then order[#order + 1] = w3 end
        w3 = p
      else
        order[#order + 1] = p
      end
    end
    order[#order + 1] = w3
    pieces = order
  end
  -- Shared memory: the stages (split: a piece's high and low parts), h1's
  -- low part and a chunk's h2 low part (split), the state (fp32, Dp / 2 a
  -- consumer thread), b1, t column, b2, b3, then two mbarriers a stage
  -- (split: and the block's address, in 16 bytes).
  local groups = split and 1 or GROUPS
  local stage_bytes = (split and 2 or 1) * largest
  local fixed = (split and 4 * 64 * (Hp + nc) + 16 or 0) + 4 * (Dp // 2) * 128 * groups + 4 * (3 * Hp + Dp)
  local stages = math.min(16, (ctx.device.shared_per_block - fixed) // (stage_bytes + 16))
  -- A warpgroup holds every W1 piece (layer 1) or a chunk's W2 pieces
  -- (layer 2) before it releases one.
  if stages < math.max(Dp // k1, Hp // kc) then return nil, "too few stages fit shared memory" end
  -- tf32: warpgroup 1 starts each step's layer 1 once warpgroup 0's
  -- products are done, so that each one's SiLU of h1 (MUFU-bound) runs
  -- beside the other's products (measured faster on an H200); only where
  -- the ring is shorter than a step's pieces: warpgroup 0 then cannot take
  -- the next step's W1 (and end its layer 1 twice) before warpgroup 1 has
  -- started this step's.
  local stagger = not split and stages < #pieces
  return {dim_pad = Dp, hidden_pad = Hp, n_chunk = nc, k_chunk = kc, w1_k = k1, pieces = pieces, pipelined = pipelined,
          stagger = stagger,
          floats = offset, stage_bytes = stage_bytes, stages = stages, cluster = cluster,
          split = split, groups = groups, shared = stages * stage_bytes + fixed + 16 * stages}
end

function M.variant(ctx, l)
  return lib.variant(ctx.spec, {module = M.name, name = l.split and "wgstream3" or "wgstream",
                                template = M.template, reads = {"wgstream"}},
                     {threads = 128 * (l.groups + 1), rows = 64 * l.groups * l.cluster // (ctx.spec.guidance and 2 or 1),
                      blocks = l.cluster, shared = l.shared}, {
    dim_pad = l.dim_pad, hidden_pad = l.hidden_pad, n_chunk = l.n_chunk, k_chunk = l.k_chunk, w1_k = l.w1_k,
    pieces = l.pieces, stage_bytes = l.stage_bytes, stages = l.stages, split = l.split,
    stagger = l.stagger,
  })
end

-- The tf32 copy of the weights piece by piece as streamed (ws), and for
-- fp32 the low parts (wsl).
function M.segments(ctx, l)
  local out = {{name = "ws", count = l.floats, owner = M.name, layout = l,
    what = string.format("tf32 copy of W1, W2, W3 for wgmma, in %d pieces as streamed (D, H padded to %d, %d)%s",
                         #l.pieces, l.dim_pad, l.hidden_pad, l.split and ": their high parts" or "")}}
  if l.split then
    out[2] = {name = "wsl", count = l.floats, owner = M.name, layout = l,
              what = "the low parts of ws (each weight less its high part, as tf32)"}
  end
  return out
end

return M
