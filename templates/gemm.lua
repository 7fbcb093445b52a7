-- gemm.lua: the gemm strategy (grid.cut with v.gemm), large batches on
-- the matrix units in the precision's kind (mma.lua's: tf32x3 for fp32,
-- tf32, bf16, fp16): fp32's where the weights are large; the other
-- precisions' where their mma kernel does not fit (plan.lua).  The grid
-- strategy's persistent grid takes each layer in turn as a matrix product
-- over a chunk of up to scratch_rows samples (state and activations in the
-- scratch area: M.rows), in output tiles of 32 m_tiles rows x 128
-- columns, each through shared-memory stages of 32 or 64 inputs
-- (cp.async); the chunks run one after another.  It reads
-- the mma kernel's packed copies (mma.lua).  Its products are mma.sync,
-- but on sm_90a (one block a SM) they take wgmma: tiles of 128 rows x 256
-- outputs (a layer of fewer: as few as hold them, from 32), or smaller
-- where that leaves the blocks less work (128 x 128 or 64 x 128; a narrow
-- layer's 64 rows high), both operands from shared memory, a warpgroup's
-- products asynchronous (m64n128 a block of 128 outputs), one chunk's in
-- flight while the next is staged, the activations kept in the scratch
-- area in the operands' kind (faster than mma.sync there:
-- docs/performance.md).  tf32x3 (fp32) on wgmma: tiles of up to 128
-- outputs (a stage holds the weights' high and low parts), the
-- activations in fp32, split into their parts in registers, each chunk's
-- three products a k-step summed apart and added into the tile's sums
-- (the matrix units' sums truncate).

local lib = import("lib")
local grid = import("grid")
local mma = import("mma")

local M = {name = "gemm", template = "grid.cut"}  -- its products: gemm.cut

M.names = {"gemm", "gemm_b1024"}
-- gemm_b1024: gemm's batches on wgmma up to this many (tf32's to 4096
-- where the mma kernel fits: plan.lua), a kernel of its own whose
-- tiles' inputs may split (with the splits' code in gemm's kernel, its
-- large batches ran 1.16x slower at D=256, H=2048, bf16, B=4096, where
-- no tile split; to B=1024 the splits were as fast or faster:
-- docs/performance.md)
M.SPLIT_LAST = 1024
M.dials = {
  per_sm = {1, 2},       -- blocks a SM (2: mma.sync, tiles of up to 64 rows, within 128 registers)
  rows = {32, 64, 128},  -- the tallest tile (128 on sm_90 with one block a SM)
  chunk = {32, 64},      -- inputs a pipeline stage
  -- wgmma: the most parts a tile's inputs are split into where the tiles
  -- are fewer than the SMs (1: none), and what finishing a split costs a
  -- part, in chunks of products (gemm.cut, product)
  split = {1, 2, 4, 8, 16, 32},
  split_cost = {0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 24, 32},
  batch_rows = {1024, 2048, 4096, 8192, 16384, 32768},  -- the samples a chunk
  -- wgmma, tiles of 128 outputs or fewer (not tf32x3): their stages, of
  -- their own size in the same bytes (4, or no more than the others':
  -- the others' ring)
  narrow_stages = {4, 5, 6, 7, 8},
}

-- A split tile (wgmma: 64 rows x up to 128 outputs): its parts' sums, a
-- slot of the scratch area each (floats).
local SPLIT_TILE = 64 * 128

local STAGES, THREADS = 4, 256
-- finishing a split tile (its sums out, every part's in), in chunks of
-- products a part
local SPLIT_COST = 12
-- wgmma's 64-row tiles cut from a layer of the widest tiles (256 outputs;
-- tf32x3's 128), each warpgroup's products half a tile's outputs wide,
-- run slower than 128-row ones: their rows count NARROW_RATE / 16 (the
-- planner's choice of tile height and the kernel's block_work both;
-- faster than counting them 16 / 16 where timed, in bf16, tf32 and fp32,
-- but at D=66, H=636 in fp32: docs/performance.md, "Boundaries")
local NARROW_RATE = 27

-- The model family: every member (any L, activation, time, conditioning,
-- guidance).
function M.serves() return true end

-- Whether the products are wgmma (bf16, fp16, tf32 or tf32x3 operands for
-- sm_90a, one block a SM): then the activations in the scratch area are
-- kept in the operands' kind (tf32x3: fp32), laid out as the pipeline
-- stages' images.
function M.on_wgmma(ctx, kind)
  local spec = ctx.spec
  return (kind == "bf16" or kind == "fp16" or kind == "tf32" or kind == "tf32x3") and spec.arch == 90
         and spec.arch_specific
         and ctx.tune:dial(M.name, "per_sm", 1) == 1 or false
end

-- wgmma's chunk: the inputs of 128 bytes of a row (64 in 16 bits, 32 in
-- tf32 and fp32), a pipeline stage's.
local function chunk_inputs(kind) return (kind == "bf16" or kind == "fp16") and 64 or 32 end

-- The rows of wgmma's activations, in elements: whole chunks (the arrays
-- in blocks of 128 rows x a chunk's inputs, grid.cut's tile_act).
local function strides_act(spec, kind)
  local ci = chunk_inputs(kind)
  return lib.round_up(spec.dim, ci), lib.round_up(spec.hidden, ci)
