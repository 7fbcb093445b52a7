-- lib.lua: what the planner and the strategy modules share: arithmetic,
-- the solvers' tableaus, and the fields every variant gives.

local M = {}

function M.round_up(x, m) return (x + m - 1) // m * m end

function M.pow2_floor(x)
  local p = 1
  while p * 2 <= x do p = p * 2 end
  return p
end

function M.is_pow2(x) return x >= 1 and x & (x - 1) == 0 end

-- Explicit Runge-Kutta schemes (Butcher tableaus with only a subdiagonal):
-- stage i evaluates the velocity at x + dt a[i] k[i-1], time (k + c[i]) / S,
-- and the step is x + dt sum b[i] k[i].  Euler is one stage at the midpoint
-- time, the PyTorch contract.
M.solvers = {
  euler = {name = "euler", c = {0.5}, a = {0}, b = {1}},
  midpoint = {name = "midpoint", c = {0, 0.5}, a = {0, 0.5}, b = {0, 1}},
  heun = {name = "heun", c = {0, 1}, a = {0, 1}, b = {0.5, 0.5}},
  rk4 = {name = "rk4", c = {0, 0.5, 0.5, 1}, a = {0, 0.5, 0.5, 1},
         b = {1 / 6, 1 / 3, 1 / 3, 1 / 6}},
}

-- The model family: velocity = Linear(D + T + C, H), act, Linear(H, H),
-- act, ..., Linear(H, D) (L Linear layers) on the concatenation of x, the
-- time features tau(t) (T of them) and the conditioning c (C values), in
-- the order spec.input names.  The C side gives the fields; a field it
-- leaves out is the seed's (C = 0, L = 3, SiLU, raw time, x,t,c, no
-- guidance).  Fills them in once, with what follows from them:
--   time_width   T (1 for raw time, K for sin:K)
--   in_width     D + T + C, W1's inputs
--   columns      {x =, t =, c =}: the first column of each part in W1
--   seed         whether the model is the seed's (whose source, packing and
--                interfaces stay as they were before the family)
M.ACTIVATIONS = {silu = true, gelu = true, gelu_tanh = true, relu = true, tanh = true}

function M.family(spec)
  if spec.family_resolved then return spec end
  spec.cond = spec.cond or 0
  if spec.layers == nil or spec.layers == 0 then spec.layers = 3 end
  spec.act = spec.act or "silu"
  local time = spec.time or {}
  local features = time.features or 0
  local scale = time.scale or 0
  if scale == 0 then scale = 1000 end
  spec.time = {features = features, scale = scale}
  if spec.input == nil or spec.input == "" then spec.input = "xtc" end
  spec.guidance = spec.guidance or false
  local function bad(what) refuse("model: " .. what) end
  if math.type(spec.cond) ~= "integer" or spec.cond < 0 or spec.cond > 4096 then
    bad("cond must be a whole number from 0 to 4096")
  end
  if math.type(spec.layers) ~= "integer" or spec.layers < 2 or spec.layers > 8 then
    bad("layers must be a whole number from 2 to 8")
  end
  if not M.ACTIVATIONS[spec.act] then bad("no activation " .. tostring(spec.act)) end
  if math.type(features) ~= "integer" or features < 0 or features > 1024 or features % 2 ~= 0 then
    bad("sin time features must be an even number from 2 to 1024")
  end
  if type(scale) ~= "number" or not (scale > 0 and scale < math.huge) then
    bad("the sin time scale must be a positive finite number")
  end
  if type(spec.guidance) ~= "boolean" or (spec.guidance and spec.cond == 0) then
    bad("guidance needs a conditioning (cond > 0)")
  end
  local input, seen = spec.input, {}
  if type(input) ~= "string" or #input ~= 3 then bad("input must be an order of x, t and c") end
  local T, C = features > 0 and features or 1, spec.cond
  local width = {x = spec.dim, t = T, c = C}
  local columns, at = {}, 0
  for i = 1, 3 do
    local part = string.sub(input, i, i)
    if not width[part] or seen[part] then bad("input must be an order of x, t and c") end
    seen[part] = true
    columns[part] = at
    at = at + width[part]
  end
  spec.time_width, spec.in_width, spec.columns = T, at, columns
  spec.seed = spec.cond == 0 and spec.layers == 3 and spec.act == "silu" and features == 0
      and input == "xtc" and not spec.guidance
  spec.family_resolved = true
  return spec
