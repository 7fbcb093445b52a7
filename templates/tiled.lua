-- tiled.lua: the tiled kernel (tiled.cut), any shape and batch, in fp32 on
-- the FMA pipe: a block owns `rows` samples through all steps, activations
-- in shared memory, the weights streamed from L2 through shared-memory
-- tiles of `chunk` input rows.  Its cluster split (sm_90): a cluster of 2
-- to 8 blocks owns 8 samples and each block streams its share of each
-- layer's outputs, for small batches of shapes whose weights the cluster
-- kernel cannot hold.

local lib = import("lib")

local M = {name = "tiled", template = "tiled.cut"}

M.dials = {
  blocks = {1, 2, 4, 8},               -- the split's blocks a cluster (1: no split)
  chunk = {4, 8, 16, 32, 64, 128},     -- the deepest weight tile to try (input rows)
  stages = {2, 3, 4, 5, 6, 7, 8},      -- weight tiles in flight + 1 (more than 2 from sm_80)
}
M.names = {"tiled8", "tiled", "tiled8c2", "tiled8c4", "tiled8c8"}

-- One dense layer: which threads own which outputs.  A thread holds a
-- register tile of rows_per_thread x cols_per_thread accumulators;
-- col_threads (a multiple of 32, so a warp shares its rows: shared-memory
-- broadcasts) times cols_per_thread columns make a pass.  With a cluster
-- of `blocks` blocks, a pass is narrowed (down to 32 columns) until there
-- is a pass for every block.
local function layer(inputs, outputs, threads, rows, max_width, blocks)
  -- The widest column group (up to max_width) that a warp fills with real
  -- outputs.
  local width = 1
  for _, w in ipairs({4, 2}) do
    if w <= max_width and outputs >= 32 * w then width = w break end
  end
  local col_threads = math.min(threads, math.max(32, lib.pow2_floor(lib.round_up(outputs, width) // width)))
  if blocks > 1 then
    local max_cols = math.max(32, lib.pow2_floor((outputs + blocks - 1) // blocks))
    while col_threads * width > max_cols do
      if width > 1 then width = width // 2
      elseif col_threads > 32 then col_threads = col_threads // 2
      else break end
    end
  end
  -- At most 32 accumulators per thread, and no more row groups than rows.
  while (rows * width) // (threads // col_threads) > 32 and col_threads > 32 do
    col_threads = col_threads // 2
  end
  local groups = threads // col_threads
  while groups > rows do
    col_threads = col_threads * 2
    groups = threads // col_threads
  end
  return {
    inputs = inputs, outputs = outputs,
    col_threads = col_threads,
    cols_per_thread = width,
    cols = col_threads * width,
    rows_per_thread = rows // groups,
  }
end

-- The model family: every member (any L, activation, time, conditioning,
-- guidance).
function M.serves() return true end

local function stages_of(ctx)
  local stages = ctx.tune:dial(M.name, "stages", 2)
  if stages > 2 and ctx.spec.arch < 80 then
    refuse(string.format("tune: tiled.stages=%d: more than 2 from sm_80 (cp.async)", stages))
  end
  return stages
end

-- The variant of at most max_rows samples a block (a cluster of `blocks`
-- blocks): the most samples, then the deepest tile (up to max_chunk), then
-- the widest register tiles that fit.  It always applies: where even one
-- sample does not fit a block's shared memory, the shape is refused.
local function variant(ctx, max_rows, name, blocks, max_chunk)
  local spec = ctx.spec
  local D, H = spec.dim, spec.hidden
  local threads = 256
  local stages = stages_of(ctx)
  local x_stride, h_stride = lib.round_up(D, 4), lib.round_up(H, 4)
  local limit = ctx.device.shared_per_block
  local hidden_rows = lib.hidden_rows(spec)
  local function layers(rows, width)
    local out = {}
    for l = 1, spec.layers do
      local inputs, outputs = lib.layer_shape(spec, l)
      local r = (l > 1 and l < spec.layers) and hidden_rows * rows or rows
      out[l] = layer(inputs, outputs, threads, r, width, blocks)
    end
    return out
  end
  local function bytes(rows, chunk, width)
    local cols = 0
    for _, l in ipairs(layers(rows, width)) do cols = math.max(cols, l.cols) end
    -- multi-stage solvers keep a stage input and a weighted sum per sample
    local stage_floats = #ctx.solver.c > 1 and rows * 2 * x_stride + 2 * chunk or 0
    return 4 * (stages * chunk * cols + rows * (x_stride + 2 * hidden_rows * h_stride) + 3 * chunk
                + stage_floats), cols
  end
  local rows, chunk, width = max_rows, ctx.tune:dial(M.name, "chunk", max_chunk), 4
  while rows > 1 and bytes(rows, 4, 1) > limit do rows = rows // 2 end
  while chunk > 4 and bytes(rows, chunk, width) > limit do chunk = chunk // 2 end
  while width > 1 and bytes(rows, chunk, width) > limit do width = width // 2 end
  local shared, cols = bytes(rows, chunk, width)
  if shared > limit then
    refuse(string.format("D=%d, H=%d needs %d bytes of shared memory per "
      .. "block, over the %d bytes sm_%d gives a block", D, H, shared, limit,
      spec.arch))
  end
  return lib.variant(spec, {module = M.name, name = name, template = M.template},
                     {threads = threads, rows = rows, blocks = blocks, shared = shared}, {
    x_stride = x_stride, h_stride = h_stride,
    chunk = chunk, stages = stages, tile_cols = cols,
    layers = layers(rows, width),
  })
end

-- 8 samples a block while that fills the GPU once, then 32 (more reuse of
-- each weight read).
function M.few(ctx) return variant(ctx, 8, "tiled8", 1, 32) end
function M.many(ctx) return variant(ctx, 32, "tiled", 1, 32) end

-- The split's blocks: as many as 64 KB of weights each, 2 to 8.
function M.split_blocks(ctx)
  local weights = lib.weight_bytes(ctx.spec)
  return ctx.tune:dial(M.name, "blocks", math.max(2, math.min(8, lib.pow2_floor(weights // 65536))))
end

function M.split(ctx, blocks)
  return variant(ctx, 8, "tiled8c" .. blocks, blocks, 128)
end

-- The split's last batch: the clusters the GPU runs at once (an H200's
-- 132 SMs run 112 of its blocks in clusters; another GPU in proportion).
function M.split_last(ctx, v)
  return v.rows_per_block * (112 * ctx.device.sms // 132 // v.cluster_blocks)
end

return M