end

-- Floats a sample takes in the scratch area on wgmma: h (two buffers) and
-- layer 1's input in the operands' kind, the state (and a multi-stage
-- solver's stage sums) in fp32.
local function wg_row_floats(ctx, kind)
  local spec = ctx.spec
  local xa, ha = strides_act(spec, kind)
  local es = (kind == "bf16" or kind == "fp16") and 2 or 4  -- bytes an element
  return (lib.hidden_rows(spec) * 2 * ha + xa) * es // 4 + (#ctx.solver.c > 1 and 2 or 1) * lib.round_up(spec.dim, 4)
end

-- The samples a chunk (gemm.batch_rows): the scratch area holds their
-- state and activations.  4096, fewer from H = 1024 (16 MB of fp32 a
-- layer's outputs); on wgmma twice as many, while that keeps them within
-- WG_SCRATCH bytes, up to WG_ROWS: more tiles between a layer's grid
-- barriers (1.04x-1.58x faster at B >= 16384 in bf16 and tf32 on an H100,
-- though they leave L2: docs/performance.md).
local WG_ROWS, WG_SCRATCH = 16384, 256 * 1024 * 1024
function M.rows(ctx, kind)
  local h_stride = lib.round_up(ctx.spec.hidden, 4)
  local rows = math.max(128, math.min(4096, (1 << 22) // h_stride // 128 * 128))
  if M.on_wgmma(ctx, kind) then
    local bytes = 4 * wg_row_floats(ctx, kind)
    while 2 * rows <= WG_ROWS and 2 * rows * bytes <= WG_SCRATCH do rows = 2 * rows end
  end
  return ctx.tune:dial(M.name, "batch_rows", rows)
end

-- The variant of matrix-unit kind `kind` (mma.lua's) reading the weights
-- `weights` (segments), else nil (before sm_80, or where its stages do not
-- fit shared memory); with `split_last`, gemm_b<split_last> (its tiles
-- split: on wgmma only, and gemm.split not 1).
function M.variant(ctx, kind, weights, split_last)
  local spec = ctx.spec
  if spec.arch < 80 then return nil end
  local D, H = spec.dim, spec.hidden
  local rows = M.rows(ctx, kind)
  local blocks = ctx.tune:dial(M.name, "per_sm", 1)
  local limit = (ctx.device.shared_per_block + 1024) // blocks - 1024
  -- a stage: inputs (fp32, rows padded: 8 floats for 16-bit fragments' float2
  -- loads, else 4) and weights (16-bit or fp32)
  local half = kind == "bf16" or kind == "fp16"
  local wg = M.on_wgmma(ctx, kind)
  if split_last and not (wg and M.split(ctx) > 1) then return nil end
  -- outputs a tile: mma.sync's 128; wgmma's 256 at most (a warpgroup's
  -- 64 x 256 accumulators in 128-row tiles: a quarter less operand
  -- traffic than 128 x 128), tf32x3's 128 (its weights' two parts: three
  -- stages of 256 would not fit)
  local x3 = kind == "tf32x3"
  local BN = wg and not x3 and 256 or 128
  local parts = wg and mma.tile_parts(kind) or 1  -- a block of the weights' parts
  local a_pad, w_bytes = half and 8 or 4, half and 2 or 4
  -- a stage's inputs: fp32 rows, padded; wgmma's core matrices (16-bit
  -- or tf32: 8 rows x 16 bytes)
  local function a_floats_of(mt, bk) return wg and 8 * mt * bk * w_bytes or 32 * mt * (bk + a_pad) end
  -- wgmma's weights: core matrices, no padding (tf32x3: two parts)
  local function b_floats_of(bk) return bk * (wg and BN or BN + 8) * w_bytes // 4 * parts end
  local function stage_floats(mt, bk) return a_floats_of(mt, bk) + b_floats_of(bk) end
  -- 128-row tiles on sm_90 (3 stages of them fit; on sm_80 their layer
  -- takes every register, so the kernel spills around its calls)
  local tall = blocks == 1 and spec.arch == 90 and 4 * 3 * stage_floats(4, wg and chunk_inputs(kind) or 32) <= limit
  local max_mt = ctx.tune:dial(M.name, "rows", tall and 128 or 64) // 32
  if blocks > 1 and max_mt > 2 then
    refuse(string.format("tune: gemm.rows=%d with gemm.per_sm=%d: 64 rows at most", 32 * max_mt, blocks))
  end
  local min_mt = wg and 2 or 1
  if max_mt < min_mt then refuse("tune: gemm.rows=32 on wgmma (sm_90a): 64 rows at least") end
  -- A layer's tiles: of the heights 32 m (m = max_mt, max_mt / 2, ... 1;
  -- wgmma's down to 2: a warpgroup's products are 64 rows),
  -- the one that leaves each block the fewest rows over a full chunk (waves
  -- of tiles x rows per tile), ties to the taller (fewer operand loads per
  -- product).  For each chunk the kernel takes this height or half of it
  -- (mma.sync: by the same measure over the chunk's rows; wgmma: with 256
  -- or 128 outputs, by the work each tile leaves a block: gemm.cut,
  -- product).
  -- (wgmma's tiles of a layer with few outputs: as few as hold them)
  local function tile_outputs(outputs) return wg and math.min(lib.wg_tile_outputs(outputs), BN) or BN end
  local function block_rows(outputs, m)
    local bn = tile_outputs(outputs)
    local tiles = (rows + 32 * m - 1) // (32 * m) * ((outputs + bn - 1) // bn)
    local slots = ctx.device.sms * blocks
    return (tiles + slots - 1) // slots * m
  end
  -- wgmma's 64-row tiles count NARROW_RATE / 16 of their rows, so that
  -- odd widths keep 128-row tiles
  local function cost(outputs, m)
    local r = block_rows(outputs, m)
    return (wg and m == 2 and max_mt == 4 and (BN == 256 or tile_outputs(outputs) == BN)) and r * NARROW_RATE / 16
        or r
  end
  local function layer(inputs, outputs)
    local m_tiles, m = max_mt, max_mt // 2
    while m >= min_mt do
      if cost(outputs, m) < cost(outputs, m_tiles) then m_tiles = m end
      m = m // 2
    end
    return {inputs = inputs, outputs = outputs, m_tiles = m_tiles}
  end
  local layers, tallest = {}, 0
  for l = 1, spec.layers do
    layers[l] = layer(lib.layer_shape(spec, l))
    tallest = math.max(tallest, layers[l].m_tiles)
  end
  -- 64 inputs a stage where no tile is taller than 32 rows and 3 stages
  -- fit (faster there; with taller tiles the layer takes every register
  -- and the kernel spills around its calls); wgmma's 128 bytes of a row
  -- (its registers hold only the accumulators).
  local bk = ctx.tune:dial(M.name, "chunk", wg and chunk_inputs(kind)
                           or (tallest == 1 and 4 * 3 * stage_floats(tallest, 64) <= limit) and 64 or 32)
  if wg and bk ~= chunk_inputs(kind) then
    refuse(string.format("tune: gemm.chunk=%d on wgmma (%s on sm_90a): its stages are the arrays' blocks of %d inputs",
                         bk, kind, chunk_inputs(kind)))
  end
  local a_floats, b_floats = a_floats_of(tallest, bk), b_floats_of(bk)
  -- as many stages as fit, up to 4 (3 with two blocks a SM); wgmma's up
  -- to 6 (it loads kPipe - 2 chunks ahead: one chunk's products are in
  -- flight while the next is staged), 3 at least
  local stages, fewest = wg and 6 or blocks == 1 and STAGES or 3, wg and 3 or 2
  while stages > fewest and 4 * stages * (a_floats + b_floats) > limit do stages = stages - 1 end
  local shared = 4 * stages * (a_floats + b_floats)
  -- wgmma's tiles leave their sums in the stages for the epilogue (fp32,
  -- rows of BN + 8); after both, a stage's `full` mbarrier (8 bytes)
  local barriers
  -- tiles of 128 outputs or fewer (a layer's narrow ones; tf32x3 stages
  -- two parts, as wide): stages of their size, as many as the others'
  -- bytes hold (more chunks ahead), with mbarriers of their own
  local narrow
  if wg and not x3 then
    local fit = 4 * stages * (a_floats + b_floats) // (4 * (a_floats + bk * 128 * w_bytes // 4))
    narrow = ctx.tune:dial(M.name, "narrow_stages", math.min(8, fit))
    if narrow > fit then refuse(string.format("tune: gemm.narrow_stages=%d: %d fit", narrow, fit)) end
    if narrow <= stages then narrow = nil end
  end
  if wg then
    shared = math.max(shared, 4 * 32 * tallest * (BN + 8))
    barriers = shared
    -- and the block's counts of chunks staged
    shared = shared + 8 * stages + 8 * (narrow or 0) + 8
  end
  if shared > limit then return nil end
  return lib.variant(spec, {module = M.name, name = split_last and "gemm_b" .. split_last or "gemm",
                            template = M.template, reads = {"mma", "grid"}},
                     {threads = THREADS, rows = 32 * tallest, blocks = 1, shared = shared, per_sm = blocks}, {
    gemm = true,
    gemm_kind = kind,
    gemm_wgmma = wg,
    scratch_rows = rows,
    scratch_data = grid.SCRATCH_DATA,
    layers = layers,
    x_stride = lib.round_up(D, 4), h_stride = lib.round_up(H, 4),
    gemm_bn = BN, gemm_bk = bk, gemm_stages = stages,
    gemm_narrow_stages = narrow,  -- (wgmma) the stages of tiles of 128 outputs or fewer, if more
    gemm_parts = wg and parts or nil,  -- (wgmma) a block of the tiled weights' parts
    gemm_barriers = barriers,  -- (wgmma) the mbarriers' offset in shared memory
    -- wgmma reads the weights in its stage tiles (mma.lua's tiled copies)
    weights = wg and mma.tiles(spec) or weights,
    -- gemm_b1024's split tiles: the most parts, their cost, a slot of
    -- partial sums a block
    gemm_split = split_last and M.split(ctx) or 1,
    gemm_narrow_rate = wg and NARROW_RATE or nil,
    gemm_split_cost = split_last and ctx.tune:dial(M.name, "split_cost", SPLIT_COST) or nil,
    split_slots = split_last and ctx.device.sms or nil,
    split_tile = split_last and SPLIT_TILE or nil,
    -- wgmma's activations in the operands' kind (2 or 4 bytes): rows of h
    -- and of layer 1's input (x, or a later stage's input), in elements
    act_bytes = wg and w_bytes or nil,
    hact_stride = wg and select(2, strides_act(spec, kind)) or nil,
    xact_stride = wg and strides_act(spec, kind) or nil,
  })
end

-- The most parts a tile's inputs are split into (wgmma, gemm.split).
function M.split(ctx) return ctx.tune:dial(M.name, "split", 32) end

-- Floats of its activations in the scratch area, on operands of `kind`
-- (mma.lua's).  On wgmma: the state and the sums (fp32) and, in the
-- operands' kind, h (two buffers) and layer 1's input; with `split` (the
-- plan has gemm_b1024), the split tiles' partial sums too.
function M.scratch(ctx, kind, split)
  local spec = ctx.spec
  local rows = M.rows(ctx, kind)
  if M.on_wgmma(ctx, kind) then
    local floats = rows * wg_row_floats(ctx, kind)
    -- the split tiles' partial sums, a slot a block (one block a SM), and
    -- a count of parts a tile (at 32 floats: grid.cut aligns them)
    if split then floats = floats + 32 + ctx.device.sms * (SPLIT_TILE + 1) end
    return floats
  end
  return grid.scratch_activations(ctx, rows, lib.round_up(spec.dim, 4), lib.round_up(spec.hidden, 4), true)
end

return M
