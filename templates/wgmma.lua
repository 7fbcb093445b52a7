-- wgmma.lua: the warpgroup kernel (wgmma.cut), bf16 and fp16 on wgmma
-- (sm_90a, the arch-specific target: the runtime's and --arch sm_90a), the
-- Euler solver, D up to 160 and H up to 256 (each rounded up to 16): every
-- weight resident in shared memory (16-bit copies in the matrix units'
-- core-matrix layout), each warpgroup of a block owning 64 samples through
-- all steps, state and activations in registers.

local lib = import("lib")

local M = {name = "wgmma", template = "wgmma.cut"}

M.names = {"wgmma64", "wgmma"}
M.dials = {n = {64, 128}}  -- outputs a wgmma (default 128 where they split H evenly)

local ROWS = 64  -- samples a warpgroup
M.rows = ROWS

-- D and H rounded up to 16, and the block's shared memory: the three
-- 16-bit weight copies, then fp32 b1, W1's t column, b2, b3.
local function shape(spec)
  local Dp, Hp = lib.round_up(spec.dim, 16), lib.round_up(spec.hidden, 16)
  return Dp, Hp, 2 * (Hp * Dp + Hp * Hp + Dp * Hp) + 4 * (3 * Hp + Dp)
end

-- The model family: the seed's depth, any activation and time, no
-- conditioning (plan.lua leaves it out for the others).
function M.serves(ctx) return lib.serves(ctx.spec, {act = true, sin = true}) end

function M.applies(ctx)
  local spec = ctx.spec
  if spec.arch ~= 90 or not spec.arch_specific then return false, "sm_90a only" end
  if spec.solver ~= "euler" then return false, "Euler only" end
  if spec.precision ~= "bf16" and spec.precision ~= "fp16" then return false, "bf16 and fp16 only" end
  -- D up to 160: the state's registers (D / 2) and layer 1's operand
  -- (D / 4) on top of H's; larger D spill some shapes.
  local Dp, Hp, shared = shape(spec)
  if Dp > 160 or Hp > 256 then return false, "D over 160 or H over 256" end
  if shared > ctx.device.shared_per_block then return false, "the weights exceed shared memory" end
  return true
end

-- groups: warpgroups a block (2; 1 for the one-warpgroup variant
-- "wgmma64", whose blocks spread a batch of up to 64 x SMs over every SM).
function M.variant(ctx, groups)
  local Dp, Hp, shared = shape(ctx.spec)
  -- 128 outputs a wgmma where they split H evenly (a wgmma of 128 and one
  -- of the rest spill some shapes), else 64.
  local n = ctx.tune:dial(M.name, "n", (Hp <= 128 or Hp % 128 == 0) and 128 or 64)
  return lib.variant(ctx.spec, {module = M.name, name = groups == 2 and "wgmma" or "wgmma" .. ROWS * groups,
                                template = M.template, reads = {"wgmma"}},
                     {threads = 128 * groups, rows = ROWS * groups, blocks = 1, shared = shared}, {
    dim_pad = Dp, hidden_pad = Hp, groups = groups, n_chunk = n,
  })
end

-- The 16-bit copies of W1, W2, W3 in wgmma's layout (D, H rounded up to
-- 16), one block of params, copied into shared memory as one.
function M.segments(ctx)
  local Dp, Hp = shape(ctx.spec)
  local kind = ctx.spec.precision
  local what = kind .. " copy of W%d for wgmma: %d outputs x %d inputs, 8 x 8 core matrices"
  local out = {
    {name = "w1g", count = Hp * Dp // 2, what = string.format(what, 1, Hp, Dp)},
    {name = "w2g", count = Hp * Hp // 2, what = string.format(what, 2, Hp, Hp)},
    {name = "w3g", count = Dp * Hp // 2, what = string.format(what, 3, Dp, Hp)},
  }
  for _, s in ipairs(out) do s.owner, s.kind, s.dim_pad, s.hidden_pad = M.name, kind, Dp, Hp end
  return out
end

return M