end

-- Whether a strategy serves the spec's member of the family, and if not
-- why: `can` names what it serves beyond the seed (every strategy serves
-- any input order, a permutation of W1's columns at packing):
--   depth     any L (else 3 only)
--   act       every activation (else SiLU only)
--   sin       sin time (else raw only)
--   cond      conditioning (C > 0)
--   guidance  classifier-free guidance
function M.serves(spec, can)
  if spec.layers ~= 3 and not can.depth then return false, "L = 3 only" end
  if spec.cond > 0 and not can.cond then return false, "no conditioning (C = 0 only)" end
  if spec.guidance and not can.guidance then return false, "no guidance" end
  if spec.act ~= "silu" and not can.act then return false, "SiLU only" end
  if spec.time.features > 0 and not can.sin then return false, "raw time only" end
  return true
end

-- The fp32 activation function a kernel calls (activation.cut defines it).
function M.act_name(spec) return spec.act == "silu" and "silu" or "act" end

-- Each form's activation function (activation.cut): fp32, half2 (a 16-bit
-- pair given halved), tf32 (given halved).
function M.act_names(spec)
  if spec.act == "silu" then return {fp32 = "silu", half2 = "silu2", tf32 = "silu_tf32"} end
  return {fp32 = "act", half2 = "act2", tf32 = "act_tf32"}
end

-- A number's shortest decimal form that reads back exactly.
function M.decimal(x)
  local whole = math.tointeger(x)
  if whole and math.abs(whole) < 1 << 53 then return tostring(whole) end
  for digits = 1, 17 do
    local s = string.format("%." .. digits .. "g", x)
    if tonumber(s) == x then return s end
  end
  return string.format("%.17g", x)
end

-- A C double literal of x that reads back exactly.
function M.double_literal(x)
  local s = M.decimal(x)
  if not string.find(s, ".") and not string.find(s, "e") then s = s .. ".0" end
  return s
end

-- The time spec as the flags write it: raw, sin:K or sin:K:SCALE.
function M.time_text(spec)
  local t = spec.time
  if t.features == 0 then return "raw" end
  if t.scale == 1000 then return "sin:" .. t.features end
  return "sin:" .. t.features .. ":" .. M.decimal(t.scale)
end

