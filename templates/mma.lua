-- mma.lua: the tiled kernel on the matrix units (mma.cut, mma.sync, sm_80
-- and newer): a block owns `rows` samples through all steps, activations
-- fp32 in shared memory, the weights (copies made at packing) streamed from
-- L2 through shared-memory tiles; 8 warps side by side over each layer's
-- outputs, each with rows / 16 tiles of 16 rows and up to 4 tiles of 8
-- columns.  Its kinds: tf32; tf32x3 (fp32: each product three tf32 ones,
-- fp32 accuracy); bf16 and fp16.  The gemm strategy reads its copies.

local lib = import("lib")

local M = {name = "mma", template = "mma.cut"}

M.names = {"mma16", "mma"}
M.dials = {
  rows = {16, 32, 64, 128},       -- samples a block (the most to try)
  chunk = {16, 32, 64, 128},      -- input rows of a weight tile
  stages = {2, 3, 4, 5, 6, 7, 8},  -- weight tiles in flight + 1
  per_sm = {1, 2, 3, 4},           -- blocks a SM (each a share of its shared memory)
}

-- The model family: every member (any L, activation, time, conditioning,
-- guidance).
function M.serves() return true end

-- The matrix-unit kind of each precision.
M.kinds = {fp32 = "tf32x3", tf32 = "tf32", bf16 = "bf16", fp16 = "fp16"}

local function element_bytes(kind) return (kind == "bf16" or kind == "fp16") and 2 or 4 end

-- Whether the kernel reads the fp32 matrices themselves (tf32x3, rows of a
-- multiple of 4 floats): then there is no copy.
local function reads_fp32(kind, D, H)
  return kind == "tf32x3" and D % 4 == 0 and H % 4 == 0
end

-- The weight matrices a matrix-unit kernel of `kind` reads (segments),
-- one a layer of the spec's model.
function M.weights(kind, spec)
  local out = {}
  for l = 1, spec.layers do
    out[l] = "w" .. l .. (reads_fp32(kind, spec.dim, spec.hidden) and "t" or "m")
  end
  return out
end

