-- grid.lua: the grid strategy (grid.cut), small batches of shapes with
-- large weights: a persistent grid (a block a SM, launched cooperatively)
-- takes each layer in turn, in tiles of `rows` samples x a few outputs,
-- each block reading its tiles' weights from L2 once for its samples; the
-- activations go through a scratch area at the end of params.  The gemm
-- strategy (gemm.lua) shares the grid, its barrier and the scratch area.

local lib = import("lib")

local M = {name = "grid", template = "grid.cut"}

M.names = {"grid_b1", "grid_b8", "grid_b64"}

M.ROWS = 64  -- the most samples: the scratch area holds their activations

-- The scratch area: the grid barrier's counter (4 floats, at the start, so
-- that every variant finds it in the same place), then the activations.
M.SCRATCH_DATA = 4

-- Whether the grid variants hand the activations on in words of a value
-- and its layer's epoch (grid.cut's put_ll), no grid barrier between the
-- layers: every member but those with guidance (whose blend between the
-- last two layers reads another block's rows).
function M.ll(spec) return lib.hidden_rows(spec) == 1 end

-- Floats of the activations of `rows` samples in the scratch area: h1 and
-- h2 (rows of h_stride), and for multi-stage solvers ys and sums (rows of
-- x_stride); the gemm variant (state) keeps the state there too.
-- (With guidance the hidden activations take two rows a sample.)  The
-- grid variants' words of a value and an epoch take two floats: h1, h2,
-- the state's copy that layer 1 reads (xl) and ys; the sums one.
function M.scratch_activations(ctx, rows, x_stride, h_stride, state)
  local multi = #ctx.solver.c > 1
  if not state and M.ll(ctx.spec) then
    return rows * (4 * h_stride + 2 * x_stride + (multi and 3 or 0) * x_stride)
  end
  return rows * (2 * lib.hidden_rows(ctx.spec) * h_stride + ((multi and 2 or 0) + (state and 1 or 0)) * x_stride)
end

-- A layer's tile is as narrow as gives every SM a tile at max_batch (4
-- outputs at least; at most 32 threads across, each reading up to
-- max_width consecutive weights at a time, as the outputs divide).
local function layer(ctx, inputs, outputs, row_tiles, max_width)
  local width = outputs % 4 == 0 and 4 or outputs % 2 == 0 and 2 or 1
  width = math.min(width, max_width)
  local cols = 4
  while cols < 32 * width and row_tiles * ((outputs + cols - 1) // cols) > ctx.device.sms do cols = cols * 2 end
  width = math.min(width, cols // 4)
  return {inputs = inputs, outputs = outputs, tile_cols = cols, cols_per_thread = width}
end

-- The variant for batches up to max_batch in tiles of `rows` samples; nil
-- where its staging does not fit shared memory.  Within 128 registers a
-- thread keeps 4 groups of loads of 1 or 2 weights in flight (2 in
-- multi-stage kernels), or 1 of 4 (grid.cut): 4 weights a load from 9
-- samples (measured faster there on an H200, 2 below).
local function variant(ctx, rows, max_batch, w16)
  local spec = ctx.spec
  local D, H = spec.dim, spec.hidden
  local threads = 512
  local row_tiles = (max_batch + rows - 1) // rows
  local width = max_batch > 8 and 4 or 2
  local layers = {}
  for l = 1, spec.layers do
    local inputs, outputs = lib.layer_shape(spec, l)
    layers[l] = layer(ctx, inputs, outputs, row_tiles, width)
  end
  local max_cols = 0
  for _, l in ipairs(layers) do max_cols = math.max(max_cols, l.tile_cols) end
  local limit = ctx.device.shared_per_block
  -- Resident weights: a block's first tile of a layer (tile n goes to
  -- block n % gridDim.x: outputs (n % col_tiles) COLS on) is the same at
  -- every step, so its weights stay in shared memory, after the staging
  -- and the partial sums: layer by layer, while they fit (3% to 17%
  -- faster than from L2 at S=16, even at S=4: docs/performance.md).
  -- The offsets of the copies after `at` floats and the floats they take.
  local function copies(at)
    local offsets, kept = {}, 0
    for i, l in ipairs(layers) do
      local floats = l.inputs * l.tile_cols
      if 4 * (at + floats) <= limit then
        offsets[i], at, kept = at, at + floats, kept + floats
      end
    end
    return offsets, kept, at
  end
  -- The inputs staged at a time: a layer's whole input where that keeps
  -- as many weights resident as 1024 inputs do (one pass of polls a layer,
  -- not one a chunk: grid_b1 1.06x-1.16x faster at H >= 2048), else 1024
  -- (halved while the staging does not fit).
  local function bytes(chunk) return 4 * (rows * (chunk + 4) + threads // 32 * rows * max_cols) end
  local widest = 0
  for _, l in ipairs(layers) do widest = math.max(widest, l.inputs) end
  local chunk = math.min(1024, lib.round_up(widest, 4))
  while chunk > 128 and bytes(chunk) > limit do chunk = chunk // 2 end
  if bytes(chunk) > limit then return nil end
  -- (the staging's loads in flight take two registers a row and a load:
  -- 16 loads at most, as 8 rows of 1024 inputs; more spilled at D=17,
  -- H=4095)
  local whole = lib.round_up(widest, 4)
  if whole > chunk and bytes(whole) <= limit and rows * ((whole + threads - 1) // threads) <= 16
      and select(2, copies(bytes(whole) // 4)) >= select(2, copies(bytes(chunk) // 4)) then
    chunk = whole
  end
  local offsets, _, at = copies(bytes(chunk) // 4)
  for i, l in ipairs(layers) do l.cache = offsets[i] end
  local shared = 4 * at
  return lib.variant(spec, {module = M.name, name = "grid_b" .. max_batch, template = M.template,
                            reads = w16 and {"mma", "grid"} or {"grid"}},
                     {threads = threads, rows = rows, blocks = 1, shared = shared, per_sm = 1}, {
    max_batch = max_batch,
    batch_limit = M.ROWS,  -- the kernel serves no more (its scratch area)
    scratch_rows = M.ROWS,
    chunk = chunk,
    max_tile_cols = max_cols,
    layers = layers,
    x_stride = D, h_stride = H,
    scratch_data = M.SCRATCH_DATA,
    ll = M.ll(spec),
    -- bf16, fp16: the weights read from the mma kernel's 16-bit copies
    -- (half the bytes through L2; the products still fp32 FMA)
    w16 = w16 and w16.kind or nil,
    weights = w16 and w16.weights or nil,
  })
end

-- The model family: every member (any L, activation, time, conditioning,
-- guidance).
function M.serves() return true end

function M.applies(ctx)
  if not variant(ctx, 8, M.ROWS) then return false, "a tile's staging exceeds shared memory" end
  return true
end

-- One sample alone (no products on rows of zeros), up to 8, up to 64.
-- w16: {kind = "bf16" or "fp16", weights = the 16-bit copies' names, a
-- layer each}, or nil (fp32 weights).
function M.variants(ctx, w16)
  return {variant(ctx, 1, 1, w16), variant(ctx, 8, 8, w16), variant(ctx, 8, M.ROWS, w16)}
end

-- The scratch area (zeros when packed), for `floats` floats of
-- activations.
function M.segments(ctx, floats)
  return {{name = "scratch", count = M.SCRATCH_DATA + floats, owner = M.name,
           what = "scratch of the grid variants: the grid barrier, then activations (zeros when packed)"}}
end

return M