-- The flags of the model's fields that are not the seed's, as the CLI
-- takes them (" --cond 512 --act gelu").
function M.family_flags(spec)
  local out = {}
  if spec.cond > 0 then out[#out + 1] = " --cond " .. spec.cond end
  if spec.layers ~= 3 then out[#out + 1] = " --layers " .. spec.layers end
  if spec.act ~= "silu" then out[#out + 1] = " --act " .. spec.act end
  if spec.time.features > 0 then out[#out + 1] = " --time " .. M.time_text(spec) end
  if spec.input ~= "xtc" then
    local s = spec.input
    out[#out + 1] = " --input " .. string.sub(s, 1, 1) .. "," .. string.sub(s, 2, 2) .. "," .. string.sub(s, 3, 3)
  end
  if spec.guidance then out[#out + 1] = " --guidance" end
  return table.concat(out)
end

-- Rows a sample of the hidden layers' activations: with guidance (and a
-- hidden layer between the first and the last) two, the conditional row
-- and the unconditional one; else one.
function M.hidden_rows(spec)
  return spec.guidance and spec.layers > 2 and 2 or 1
end

-- The extra parameters of a sampling kernel after params: with
-- conditioning, the conditioning kernel's output and the guidance weight.
-- cond_bias is neither __restrict__ nor read by __ldg (lib.cond_load).
function M.sampler_params(spec)
  if spec.cond == 0 then return "" end
  return ", const float* cond_bias, float guidance"
end

-- Whether the sampling kernels of a conditional model wait for the
-- conditioning kernel with griddepcontrol.wait (sm_90 on): the runtime
-- launches them as its programmatic dependents (PDL), so that their
-- prologue (the weights' loads) overlaps it; each waits before its first
-- read of cond_bias.  Launched plainly (the host launcher), the wait is a
-- no-op.
function M.pdl(spec) return spec.cond > 0 and spec.arch >= 90 end

-- A read of cond_bias at the address `at` (C text): a plain load.  The
-- conditioning kernel may still be writing cond_bias when the sampler
-- starts (lib.pdl), and ptxas moves non-coherent loads (__ldg, or a const
-- __restrict__ pointer's: taken for constant through the kernel) above
-- griddepcontrol.wait: the cluster kernel's first rows read stale biases
-- now and then (seen in its SASS and on the GPU); plain loads stay after it.
function M.cond_load(at) return "*(" .. at .. ")" end

-- The wait (lib.pdl), at `indent`.
function M.cond_wait(indent)
  return indent .. 'asm volatile("griddepcontrol.wait;" ::: "memory");  // the conditioning kernel\'s output is in'
end

-- gemm on wgmma's outputs the widest tile of a layer of `outputs` outputs:
-- 256, or the least power of 2 from 32 that holds them (a narrow last
-- layer: fewer products of padding).
function M.wg_tile_outputs(outputs)
  if outputs >= 256 then return 256 end
  local n = 32
  while n < outputs do n = n * 2 end
  return n
end

-- ... and its weights come in blocks of a chunk's inputs x this many
-- outputs (the tile's width, up to 128): a tile of 256 outputs is two
-- blocks, and one of 128 (the kernel's narrower tiles where a layer's
-- widest leave SMs idle) a block of its own.
function M.wg_block_outputs(outputs)
  return math.min(M.wg_tile_outputs(outputs), 128)
end

-- Layer l's inputs and outputs (l = 1 to L): W1 is applied to x alone
-- (its time and conditioning columns are biases: params.lua).
function M.layer_shape(spec, l)
  local D, H = spec.dim, spec.hidden
  if l == 1 then return D, H end
  if l == spec.layers then return H, D end
  return H, H
end

-- Bytes of the weights each velocity evaluation reads (W1 with its t
-- column, the hidden layers', the last layer's): the conditioning columns
-- are read once a launch and sin time's once a pack, not a step.
function M.weight_bytes(spec)
  local D, H = spec.dim, spec.hidden
  local L = spec.layers or 3
  return 4 * ((D + 1) * H + (L - 2) * H * H + H * D)
end

-- A variant: the fields every variant gives the runtime and the host
-- launcher (see launch.lua; the planner adds the batch range, params_bytes
-- and the cooperative launch's fallback), plus its template's own in
-- `extra`.  what: {module, name, template, reads (the owners of the
-- packed copies it reads besides the model's segments: params.lua)};
-- launch: {threads, rows, blocks (a cluster), shared (bytes), per_sm (a
-- persistent grid's blocks a SM)}.
function M.variant(spec, what, launch, extra)
  local v = {
    strategy = what.name,
    module = what.module,
    namespace = what.name,
    template = what.template,
    reads = what.reads or {},
    symbol = spec.symbol .. "_" .. what.name,
    pack_symbol = spec.symbol .. "_pack",
    min_batch = 0, max_batch = -1,
    block_threads = launch.threads,
    rows_per_block = launch.rows,
    cluster_blocks = launch.blocks,
    shared_bytes = launch.shared,
    pack_threads = 256,
    -- the conditioning kernel (family.cut: written for 256 threads; 2
    -- blocks an SM are resident, its tiles taken in turn)
    cond_threads = spec.cond > 0 and 256 or 0,
    cond_blocks_per_sm = spec.cond > 0 and 2 or 0,
    grid_blocks_per_sm = launch.per_sm or 0,
  }
  for k, value in pairs(extra) do v[k] = value end
  return v
end

return M