local function layer(inputs, outputs, warps_n, m_tiles)
  local n_tiles = math.max(1, math.min(4, (outputs + 8 * warps_n - 1) // (8 * warps_n)))
  return {inputs = inputs, outputs = outputs, n_tiles = n_tiles, cols = 8 * n_tiles * warps_n,
          m_tiles = m_tiles}
end

-- The variant of up to max_rows samples a block, named "mma" .. suffix;
-- nil before sm_80 or where the activations do not fit.  The first that
-- fits, of: the most rows, then tiles of 32 or 16 input rows (64 first for
-- 16-bit operands, measured faster on an H200), 4 to 2 of them in flight.
function M.variant(ctx, kind, max_rows, suffix)
  local spec = ctx.spec
  if spec.arch < 80 then return nil end
  local D, H = spec.dim, spec.hidden
  local es = element_bytes(kind)
  -- Row strides: 4 (tf32: scalar fragment loads) or 8 (16-bit: float2
  -- loads) floats past a multiple of 32 spread a fragment over all banks.
  local pad = es == 2 and 8 or 4
  local x_stride, h_stride = lib.round_up(D, 32) + pad, lib.round_up(H, 32) + pad
  local warps_n = 8  -- all of the block's 256 threads side by side
  -- guidance: the hidden layers on two rows a sample (the conditional and
  -- the unconditional), in blocks of half the samples (the same
  -- accumulators a warp)
  local hidden_rows = lib.hidden_rows(spec)
  local function layers_of(rows)
    local out = {}
    for l = 1, spec.layers do
      local inputs, outputs = lib.layer_shape(spec, l)
      local r = (l > 1 and l < spec.layers) and hidden_rows * rows or rows
      out[l] = layer(inputs, outputs, warps_n, r // 16)
    end
    return out
  end
  local layers = layers_of(16)
  local cols = 0
  for _, l in ipairs(layers) do cols = math.max(cols, l.cols) end
  local multi = #ctx.solver.c > 1
  local function bytes(rows, chunk, stages)
    local floats = rows * (x_stride + 2 * hidden_rows * h_stride + (multi and 2 * x_stride or 0))
        + (multi and 5 or 3) * chunk
    return 4 * floats + stages * chunk * (cols + 8) * es
  end
  -- blocks a SM: each gets a share of the SM's shared memory (1 KB of it
  -- reserved a block) and of its registers
  local blocks_per_sm = ctx.tune:dial(M.name, "per_sm", 1)
  local limit = (ctx.device.shared_per_block + 1024) // blocks_per_sm - 1024
  local function choices(dial, default)
    local v = ctx.tune:dial(M.name, dial)
    return v and {v} or default
  end
  local row_choices = {}
  for _, r in ipairs(choices("rows", {max_rows})) do
    local rows = hidden_rows > 1 and math.max(16, r // 2) or r
    while rows >= 16 do row_choices[#row_choices + 1] = rows rows = rows // 2 end
  end
  for _, rows in ipairs(row_choices) do
    for _, chunk in ipairs(choices("chunk", es == 2 and {64, 32, 16} or {32, 16})) do
      for _, stages in ipairs(choices("stages", {4, 3, 2})) do
        if bytes(rows, chunk, stages) <= limit then
          return lib.variant(spec, {module = M.name, name = "mma" .. suffix, template = M.template,
                                    reads = {"mma"}},
                             {threads = 32 * warps_n, rows = rows, blocks = 1,
                              shared = bytes(rows, chunk, stages)}, {
            mma = kind,
            weights = M.weights(kind, spec),
            m_tiles = rows // 16, warps_n = warps_n,
            x_stride = x_stride, h_stride = h_stride,
            chunk = chunk, stages = stages, tile_cols = cols,
            layers = layers_of(rows),
            blocks_per_sm = blocks_per_sm,
          })
        end
      end
    end
  end
  return nil
end

-- The parts of each block of a tiled copy (gemm on wgmma's stage tiles,
-- below): tf32x3's tf32 high part, then its low part; the other kinds'
-- one.  gemm stages a block's parts together (gemm.lua, gemm.cut's
-- kParts) and mma.cut's pack_tiles lays them out.
function M.tile_parts(kind) return kind == "tf32x3" and 2 or 1 end

-- The copies of W1, W2, W3 for the matrix units (inputs x outputs, rows
-- padded to 16 bytes; 16-bit elements for bf16 and fp16, tf32-rounded
-- fp32 for tf32, fp32 for tf32x3), none where the kernel reads the fp32
-- matrices.
-- tiled: also the copies in the stage tiles of gemm on wgmma (mma.cut's
-- pack_tiles: blocks of a chunk's inputs, 128 bytes, x a block of the
-- layer's outputs, lib.wg_block_outputs; tf32x3: each block's tf32 high
-- part, then its low part), "w<l>g".
function M.segments(ctx, kind, tiled)
  local spec = ctx.spec
  local D, H = spec.dim, spec.hidden
  local es = element_bytes(kind)
  local function ld(n) return lib.round_up(n, 16 // es) end
  local what = kind .. " copy of W%d transposed: [%d][%d], rows of %d"
  local out = {}
  if not reads_fp32(kind, D, H) then
    for l = 1, spec.layers do
      local inputs, outputs = lib.layer_shape(spec, l)
      out[#out + 1] = {name = "w" .. l .. "m", count = inputs * ld(outputs) * es // 4,
                       what = string.format(what, l, inputs, outputs, ld(outputs)), layer = l}
    end
  end
  if tiled then
    local ci, parts = 128 // es, M.tile_parts(kind)  -- a chunk's inputs; a block's parts
    for l = 1, spec.layers do
      local inputs, outputs = lib.layer_shape(spec, l)
      local bn = lib.wg_block_outputs(outputs)
      local blocks = (outputs + bn - 1) // bn * ((inputs + ci - 1) // ci)
      out[#out + 1] = {name = "w" .. l .. "g", count = parts * blocks * 128 * bn // 4, layer = l, tiled = true, bn = bn,
                       what = string.format("%s copy of W%d transposed in gemm's stage tiles: [%d][%d] blocks of %d x %d%s",
                                            kind, l, (outputs + bn - 1) // bn, (inputs + ci - 1) // ci, ci, bn,
                                            parts == 2 and ", high then low part" or "")}
    end
  end
  for _, s in ipairs(out) do s.owner, s.kind = M.name, kind end
  return out
end

-- The tiled copies' names (M.segments with tiled), one a layer.
function M.tiles(spec)
  local out = {}
  for l = 1, spec.layers do out[l] = "w" .. l .. "g" end
  return out
end

return M
