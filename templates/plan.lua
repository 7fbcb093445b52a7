-- plan.lua: picks the kernel strategy for a shape and its launch
-- configuration.  Runs sandboxed; gets `spec` (dim, hidden, steps, solver,
-- precision, arch, symbol, ...) and returns the plan that file.cut renders
-- and that the runtime launches.

local function round_up(x, m) return (x + m - 1) // m * m end

-- Blocks an H100/H200 runs at once (132 SMs, one block each).
local SMS = 132

local function pow2_floor(x)
  local p = 1
  while p * 2 <= x do p = p * 2 end
  return p
end

-- Explicit Runge-Kutta schemes (Butcher tableaus with only a subdiagonal):
-- stage i evaluates the velocity at x + dt a[i] k[i-1], time (k + c[i]) / S,
-- and the step is x + dt sum b[i] k[i].  Euler is one stage at the midpoint
-- time, the PyTorch contract.
local solvers = {
  euler = {name = "euler", c = {0.5}, a = {0}, b = {1}},
  midpoint = {name = "midpoint", c = {0, 0.5}, a = {0, 0.5}, b = {0, 1}},
  heun = {name = "heun", c = {0, 1}, a = {0, 1}, b = {0.5, 0.5}},
  rk4 = {name = "rk4", c = {0, 0.5, 0.5, 1}, a = {0, 0.5, 0.5, 1},
         b = {1 / 6, 1 / 3, 1 / 3, 1 / 6}},
}

-- Largest dynamic shared memory a block may opt in to, by compute capability.
local function shared_limit(arch)
  if arch >= 120 then return 99 * 1024 end  -- consumer Blackwell (sm_120, sm_121)
  if arch >= 90 then return 227 * 1024 end  -- Hopper, data-centre Blackwell
  if arch == 80 or arch == 87 then return 163 * 1024 end
  if arch >= 80 then return 99 * 1024 end
  return 64 * 1024
end

-- Packed weight layout shared by every variant (see file.cut): each segment
-- starts on a 16-byte boundary so kernels can load it as float4.  With a
-- matrix-unit kind, copies of the three weight matrices for mma.cut follow
-- (w1m, w2m, w3m: inputs x outputs, rows padded to 16 bytes; 16-bit
-- elements for bf16 and fp16, tf32-rounded fp32 for tf32, fp32 for tf32x3).
local function mma_element_bytes(kind) return (kind == "bf16" or kind == "fp16") and 2 or 4 end

-- Whether mma.cut can read the fp32 matrices themselves (tf32x3, rows of a
-- multiple of 4 floats): then there is no copy.
local function mma_reads_fp32(kind, D, H)
  return kind == "tf32x3" and D % 4 == 0 and H % 4 == 0
end

-- The weight matrices a matrix-unit kernel reads.
local function mma_weights(kind, D, H)
  return mma_reads_fp32(kind, D, H) and {"w1t", "w2t", "w3t"} or {"w1m", "w2m", "w3m"}
end

-- wg: the wgmma variant's kind and padded shape ({kind, Dp, Hp}), or nil;
-- rm: the same for rmma; ws: wgstream's layout (wgstream_layout), or nil.
-- cw: the cluster kernel's thread-major weight copies (cluster_thread_weights), or {}.
local function params_layout(D, H, mma_kind, scratch_floats, wg, rm, ws, cw)
  local segments = {
    {"w1t", D * H, "W1[:, :D] transposed: [D][H]"},
    {"w1_time", H, "W1[:, D], the t column"},
    {"b1", H, "bias of layer 1"},
    {"w2t", H * H, "W2 transposed: [H][H]"},
    {"b2", H, "bias of layer 2"},
    {"w3t", H * D, "W3 transposed: [H][D]"},
    {"b3", D, "bias of layer 3"},
  }
  for _, c in ipairs(cw) do  -- the cluster kernel's registers: see cluster_thread_weights
    segments[#segments + 1] = {c.segment, c.floats, string.format(
      "the cluster kernel's weights%s by thread: float4 c of thread t of block r at (%d r + c) %d + t",
      c.fold and " (folded)" or "", c.floats_per_thread // 4, c.threads)}
    if c.fold then
      segments[#segments + 1] = {"w1b3", H, "c = W1[:, :D] b3 (fp64, rounded)"}
    end
  end
  if mma_kind and not mma_reads_fp32(mma_kind, D, H) then
    local es = mma_element_bytes(mma_kind)
    local function ld(n) return round_up(n, 16 // es) end
    local what = mma_kind .. " copy of W%d transposed: [%d][%d], rows of %d"
    segments[#segments + 1] = {"w1m", D * ld(H) * es // 4, string.format(what, 1, D, H, ld(H))}
    segments[#segments + 1] = {"w2m", H * ld(H) * es // 4, string.format(what, 2, H, H, ld(H))}
    segments[#segments + 1] = {"w3m", H * ld(D) * es // 4, string.format(what, 3, H, D, ld(D))}
  end
  -- A kernel's 16-bit (tf32: 32-bit) copies of W1, W2, W3 (D and H
  -- rounded up to 16), one after another (copied or loaded as one block):
  -- segments w1<tag>, w2<tag>, w3<tag>.
  local function copies(tag, kind, Dp, Hp, layout)
    local what = kind .. " copy of W%d for " .. layout
    local per = kind == "tf32" and 1 or 2  -- elements a float
    segments[#segments + 1] = {"w1" .. tag, Hp * Dp // per, string.format(what, 1, Hp, Dp)}
    segments[#segments + 1] = {"w2" .. tag, Hp * Hp // per, string.format(what, 2, Hp, Hp)}
    segments[#segments + 1] = {"w3" .. tag, Dp * Hp // per, string.format(what, 3, Dp, Hp)}
  end
  if wg then  -- the warpgroup kernel's, copied into shared memory: see wgmma.cut
    copies("g", wg[1], wg[2], wg[3], "wgmma: %d outputs x %d inputs, 8 x 8 core matrices")
  end
  if ws then  -- the streamed warpgroup kernel's, piece by piece: see wgstream.cut
    segments[#segments + 1] = {"ws", ws.floats,
      string.format("tf32 copy of W1, W2, W3 for wgmma, in %d pieces as streamed (D, H padded to %d, %d)%s",
                    #ws.pieces, ws.dim_pad, ws.hidden_pad, ws.split and ": their high parts" or "")}
    if ws.split then
      segments[#segments + 1] = {"wsl", ws.floats, "the low parts of ws (each weight less its high part, as tf32)"}
    end
  end
  if rm then  -- the register-resident kernel's: see rmma.cut and rmma3.cut
    local tf32_frag = "mma.sync: %d outputs x %d inputs, 16 x 8 tiles in fragment order, inputs 2 p and 2 p + 1 as k = p and p + 4"
    if rm[1] == "fp32" then  -- tf32x3: the high parts, then the low ones
      copies("r", "tf32", rm[2], rm[3], tf32_frag .. ", high parts")
      copies("rl", "tf32", rm[2], rm[3], tf32_frag .. ", low parts (each weight less its high part)")
    else
      copies("r", rm[1], rm[2], rm[3], rm[1] == "tf32" and tf32_frag
             or "mma.sync: %d outputs x %d inputs, 16 x 16 tiles in fragment order")
    end
  end
  if scratch_floats and scratch_floats > 0 then
    segments[#segments + 1] = {"scratch", scratch_floats,
      "scratch of the grid variants: the grid barrier, then activations (zeros when packed)"}
  end
  local offset, out = 0, {}
  for i, s in ipairs(segments) do
    out[i] = {name = s[1], offset = offset, count = s[2], what = s[3]}
    offset = offset + round_up(s[2], 4)
  end
  return out, offset
end

-- The fields every variant gives the runtime (see gen/engine.lua; the
-- planner adds params_bytes once the packed layout is known), plus the
-- template's own in `extra`.  A variant serves batches 0 and up until the
-- planner narrows it.
local function variant(spec, name, template, launch, extra)
  local v = {
    strategy = name,
    namespace = name,
    template = template,
    symbol = spec.symbol .. "_" .. name,
    pack_symbol = spec.symbol .. "_pack",
    min_batch = 0, max_batch = -1,
    block_threads = launch.threads,
    rows_per_block = launch.rows,
    cluster_blocks = launch.blocks,
    shared_bytes = launch.shared,
    pack_threads = 256,
    grid_blocks_per_sm = 0,
  }
  for k, value in pairs(extra) do v[k] = value end
  return v
end

-- One dense layer of the tiled kernel: which threads own which outputs.
-- A thread holds a register tile of rows_per_thread x cols_per_thread
-- accumulators; col_threads (a multiple of 32, so a warp shares its rows:
-- shared-memory broadcasts) times cols_per_thread columns make a pass.
-- With a cluster of `blocks` blocks, a pass is narrowed (down to 32
-- columns) until there is a pass for every block.
local function layer(inputs, outputs, threads, rows, max_width, blocks)
  -- The widest column group (up to max_width) that a warp fills with real
  -- outputs.
  local width = 1
  for _, w in ipairs({4, 2}) do
    if w <= max_width and outputs >= 32 * w then width = w break end
  end
  local col_threads = math.min(threads, math.max(32, pow2_floor(round_up(outputs, width) // width)))
  if blocks > 1 then
    local max_cols = math.max(32, pow2_floor((outputs + blocks - 1) // blocks))
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

-- Tiled strategy: a block owns `rows` samples (at most max_rows) through
-- all steps; activations live in shared memory, weights stream from L2
-- through a double-buffered tile of `chunk` input rows (tiled.cut).  With
-- blocks > 1, a cluster of that many blocks owns the samples and splits
-- each layer's outputs (sm_90 and newer).
local function tiled(spec, max_rows, suffix, blocks, max_chunk, stages)
  local D, H = spec.dim, spec.hidden
  local threads = 256
  blocks = blocks or 1
  stages = stages or 2
  local x_stride, h_stride = round_up(D, 4), round_up(H, 4)
  local limit = shared_limit(spec.arch)
  local function layers(rows, width)
    return {layer(D, H, threads, rows, width, blocks), layer(H, H, threads, rows, width, blocks),
            layer(H, D, threads, rows, width, blocks)}
  end
  local function bytes(rows, chunk, width)
    local cols = 0
    for _, l in ipairs(layers(rows, width)) do cols = math.max(cols, l.cols) end
    -- multi-stage solvers keep a stage input and a weighted sum per sample
    local stage_floats = #solvers[spec.solver].c > 1 and rows * 2 * x_stride + 2 * chunk or 0
    return 4 * (stages * chunk * cols + rows * (x_stride + 2 * h_stride) + 3 * chunk
                + stage_floats), cols
  end
  -- The most samples per block (up to max_rows), then the deepest tile,
  -- then the widest register tiles that fit.
  local rows, chunk, width = max_rows, max_chunk or 32, 4
  while rows > 1 and bytes(rows, 4, 1) > limit do rows = rows // 2 end
  while chunk > 4 and bytes(rows, chunk, width) > limit do chunk = chunk // 2 end
  while width > 1 and bytes(rows, chunk, width) > limit do width = width // 2 end
  local shared, cols = bytes(rows, chunk, width)
  if shared > limit then
    refuse(string.format("D=%d, H=%d needs %d bytes of shared memory per "
      .. "block, over the %d bytes sm_%d gives a block", D, H, shared, limit,
      spec.arch))
  end
  return variant(spec, "tiled" .. suffix, "tiled.cut",
                 {threads = threads, rows = rows, blocks = blocks, shared = shared}, {
    x_stride = x_stride, h_stride = h_stride,
    chunk = chunk, stages = stages, tile_cols = cols,
    layers = layers(rows, width),
  })
end

-- Small-batch strategy: a thread-block cluster per `rows` samples, weights
-- in registers across the cluster, one exchange per step (cluster.cut).
-- Returns nil when the shape does not split evenly.
local function is_pow2(x) return x >= 1 and x & (x - 1) == 0 end

-- The cluster kernel's layer 2 by warp (layer2_by_warp, the default where
-- own units come in 32s; tune l2w=0: by lanes): each warp takes the 32
-- units of h1 it computed for every own unit, the warps' partials summed
-- in shared memory (a barrier in place of the one after layer 1), so every
-- shared load of h1 is a broadcast.  By lanes (kLanes2 lanes a unit, each
-- over all of h1) a load reads kLanes2 addresses: on an H200 (ncu, D=64,
-- H=256) those took 4 shared-memory wavefronts each, 512 of the 896 a step
-- and block.  Measured there, fp32, D=64, H=256: 34.7 us at B=8 by warp,
-- 39.0 by lanes; 62.1 and 79.5 at B=64.  (Two threads a unit in layer 1,
-- 512 a block, measured 14% slower: 44.5 us at B=8.)
-- The weights a thread of the cluster kernel keeps in registers, array by
-- array, in the order of its thread-major copy in params (segment wc, or
-- wcf where layer 3 is folded): float4 c of thread t of block r at
-- (r W + c) T + t (W float4s a thread, T threads a block), so that each
-- of a warp's loads is 512 contiguous bytes (measured on an H200, D=64,
-- H=256, B=8: 26.1 us against 28.0 with a float a load from the
-- transposed matrices, whose 144 loads a thread took 0.9 us more before
-- the first step).  cluster.cut declares and loads the arrays; the pack
-- kernel (file.cut) writes them.  Each array: its name, its C dimensions,
-- the matrix it holds (w1, w2, w3 or m = W1[:, :D] W3) and element n's
-- output and input there, C expressions of rank, tid and n.
local function cluster_thread_weights(D, H, blocks, lanes3, by_warp, fold)
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

local function cluster(spec, blocks, rows, max_batch, by_warp, fold)
  local D, H = spec.dim, spec.hidden
  local threads = H  -- layer 1: a thread per hidden unit
  if spec.arch < 90 or H % 32 ~= 0 or H > 1024 or D % 4 ~= 0 then return nil end
  if not is_pow2(blocks) or blocks > 16 or H % (4 * blocks) ~= 0 then return nil end
  local own, lanes2 = H // blocks, blocks
  if threads % D ~= 0 then return nil end
  local lanes3 = threads // D
  if not is_pow2(lanes3) or lanes3 > 8 or own % (4 * lanes3) ~= 0 then return nil end
  by_warp = by_warp and own % 32 == 0
  local weights_per_thread = D + H // lanes2 + own // lanes3
  local static_shared = 4 * rows * (D + H + own + 2 * blocks * D + (by_warp and threads // 32 * own or 0)) + 16
  if weights_per_thread > 160 or static_shared > 48 * 1024 then return nil end
  -- The fold: Euler, layer 2 by warp, partials H wide.
  fold = fold and by_warp and #solvers[spec.solver].c == 1 and 2 * own + own // lanes3 <= 160
      and static_shared + 4 * rows * 2 * blocks * (H - D) <= 48 * 1024
  -- rows: samples per cluster
  -- (own % (4 lanes3) == 0 makes D a multiple of 8: layer 1 by pairs of lanes)
  return variant(spec, string.format("cluster%d_r%d", blocks, rows), "cluster.cut",
                 {threads = threads, rows = rows, blocks = blocks, shared = 0}, {
    max_batch = max_batch,
    own = own,
    lanes2 = lanes2, lanes3 = lanes3,
    layer2_by_warp = by_warp,
    fold = fold or false,
    thread_weights = cluster_thread_weights(D, H, blocks, lanes3, by_warp, fold or false),
  })
end

-- Grid strategy (grid.cut): for batches up to max_batch, a persistent grid
-- of one block per SM takes each layer in turn, in tiles of `rows` samples
-- x tile_cols outputs; the activations go through a scratch area at the
-- end of params.  A layer's tile is as narrow as gives every SM a tile at
-- max_batch (4 outputs at least; at most 32 threads across, each reading
-- up to max_width consecutive weights at a time, as the outputs divide).
-- Within 128 registers a thread keeps 4 groups of loads of 1 or 2 weights
-- in flight (2 in multi-stage kernels), or 1 of 4 (grid.cut).  Measured on
-- an H200, with Euler: at 8 samples, 2 and 4 are
-- level (within 3.1%); at 64, 4 is 6-32% faster than 2 from D=1024, H=1024
-- (and 4-5% slower below it).
local function grid_layer(inputs, outputs, row_tiles, max_width)
  local width = outputs % 4 == 0 and 4 or outputs % 2 == 0 and 2 or 1
  width = math.min(width, max_width)
  local cols = 4
  while cols < 32 * width and row_tiles * ((outputs + cols - 1) // cols) > SMS do cols = cols * 2 end
  width = math.min(width, cols // 4)
  return {inputs = inputs, outputs = outputs, tile_cols = cols, cols_per_thread = width}
end

-- Floats of the activations of `rows` samples in the scratch area: h1 and
-- h2 (rows of h_stride), and for multi-stage solvers ys and sums (rows of
-- x_stride); the gemm variant keeps the state there too.
local function scratch_activations(spec, rows, x_stride, h_stride, state)
  local multi = #solvers[spec.solver].c > 1
  return rows * (2 * h_stride + ((multi and 2 or 0) + (state and 1 or 0)) * x_stride)
end

-- The scratch area: the grid barrier's counter (4 floats, at the start, so
-- that every variant finds it in the same place), then the activations.
local SCRATCH_DATA = 4

local function grid(spec, rows, max_batch, scratch_rows)
  local D, H = spec.dim, spec.hidden
  local threads = 512
  local row_tiles = (max_batch + rows - 1) // rows
  local width = max_batch > 8 and 4 or 2
  local layers = {grid_layer(D, H, row_tiles, width), grid_layer(H, H, row_tiles, width),
                  grid_layer(H, D, row_tiles, width)}
  local max_cols = 0
  for _, l in ipairs(layers) do max_cols = math.max(max_cols, l.tile_cols) end
  local chunk = math.min(1024, round_up(math.max(D, H), 4))
  local function bytes() return 4 * (rows * (chunk + 4) + threads // 32 * rows * max_cols) end
  while chunk > 128 and bytes() > shared_limit(spec.arch) do chunk = chunk // 2 end
  local shared = bytes()
  if shared > shared_limit(spec.arch) then return nil end
  return variant(spec, "grid_b" .. max_batch, "grid.cut",
                 {threads = threads, rows = rows, blocks = 1, shared = shared}, {
    max_batch = max_batch,
    scratch_rows = scratch_rows,
    grid_blocks_per_sm = 1,
    chunk = chunk,
    max_tile_cols = max_cols,
    layers = layers,
    x_stride = D, h_stride = H,
    scratch_data = SCRATCH_DATA,
  })
end

-- A --tune number: a whole number from 0 to TUNE_MAX, so that the batch
-- ranges and shared-memory sizes computed from it cannot overflow.
local TUNE_MAX = 1 << 20
local function tune_number(key, text)
  local v = math.tointeger(tonumber(text))
  if not v or v < 0 or v > TUNE_MAX then
    refuse(string.format("tune: %s=%s is not a whole number from 0 to %d",
      key, text, TUNE_MAX))
  end
  return v
end

-- A --tune switch that is on unless key=0; 1 or 0 only.
local function tune_switch(tune, key)
  local text = tune[key]
  if text and text ~= "0" and text ~= "1" then
    refuse(string.format("tune: %s=%s is not one of 0, 1", key, text))
  end
  return text ~= "0"
end

-- Gemm strategy (grid.cut with v.gemm): large batches of shapes with large
-- weights, fp32 on the matrix units (tf32x3).  The same persistent grid
-- takes each layer in turn as a matrix product over a chunk of up to
-- scratch_rows samples (state and activations in the scratch area, about
-- 32 MB of them, so they stay in L2), in output tiles of 32 m_tiles rows x
-- 128 columns, each through up to 4 shared-memory stages of 32 inputs (64
-- where no tile is taller than 64 rows) (cp.async); the chunks run one
-- after another.  A layer's tiles are 128, 64 or 32 rows tall (see
-- block_rows).
local GEMM_BN, GEMM_STAGES, GEMM_THREADS = 128, 4, 256
local function gemm_rows(spec)
  local h_stride = round_up(spec.hidden, 4)
  return math.max(128, math.min(4096, (1 << 22) // h_stride // 128 * 128))
end

local function gemm(spec, weights, tune)
  if spec.arch < 80 then return nil end
  local D, H = spec.dim, spec.hidden
  local rows = gemm_rows(spec)
  -- tune gmt: the tallest tile in 32-row units (1, 2, or 4); gblocks:
  -- blocks per SM (1, or 2 with tiles of up to 64 rows, within 128
  -- registers); gstages: pipeline stages (2 to 4); gbk: inputs per stage
  -- (32, 64).
  local function pick(key, default, allowed)
    if not tune[key] then return default end
    local v = tune_number(key, tune[key])
    for _, a in ipairs(allowed) do if v == a then return v end end
    refuse(string.format("tune: %s=%d is not one of %s", key, v, table.concat(allowed, ", ")))
  end
  local blocks = pick("gblocks", 1, {1, 2})
  local limit = (shared_limit(spec.arch) + 1024) // blocks - 1024
  local function stage_floats(mt, bk) return 32 * mt * (bk + 4) + bk * (GEMM_BN + 8) end
  -- 128-row tiles on sm_90 (3 stages of them fit; on sm_80 their layer
  -- takes every register, so the kernel spills around its calls)
  local tall = blocks == 1 and spec.arch == 90 and 4 * 3 * stage_floats(4, 32) <= limit
  local max_mt = pick("gmt", tall and 4 or 2,
                      blocks == 1 and {1, 2, 4} or {1, 2})
  local stages = pick("gstages", 0, {2, 3, 4})
  -- A layer's tiles: of the heights 32 m (m = max_mt, max_mt / 2, ... 1),
  -- the one that leaves each block the fewest rows over a full chunk (waves
  -- of tiles x rows per tile), ties to the taller (fewer operand loads per
  -- product).  For each chunk the kernel takes this height or half of it,
  -- by the same measure over the chunk's rows (grid.cut, product).
  local function block_rows(outputs, m)
    local tiles = (rows + 32 * m - 1) // (32 * m) * ((outputs + GEMM_BN - 1) // GEMM_BN)
    local slots = SMS * blocks
    return (tiles + slots - 1) // slots * m
  end
  local function gemm_layer(inputs, outputs)
    local m_tiles, m = max_mt, max_mt // 2
    while m >= 1 do
      if block_rows(outputs, m) < block_rows(outputs, m_tiles) then m_tiles = m end
      m = m // 2
    end
    return {inputs = inputs, outputs = outputs, m_tiles = m_tiles}
  end
  local layers = {gemm_layer(D, H), gemm_layer(H, H), gemm_layer(H, D)}
  local tallest = math.max(layers[1].m_tiles, layers[2].m_tiles, layers[3].m_tiles)
  -- 64 inputs a stage where no tile is taller than 32 rows and 3 stages
  -- fit (faster there).  With 64-row tiles the layer then takes every
  -- register and the kernel spills around its calls (ptxas 13.0, sm_90:
  -- 48 to 64 bytes at D=2 and 16, H=656 to 768, whose layers 1 and 2 take
  -- 64-row tiles; none with 32 inputs); with 128-row ones too.
  local bk = pick("gbk", (tallest == 1 and 4 * 3 * stage_floats(tallest, 64) <= limit) and 64 or 32, {32, 64})
  local a_floats, b_floats = 32 * tallest * (bk + 4), bk * (GEMM_BN + 8)
  if stages == 0 then  -- as many as fit, up to 4 (3 with two blocks per SM)
    stages = blocks == 1 and GEMM_STAGES or 3
    while stages > 2 and 4 * stages * (a_floats + b_floats) > limit do stages = stages - 1 end
  end
  local shared = 4 * stages * (a_floats + b_floats)
  if shared > limit then return nil end
  return variant(spec, "gemm", "grid.cut",
                 {threads = GEMM_THREADS, rows = 32 * tallest, blocks = 1, shared = shared}, {
    gemm = true,
    scratch_rows = rows,
    scratch_data = SCRATCH_DATA,
    grid_blocks_per_sm = blocks,
    layers = layers,
    x_stride = round_up(D, 4), h_stride = round_up(H, 4),
    gemm_bn = GEMM_BN, gemm_bk = bk, gemm_stages = stages,
    weights = weights,
  })
end

-- "1:4" -> {1, 4}
local function list_of_ints(key, text, default)
  if not text then return default end
  local out, start = {}, 1
  while start <= #text do
    local stop = (string.find(text, ":", start) or (#text + 1))
    out[#out + 1] = tune_number(key, string.sub(text, start, stop - 1))
    start = stop + 1
  end
  return out
end

-- Matrix-unit strategy (mma.cut): as tiled, with the products on mma.sync.
-- 8 warps side by side over each layer's outputs, each with m_tiles tiles
-- of 16 rows (so rows = 16 m_tiles) and up to 4 tiles of 8 columns.
-- Returns nil before sm_80 or where the activations do not fit.
local function mma_layer(inputs, outputs, warps_n)
  local n_tiles = math.max(1, math.min(4, (outputs + 8 * warps_n - 1) // (8 * warps_n)))
  return {inputs = inputs, outputs = outputs, n_tiles = n_tiles, cols = 8 * n_tiles * warps_n}
end

local function mma(spec, kind, max_rows, suffix, tune)
  if spec.arch < 80 then return nil end
  local D, H = spec.dim, spec.hidden
  local es = mma_element_bytes(kind)
  -- Row strides: 4 (tf32: scalar fragment loads) or 8 (16-bit: float2
  -- loads) floats past a multiple of 32 spread a fragment over all banks.
  local pad = es == 2 and 8 or 4
  local x_stride, h_stride = round_up(D, 32) + pad, round_up(H, 32) + pad
  local warps_n = 8  -- all of the block's 256 threads side by side
  local layers = {mma_layer(D, H, warps_n), mma_layer(H, H, warps_n), mma_layer(H, D, warps_n)}
  local cols = 0
  for _, l in ipairs(layers) do cols = math.max(cols, l.cols) end
  local multi = #solvers[spec.solver].c > 1
  local function bytes(rows, chunk, stages)
    local floats = rows * (x_stride + 2 * h_stride + (multi and 2 * x_stride or 0))
        + (multi and 5 or 3) * chunk
    return 4 * floats + stages * chunk * (cols + 8) * es
  end
  -- tune mblocks: blocks per SM (each gets a share of the SM's shared
  -- memory, 1 KB of it reserved per block, and of its registers).
  local blocks_per_sm = tune.mblocks and tune_number("mblocks", tune.mblocks) or 1
  if blocks_per_sm < 1 or blocks_per_sm > 4 then
    refuse(string.format("tune: mblocks=%d is not one of 1, 2, 3, 4", blocks_per_sm))
  end
  local limit = (shared_limit(spec.arch) + 1024) // blocks_per_sm - 1024
  -- The first that fits, of: the most rows (up to max_rows, or tune mrows),
  -- then tiles of 32 or 16 input rows (64 first for 16-bit operands: 14-19%
  -- faster on an H200 at B=1000 and 65536; tune mchunk), 4 to 2 of them in
  -- flight (tune mstages).
  local allowed = {mrows = {16, 32, 64, 128}, mchunk = {16, 32, 64, 128},
                   mstages = {2, 3, 4, 5, 6, 7, 8}}
  local function choices(key, default)
    if not tune[key] then return default end
    local v = tune_number(key, tune[key])
    for _, a in ipairs(allowed[key]) do
      if v == a then return {v} end
    end
    refuse(string.format("tune: %s=%d is not one of %s", key, v, table.concat(allowed[key], ", ")))
  end
  local row_choices = {}
  for _, r in ipairs(choices("mrows", {max_rows})) do
    local rows = r
    while rows >= 16 do row_choices[#row_choices + 1] = rows rows = rows // 2 end
  end
  for _, rows in ipairs(row_choices) do
    for _, chunk in ipairs(choices("mchunk", es == 2 and {64, 32, 16} or {32, 16})) do
      for _, stages in ipairs(choices("mstages", {4, 3, 2})) do
        if bytes(rows, chunk, stages) <= limit then
          return variant(spec, "mma" .. suffix, "mma.cut",
                         {threads = 32 * warps_n, rows = rows, blocks = 1,
                          shared = bytes(rows, chunk, stages)}, {
            mma = kind,
            weights = mma_weights(kind, D, H),
            m_tiles = rows // 16, warps_n = warps_n,
            x_stride = x_stride, h_stride = h_stride,
            chunk = chunk, stages = stages, tile_cols = cols,
            layers = layers,
            blocks_per_sm = blocks_per_sm,
          })
        end
      end
    end
  end
  return nil
end

-- Warpgroup strategy (wgmma.cut): bf16 and fp16 on wgmma (sm_90a, the
-- arch-specific target: the runtime's and --arch sm_90a) for the Euler
-- solver, D up to 160 and H up to 256 (each rounded up to 16): every weight
-- resident in shared memory (16-bit copies in the matrix units' core-matrix
-- layout), each of 2 warpgroups of a block owning 64 samples through all
-- steps, state and activations in registers.  In place of the 64-row mma
-- kernel (measured on an H200 at D=64, H=256, B=65536, bf16: 657 us against
-- 3371).  tune wgmma=0: never; wgn: outputs per wgmma (64 or 128; default
-- 128 where they split H evenly, 11-12% faster there than 64).
local WG_ROWS, WG_GROUPS = 64, 2
-- D and H rounded up to 16, and the block's shared memory: the three
-- 16-bit weight copies, then fp32 b1, W1's t column, b2, b3.
local function wgmma_shape(spec)
  local Dp, Hp = round_up(spec.dim, 16), round_up(spec.hidden, 16)
  return Dp, Hp, 2 * (Hp * Dp + Hp * Hp + Dp * Hp) + 4 * (3 * Hp + Dp)
end

local function wgmma_ok(spec, tune)
  if tune.wgmma == "0" or spec.arch ~= 90 or not spec.arch_specific then return false end
  if spec.solver ~= "euler" or tune.strategy == "tiled" then return false end
  if spec.precision ~= "bf16" and spec.precision ~= "fp16" then return false end
  -- D up to 160: the state's registers (D / 2) and layer 1's operand
  -- (D / 4) on top of H's; larger D spill some shapes.
  local Dp, Hp, shared = wgmma_shape(spec)
  return Dp <= 160 and Hp <= 256 and shared <= shared_limit(spec.arch)
end

-- groups: warpgroups a block (2; 1 for the one-warpgroup variant
-- "wgmma64", whose blocks spread a batch of up to 64 x SMs over every SM).
local function wgmma(spec, tune, groups)
  local Dp, Hp, shared = wgmma_shape(spec)
  -- 128 outputs a wgmma where they split H evenly (a wgmma of 128 and one
  -- of the rest spill some shapes), else 64.
  local n = (Hp <= 128 or Hp % 128 == 0) and 128 or 64
  if tune.wgn then
    n = tune_number("wgn", tune.wgn)
    if n ~= 64 and n ~= 128 then refuse(string.format("tune: wgn=%d is not one of 64, 128", n)) end
  end
  return variant(spec, groups == WG_GROUPS and "wgmma" or "wgmma" .. WG_ROWS * groups,
                 "wgmma.cut", {threads = 128 * groups, rows = WG_ROWS * groups, blocks = 1,
                               shared = shared}, {
    dim_pad = Dp, hidden_pad = Hp, groups = groups, n_chunk = n,
  })
end

-- Streamed warpgroup strategy (wgstream.cut): tf32 on wgmma (sm_90a, Euler),
-- D up to 64 and H up to 256 (rounded up to 16 and 32).  tf32 weights take
-- 4 bytes (394 KB at D=64, H=256: more than a block's shared memory), so
-- they stream from L2 through a ring of shared-memory stages (bulk copies
-- completing on mbarriers, issued by a producer warpgroup), in the order
-- the products use them; each of 2 warpgroups owns 64 samples with h1 in
-- registers.  Layer 2 goes by chunks of n_chunk outputs (64 where they
-- split H evenly, else 32), each chunk's SiLU the A operand of layer 3's
-- inputs there at once (h2 is never whole).  Over a cluster of 2 blocks,
-- each copies half of every piece into both (multicast): half the L2
-- reads.  Measured on an H200 at D=64, H=256, B=65536 (e85bdbc and the
-- trees before it): 1208-1244 us with 64 outputs a chunk over clusters of
-- 2, 1313 in blocks alone, 1339 with 32, 1672 over clusters of 4 (the
-- 64-row mma kernel: 4343).  tune wgstream=0: never; wsn=32|64: outputs a
-- chunk; wsc=1|2|4: blocks a cluster; wsp=1: pipelined as fp32 (1311-
-- 1326); wspp=1: the warpgroups take turns (1241-1255).
local WS_GROUPS = 2
--
-- fp32 (wgstream3.cut; tune ws3=0: none): the same as three tf32 products
-- (tf32x3), the weights' high and low parts streamed together, one
-- consumer warpgroup a block (h1's low part, 64 KB, in shared memory), 32
-- outputs a chunk, the next chunk's layer 2 in flight during a chunk's
-- SiLU (pipelined; tune wsp=1 does the same for tf32), blocks alone by
-- default.  Measured on an H200 at D=64, H=256, B=65536: 4.65-4.68 ms in
-- blocks alone, 4.84-4.87 over clusters of 2 (the 64-row mma kernel:
-- 7.93).
local function wgstream_layout(spec, tune)
  if tune.wgstream == "0" or spec.arch ~= 90 or not spec.arch_specific then return nil end
  if spec.solver ~= "euler" or tune.strategy == "tiled" then return nil end
  local split = spec.precision == "fp32"  -- tf32x3
  if spec.precision ~= "tf32" and not (split and tune_switch(tune, "ws3")) then return nil end
  local Dp, Hp = round_up(spec.dim, 16), round_up(spec.hidden, 32)
  if Dp > 64 or Hp > 256 then return nil end
  -- fp32 is pipelined (the next chunk's layer 2 in flight during a
  -- chunk's SiLU), 32 outputs a chunk; tf32 is not
  local pipelined = split
  -- Warpgroup 1 starts each step's layer 1 once warpgroup 0's products
  -- are done (tune wsg=0: as it comes), so that each one's SiLU of h1
  -- (MUFU-bound) runs beside the other's products, not at the same time
  -- (measured on an H200, D=64, H=256, B=65536: 1.0-3.1% faster in each
  -- of 11 pairs over four calls, medians 1195-1224 us against 1218-1251;
  -- otherwise, clock64 stamps showed, the two keep in step, within about
  -- 1,000 of a step's 16,500 cycles).
  local stagger = not split
  local nc = tune.wsn and tune_number("wsn", tune.wsn) or Hp % 64 == 0 and not pipelined and 64 or 32
  if nc ~= 32 and nc ~= 64 then refuse(string.format("tune: wsn=%d is not one of 32, 64", nc)) end
  if split then
    nc = 32
  elseif pipelined and nc ~= 32 then
    refuse(string.format("tune: wsn=%d with wsp=1: 32 outputs a chunk only", nc))
  end
  if Hp % nc ~= 0 then return nil end
  local cluster = tune.wsc and tune_number("wsc", tune.wsc) or split and 1 or 2
  if cluster ~= 1 and cluster ~= 2 then
    refuse(string.format("tune: wsc=%d is not one of 1, 2", cluster))
  end
  local kc = math.min(128, Hp)
  -- W1's inputs a piece: tf32 32 where D allows and the pieces are no
  -- larger than W2's (tune ws1=16|32; with the stagger, 1197-1199
  -- us against 1195-1204 by 16 in one call, a narrower spread: 1190-1207
  -- against 1185-1215), fp32 16
  local k1 = tune.ws1 and tune_number("ws1", tune.ws1) or 32
  if k1 ~= 16 and k1 ~= 32 then refuse(string.format("tune: ws1=%d is not one of 16, 32", k1)) end
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
  local groups = split and 1 or WS_GROUPS
  local stage_bytes = (split and 2 or 1) * largest
  local fixed = (split and 4 * 64 * (Hp + nc) + 16 or 0) + 4 * (Dp // 2) * 128 * groups + 4 * (3 * Hp + Dp)
  local stages = math.min(16, (shared_limit(spec.arch) - fixed) // (stage_bytes + 16))
  -- A warpgroup holds every W1 piece (layer 1) or a chunk's W2 pieces
  -- (layer 2) before it releases one.
  if stages < math.max(Dp // k1, Hp // kc) then return nil end
  -- The stagger needs a ring shorter than a step's pieces: warpgroup 0
  -- then cannot take the next step's W1 (and end its layer 1 twice)
  -- before warpgroup 1 has started this step's.
  stagger = stagger and stages < #pieces
  return {dim_pad = Dp, hidden_pad = Hp, n_chunk = nc, k_chunk = kc, w1_k = k1, pieces = pieces, pipelined = pipelined,
          stagger = stagger,
          floats = offset, stage_bytes = stage_bytes, stages = stages, cluster = cluster,
          split = split, groups = groups, shared = stages * stage_bytes + fixed + 16 * stages}
end

local function wgstream(spec, l)
  return variant(spec, l.split and "wgstream3" or "wgstream",
                 l.split and "wgstream3.cut" or "wgstream.cut",
                 {threads = 128 * (l.groups + 1), rows = 64 * l.groups * l.cluster,
                  blocks = l.cluster, shared = l.shared}, {
    dim_pad = l.dim_pad, hidden_pad = l.hidden_pad, n_chunk = l.n_chunk, k_chunk = l.k_chunk, w1_k = l.w1_k,
    pieces = l.pieces, stage_bytes = l.stage_bytes, stages = l.stages, pipelined = l.pipelined,
    stagger = l.stagger,
  })
end

-- Small batches of bf16/fp16 with every weight on one SM (any solver): rmma.cut, a
-- block of H / 16 warps (H rounded up to 16) a group of 8 samples, W2 and
-- W3 in registers.  nil where the shape does not fit.
local RMMA_ROWS = 8
-- The layout for a shape: 16-unit tiles a warp (mw), W1 in registers or
-- shared memory, the block's threads and shared memory; nil where a
-- thread's registers cannot hold its weights.  Wider warps read less
-- shared memory a step (each warp reads all of x and h1), but a warp's
-- work is serial and runs on one of the SM's four schedulers: two tiles a
-- warp only where that leaves 8 warps or more (measured on an H200 at
-- d481666+, B=8, bf16: D=64, H=256, 8 warps of 2 tiles 37.0 us, 16 of 1
-- 39.9; D=128, H=128, 4 of 2 38.6, 8 of 1 30.3; D=64, H=64, 2 of 2 27.6,
-- 4 of 1 19.0); W1 in registers where they hold it.
--
-- Over a cluster of C > 1 blocks (tune rcl=C, 2 or 4; sm_90, Euler): every block computes layer 1 in full (C tiles a warp,
-- W1 in registers where they hold it), owns 1/C of layer 2's tiles (one a
-- warp) and the same share of layer 3's inputs; each block sums its warps'
-- partials of v and sends them to every block (st.async, as the cluster
-- kernel), which add b3 and the C partials in rank order: every block
-- keeps the same x.  A step's products are spread over C SMs (rmma: 400
-- mma a step on one SM at D=64, H=256, about 6 cycles each a scheduler),
-- for one exchange.  Measured on an H200 (bf16, D=64, H=256, B=8): 40.3 us
-- with 4 blocks, 38.5 with 2, against 34.4 on one SM: the exchange costs
-- more than the products it spreads, so it is not planned by default.
local function rmma_layout(spec, tune, C)
  local Dp, Hp = round_up(spec.dim, 16), round_up(spec.hidden, 16)
  local es = spec.precision == "tf32" and 4 or 2  -- bytes a weight copy's element
  local tiles = Hp // 16
  local widths = tiles % 2 == 0 and tiles // 2 >= 8 and {2, 1} or {1}
  if tune.rmw then
    local w = tune_number("rmw", tune.rmw)
    if w ~= 1 and w ~= 2 and w ~= 4 then refuse(string.format("tune: rmw=%d is not one of 1, 2, 4", w)) end
    widths = {w}
  end
  local places = {true, false}  -- W1 in registers, then in shared memory
  if tune.rw1 then
    if tune.rw1 ~= "regs" and tune.rw1 ~= "smem" then
      refuse("tune: rw1=" .. tune.rw1 .. " is not one of regs, smem")
    end
    places = {tune.rw1 == "regs"}
  end
  if C > 1 then
    if spec.arch < 90 or spec.solver ~= "euler" then return nil end
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
        -- W2 (mw Hp / 4) and W3 (mw Dp / 4), twice that in tf32; 3 for one state element, 8 an
        -- element (9 with a stage sum) and 2 a warp (the update's loads in
        -- flight) for several, at most 8; 42 more.  ptxas 13.0, sm_90: 122
        -- at D=64, H=256 with one tile a warp; 201 at D=160, H=128; D=80,
        -- H=240 spills at 136 and D=200, H=80 (11 elements) at 255 with Heun.
        -- Over a cluster a thread takes whole float4s of v (4 elements each).
        local per_thread = C > 1 and 4 * ((2 * Dp + threads - 1) // threads)
            or (8 * Dp + threads - 1) // threads
        local multi = #solvers[spec.solver].c > 1
        local elements = per_thread == 1 and 3
            or (multi and 9 or 8) * per_thread + 2 * warps
        -- tf32: and layer 1's accumulators past two tiles a warp (8 a
        -- tile; ptxas 13.0, sm_90, D=64, H=256: 242 over clusters of 2,
        -- 255 and a spill over 4).
        local regs = mw * (Hp + Dp + (w1_regs and C * Dp or 0)) * es // 8 + elements + 42 + 8 * (mw - 1)
            + (es == 4 and 8 * math.max(0, C * mw - 2) or 0)
        local limit = math.min(255, 65536 // threads // 8 * 8)
        if regs <= limit and threads <= 1024 and per_thread <= 8
            and (C == 1 or shared <= shared_limit(spec.arch)) then
          return {dim_pad = Dp, hidden_pad = Hp, warp_tiles = mw, w1_regs = w1_regs,
                  threads = threads, shared = shared, cluster = C,
                  name = C > 1 and "rmma_c" .. C or "rmma"}
        end
      end
    end
  end
  return nil
end

-- fp32 (sm_90, Euler): rmma3.cut, the same cluster form in tf32x3 (every
-- product three tf32 products: fp32 accuracy).  The weights' high and low
-- parts take four times bf16's bytes, so a cluster of 4 blocks owns each 8
-- samples (rows = 8) or 16 (two n-tiles a weight operand: rows = 16):
-- every block computes layer 1 in full (W1's parts in shared memory) and
-- owns a quarter of layer 2's m-tiles, two warps a tile, each over half of
-- its inputs (W2's parts in registers: H / 2 a thread), and layer 3 over
-- that warp's 8 units (W3's: D / 2).  nil where the shape does not fit.
local RMMA3_CLUSTER = 4
local function rmma3_layout(spec, tune, rows)
  -- (not where H < 64, whose few weights the tiled kernel streams quickly;
  -- nor under tune grid=1, the grid strategy at any shape)
  if spec.arch < 90 or spec.solver ~= "euler" or spec.hidden < 64 or tune.grid == "1" then return nil end
  -- (H rounded up to 16 C, so that every block owns as many m-tiles: the
  -- padding's units have zero weights and biases)
  local C, N = RMMA3_CLUSTER, rows // 8
  local Dp, Hp = round_up(spec.dim, 16), round_up(spec.hidden, 16 * C)
  local own = Hp // 16 // C
  local warps = 2 * own
  -- Registers a thread: W2's and W3's parts, (H + D) / 2 (both padded), 3
  -- for each state element (whole float4s of v a thread), 4 for each of
  -- layer 3's output tiles a warp finishes (half of them), 12 more where D
  -- is padded, within 190; and not two float4s of the state where D / 16
  -- (layer 3's m-tiles) is odd.  ptxas 13.0 (NVRTC), sm_90: D=64, H=256 at
  -- 180 (8 rows) and 188 (16) takes 248-254 registers; D=52 to 63, H=193
  -- to 256 (8 rows: 180 + 12), D=112, H=128 (8 rows) and D=80, H=192 (16
  -- rows) spill, D=128, H=128 (8 rows, 168) does not.
  local words = 2 * Dp * N  -- float4s of v
  local elements = 4 * ((words + 32 * warps - 1) // (32 * warps))
  local tiles3 = Dp // 16 * N
  local regs = (Hp + Dp) // 2 + 3 * elements + 4 * ((tiles3 + 1) // 2) + (Dp ~= spec.dim and 12 or 0)
  if regs > 190 or elements > 8 or (elements > 4 and (Dp // 16) % 2 == 1) then return nil end
  -- Shared memory: W1's parts (8 Hp Dp bytes), layer 3's partials (a
  -- tile pair's Dp x rows, fp32) and the blocks' sums of them (two steps'
  -- worth), the B operands of x and h1 (high and low parts), the tile
  -- pairs' swap of layer 2, two mbarriers.
  local shared = 8 * Hp * Dp + 16 * words * (own + 2 * C) + 64 * N * (Dp + Hp) + 256 * N * warps + 16
  if shared > shared_limit(spec.arch) then return nil end
  return {dim_pad = Dp, hidden_pad = Hp, threads = 32 * warps, shared = shared, cluster = C, rows = rows,
          elements = elements, template = "rmma3.cut", name = "rmma3_r" .. rows}
end

-- fp32's last batch on rmma3 (tune rmma=N: N): four waves of 30
-- clusters (an H200 runs 30 clusters of 4 at once) of 16 samples;
-- rmma3_last_narrow where 16 are not planned.  Measured on an H200, S=32, us, at B=241-480 /
-- 960 / 1440 / 1920 / 2880 (the plan before: the cluster kernel by 8
-- samples a cluster over three waves or the 8-row tiled kernel, then
-- wgstream3 or the tiled kernel): D=64, H=256 by 16 144 / 282 / 420 / 563
-- / 583 (wgstream3), before 200-212 (B=256-480) / 493 / 581 / - / 582;
-- D=32, H=256 108 / 213 / 315 / 418 / 533; D=17, H=200 108 / 208 / 309 /
-- 413 / 448; D=32, H=128 74 / 90 / 175 / 176 / 211; D=16, H=64 53 / 56 /
-- 64 / 68 / 95,
-- before 87 (tiled8, B=480 and 960) / 95 (wgstream3); D=128, H=128 by 8
-- 215-228 at 241-480, 338 at 720, before 346 (tiled8) at 960.
local RMMA3_LAST, RMMA3_LAST_NARROW = 1920, 720

-- Where by 16 is not planned, by 8 up to (tune rmma=N: N): the 8-row tiled
-- kernel's last batch where wgstream3 follows it; RMMA3_LAST where H > 128
-- and the tiled kernel would follow; else three waves (RMMA3_LAST_NARROW).
-- Measured on an H200, S=32, us, rmma3 by 8 against the plan before at B=
-- 960 / 1056 / 1200 / 1440: D=64, H=128 170 / 248 / 249 / 252 against
-- 246 / 246 (tiled8) / 247 / 247 (wgstream3); D=64, H=192 317 / 395 / 395 /
-- 475 against 605 / 605 / 402 / 402; D=80, H=160 378 / 459 / 468 / 560
-- against 679 / 679 / 1008 / 1008 (tiled); D=96, H=192 401 / 487 / 496 /
-- 597 against 778 / 778 / 1147 / 1147; but D=96 and 128, H=128 393 and 445
-- at 960 against tiled8's 370 and 346.
local function rmma3_last_narrow(rm, ws)
  if ws and ws.split then return 1056 end
  return rm.hidden_pad > 128 and RMMA3_LAST or RMMA3_LAST_NARROW
end

-- By 16 samples a cluster only where each thread keeps at most 4 state
-- elements (tune r16=1: wherever it fits), and after two waves by 8 where
-- its blocks have fewer than 6 warps (H, rounded up to 64, under 192; at
-- D=48, H=192, 6 warps, by 16 took 111.9 / 112.4 us at B=241 / 480
-- against 145.4 / 146.1 by 8).  Measured on an H200,
-- S=32, us, by 8 against by 16 at B=480 / 720 / 960 / 1440 / 1920: D=64,
-- H=128 (8 elements by 16) 88.6 / 169 / 170 / 252 / 333 against 113.5 /
-- 220 / 221 / 331 / 438; D=32, H=128 (4 warps) 66.8 / 126 / 128 / 188 /
-- 250 against 74.8 / 90 / 91 / 176 / 178; D=16, H=64 (2 warps) 44.8 /
-- 49.5 / 51.3 / 98 / 99 against 54.1 / 55.5 / 56.6 / 64 / 68; D=32,
-- H=256 147 / 219 / 290 / 431 / 574 against 109 / 210 / 213 / 317 / 423.
local RMMA3_WIDE_ELEMENTS, RMMA3_WIDE_WARPS, RMMA3_NARROW_WAVES = 4, 6, 2

-- tf32's last batch (tune rmma=N: N): five waves of 66 clusters of 2
-- (measured on an H200, D=64, H=256, S=32: rmma_c2 58.7 us at B=528, 113.3
-- at 1056, 221.8 at 2112, 275.6 at 2640, 327.5 at 3168, where wgstream
-- takes 295-298 and mma16 300-303).
local RMMA_TF32_LAST = 2640

-- The layout where the kernel applies, else nil.  tf32 (sm_90, Euler):
-- its weights take twice the registers, so over a cluster (tune rcl=C: of
-- C blocks; by default 2, else 4, the first that fits).
local function rmma_plan(spec, tune)
  if tune.rmma == "0" then return nil end
  if spec.arch < 80 or tune.strategy == "tiled" then return nil end
  local l
  if spec.precision == "tf32" then
    if spec.arch < 90 or spec.solver ~= "euler" then return nil end
    local sizes = {2, 4}
    if tune.rcl then
      local c = tune_number("rcl", tune.rcl)
      if c ~= 0 and c ~= 2 and c ~= 4 then refuse(string.format("tune: rcl=%d is not 0, 2 or 4", c)) end
      sizes = c > 0 and {c} or {}
    end
    for _, c in ipairs(sizes) do
      l = l or rmma_layout(spec, tune, c)
    end
  elseif spec.precision == "bf16" or spec.precision == "fp16" then
    l = rmma_layout(spec, tune, 1)
  elseif spec.precision == "fp32" then
    l = rmma3_layout(spec, tune, 8)
  else
    return nil
  end
  if not l and (tune.rmw or tune.rw1) then
    refuse(string.format("tune: rmw=%s, rw1=%s: the weights of D=%d, H=%d do not fit a thread's registers",
                         tune.rmw or "any", tune.rw1 or "any", spec.dim, spec.hidden))
  end
  return l and l.shared <= shared_limit(spec.arch) and l or nil
end

local function rmma(spec, tune, l)
  return variant(spec, l.name, l.template or "rmma.cut",
                 {threads = l.threads, rows = l.rows or RMMA_ROWS, blocks = l.cluster, shared = l.shared},
                 {dim_pad = l.dim_pad, hidden_pad = l.hidden_pad, warp_tiles = l.warp_tiles,
                  w1_regs = l.w1_regs})
end

-- The matrix-unit kind of each precision.  fp32 uses tf32x3 (fp32
-- accuracy) for large batches, where it beats the FMA kernel.
local mma_kinds = {fp32 = "tf32x3", tf32 = "tf32", bf16 = "bf16", fp16 = "fp16"}

-- Every --tune key the planner reads (README: `--tune`); any other is a
-- mistake, refused rather than ignored.
local TUNE_KEYS = {
  "cluster", "clusters", "cwaves", "fold", "gbk", "gblocks", "gemm", "gfrom", "gmt",
  "grid", "gstages", "mblocks", "mchunk", "mfrom", "mma", "mrows", "mstages",
  "r16", "r8", "rcl", "rfrom", "rmma", "rmw", "rows", "rw1", "strategy", "tchunk", "tcluster",
  "tstages", "wg1", "wgmma", "wgn", "wgstream", "ws1", "ws3", "wsc", "wsfrom",
  "wsn",
}
local function check_tune_keys(tune)
  local known = {}
  for _, key in ipairs(TUNE_KEYS) do known[key] = true end
  local unknown = {}
  for key in pairs(tune) do
    if not known[key] then unknown[#unknown + 1] = key end
  end
  if #unknown > 0 then
    table.sort(unknown)
    refuse(string.format("tune: unknown %s %s (known: %s)", #unknown == 1 and "key" or "keys", table.concat(unknown, ", "),
                         table.concat(TUNE_KEYS, ", ")))
  end
end

return function(spec)
  check_tune_keys(spec.tune)
  local solver = solvers[spec.solver]
  if not solver then refuse("solver " .. spec.solver .. " has no tableau") end
  if not mma_kinds[spec.precision] then
    refuse("precision " .. spec.precision .. " has no strategy")
  end
  -- spec.tune: planner overrides from FLOWGEN_TUNE ("cluster=16,rows=1:4"),
  -- for experiments and benchmarks.
  local tune = spec.tune
  -- The matrix-unit kernel, where the shape and arch allow it (mma=0: never).
  local mma_kind = tune.mma ~= "0" and tune.strategy ~= "tiled" and mma_kinds[spec.precision] or nil
  -- fp32 on the matrix units pays where a layer has outputs for every warp.
  if mma_kind == "tf32x3" and spec.hidden < 64 then mma_kind = nil end
  local weight_bytes = 4 * ((spec.dim + 1) * spec.hidden + spec.hidden * spec.hidden
                            + spec.hidden * spec.dim)
  -- Large batches of fp32 shapes with 512 KB of weights or more: the gemm
  -- strategy (tune gemm=0: never; gemm=1: whatever the weights).
  local gemm_ok = mma_kind == "tf32x3" and spec.arch >= 80 and tune.gemm ~= "0"
      and tune.strategy ~= "tiled" and (tune.gemm == "1" or weight_bytes >= 512 * 1024)
      and gemm(spec, {}, tune) ~= nil
  if mma_kind and not gemm_ok and not mma(spec, mma_kind, 64, "", tune) then mma_kind = nil end
  -- Small batches of shapes with 512 KB of weights or more: the grid
  -- strategy up to 64 samples (tune grid=0: never; grid=1: at any size,
  -- instead of the cluster kernel).
  local grid_rows = 0
  if tune.grid == "1" or (tune.grid ~= "0" and weight_bytes >= 512 * 1024) then
    if tune.strategy ~= "tiled" and spec.arch >= 70 then grid_rows = 64 end
  end
  if grid_rows > 0 and not grid(spec, 8, grid_rows, grid_rows) then grid_rows = 0 end
  local scratch = 0
  if grid_rows > 0 then
    scratch = scratch_activations(spec, grid_rows, spec.dim, spec.hidden, false)
  end
  if gemm_ok then
    scratch = math.max(scratch, scratch_activations(spec, gemm_rows(spec), round_up(spec.dim, 4),
                                                    round_up(spec.hidden, 4), true))
  end
  local wg = wgmma_ok(spec, tune) and spec.precision or nil
  local wg_pad = wg and {wgmma_shape(spec)} or nil  -- {D, H rounded up to 16, shared bytes}
  -- bf16/fp16, small batches: the register-resident kernel, in place of
  -- the cluster kernel (all but its first wave where D >= 64: see below),
  -- for two waves of blocks (one a SM; measured on an
  -- H200 at d481666+, bf16, B=8 / 1000 / 2112: D=64, H=256, 37.0 / 38.2 /
  -- 72.4 us where the cluster kernel and wgmma64 took 39.1 / 111 / 111;
  -- D=17, H=200, with W1 still in shared memory, 27.7 / 28.8 / 53.6
  -- against the tiled kernel's 546 and wgmma64's 84).  tune rmma=N: up to batch N (up to 8448), rmma=0: none.
  local rm = rmma_plan(spec, tune)  -- its layout
  local ws = mma_kind and wgstream_layout(spec, tune)  -- (planned beside the mma kernels only)
  -- the matrix units' weight copies, unless wgstream3 takes the mma
  -- kernel's place and no gemm variant reads them
  local copies_kind = not (ws and ws.split and not gemm_ok) and mma_kind or nil
  -- (tf32: over clusters of rm.cluster blocks, RMMA_TF32_LAST by default)
  -- (fp32: rmma3 by 16 samples a cluster after 8 where that fits and
  -- leaves a thread at most 4 state elements; tune r16=0: never, r16=1:
  -- wherever it fits)
  local rm_wide = rm and rm.template and tune_switch(tune, "r16") and rmma3_layout(spec, tune, 16)
  if rm_wide and rm_wide.elements > RMMA3_WIDE_ELEMENTS and tune.r16 ~= "1" then rm_wide = nil end
  local rm_last = rm and (tune.rmma and tune_number("rmma", tune.rmma)
                          or rm.template and (rm_wide and RMMA3_LAST or rmma3_last_narrow(rm, ws))
                          or rm.cluster > 1 and RMMA_TF32_LAST or 2 * RMMA_ROWS * SMS)
  if rm_last and rm_last > WG_ROWS * SMS then
    refuse(string.format("tune: rmma=%d is not within 0 to %d", rm_last, WG_ROWS * SMS))
  end
  local blocks = tune.cluster and tune_number("cluster", tune.cluster) or 4
  if blocks ~= 2 and blocks ~= 4 and blocks ~= 8 and blocks ~= 16 then
    refuse(string.format("tune: cluster=%d is not one of 2, 4, 8, 16", blocks))
  end
  -- A block's own partial of an exchange is kept local, not sent to
  -- itself through distributed shared memory (the folded cluster kernel
  -- and rmma3).  Measured on an H200, fp32,
  -- S=32, us with and without: D=64, H=128 (folded) B = 8 / 64 / 240
  -- 17.6 / 26.5 / 51.8 against 18.2 / 29.0 / 59.6; rmma3 (by 16) D=64,
  -- H=256 B = 480 / 960 140.8 / 277.6 against 146.5 / 285.5, D=48, H=192
  -- 110.6 / 213.0 against 113.6 / 221.4.  Not folded, the Euler step
  -- moved to the lanes that hold each output's sum was slower (D=64,
  -- H=256, B=8 26.4 against 25.2), and so was the own partial stored in
  -- the own slot by a shared store with each warp arriving on the local
  -- mbarrier (B=8 26.0 against 25.1; faster only at D=64, H=256 from 3
  -- samples a cluster; racecheck reports its stores against the Euler
  -- step's reads).
  local l2_by_warp = true
  -- The cluster kernel's layer 1 by pairs of lanes (two units over half of
  -- x each: half the loads of x).  Measured on an H200, fp32, D=64, H=256: 34.6 us at B=8
  -- against 34.7, 49.5 at B=48 against 51.0, 60.9 at B=64 against 62.0,
  -- the halves then x's first and second 32 inputs: a 2-way bank conflict
  -- on every load (ncu: 8 wavefronts an LDS.128, not 2).  Alternate
  -- groups of 4 (the pair's loads side by side): 28.6 us at B=8 against
  -- 29.7, 51.6 at B=64 against 54.8, 229.7 at B=480 against 247.6.
  -- tune rfrom=N: rmma from batch N, the cluster kernel before it (below).
  local rm_from = rm and tune.rfrom and tune_number("rfrom", tune.rfrom)
  local clusters_ok = tune.strategy ~= "tiled" and tune.grid ~= "1"
  -- Where rmma is planned, whether the cluster kernel takes the batches
  -- before it (where D >= 64, in tf32 whatever D, unless tuned; see below)
  local clusters_first = rm and clusters_ok
      and (rm_from and rm_from > 1 or not rm_from and (spec.dim >= 64 or rm.cluster > 1) and rm_last > 1)
  -- The cluster kernel with layer 3 folded into the next step's layer 1
  -- (Euler; two more packed segments, M and c; tune fold=0: never, fold=1:
  -- wherever it fits).  A step loses layer 3 and the Euler barrier, and
  -- each block's D x H + D x H / C products become H x H / C, but each
  -- block receives H-wide partials, not D-wide.  Measured on an H200, fp32, S=32, us without and with it: B=8
  -- (a sample a cluster), D=32, H=128: 20.5 / 18.8; D=64, H=128: 21.0 /
  -- 18.5; D=16, H=64: 17.7 / 17.7; D=32, H=256: 25.6 / 27.6; D=64, H=256:
  -- 27.7 / 28.9 (over clusters of 8: 28.2).  B=64 (3 samples): D=64, H=128
  -- 31.5 / 28.4; D=32, H=128 26.9 / 29.8; D=16, H=64 22.5 / 22.5.  So:
  -- where H <= 128, a cluster of one sample, or more where H <= 2 D.
  local fold_forced = tune.fold == "1"
  local fold = tune_switch(tune, "fold") and clusters_ok and (fold_forced or spec.hidden <= 128)
      and (not rm or clusters_first)
  if fold then
    local probe = cluster(spec, blocks, 1, 0, l2_by_warp, true)
    fold = probe ~= nil and probe.fold
  end
  -- whether the variant of `rows` samples a cluster folds (where it fits)
  local function folds(rows)
    return fold and (fold_forced or rows == 1 or spec.hidden <= 2 * spec.dim)
  end
  local variants = {}
  -- Small batches: clusters of `blocks` blocks, in fp32 whatever the
  -- precision.  A variant with r rows (samples) a cluster serves batches up
  -- to r times the clusters an H100/H200 runs at once (measured on an
  -- H200: 30 clusters of 4 blocks run in one wave, 36 to 60 in two, 72 in
  -- three; of 8 blocks, 8 clusters), the last (8 rows) over more waves
  -- where it still beats what follows.  Measured there at D=64, H=256
  -- (fp32 and tf32 alike), µs at r rows and w waves: 61.6 (r=3), 76.4
  -- (4), 102.9 (6), 135.1 (8), 266.4 (8, w=2), 397.5 (8, w=3), where the
  -- 8-row tiled kernel takes 493 (fp32) and mma16 303 (tf32); at D=32,
  -- H=256, 92 / 181 / 270 (8; w = 1, 2, 3) against 421 (fp32) and 282
  -- (tf32); at D=32, H=128, 65 (8, one wave) against 198 and 116, and at
  -- D=16, H=64, 50 against 86 (fp32).  (With the step made shorter since,
  -- at D=64, H=256: 51.4, 61.7, 84.6, 109.3, 215.1, 320.5 in fp32; tf32
  -- runs the same kernel, whose 320 over three waves still loses to
  -- mma16's 300.)  So: with 256 KB of weights or more,
  -- three waves in fp32 and two in tf32; one wave otherwise.
  local at_once = {[2] = 48, [4] = 30, [8] = 8, [16] = 4}
  local clusters_at_once = tune.clusters and tune_number("clusters", tune.clusters) or 0
  if clusters_at_once < 1 then
    clusters_at_once = at_once[blocks] or 4
  end
  -- tune cwaves=N: the last variant of the cluster kernel over N waves
  -- (where it is the last small-batch kernel)
  local cwaves = tune.cwaves and tune_number("cwaves", tune.cwaves)
  if cwaves and (cwaves < 1 or cwaves > 8) then
    refuse(string.format("tune: cwaves=%d is not one of 1 to 8", cwaves))
  end
  local covered = 0
  -- The cluster kernel's variants, a sample a cluster first, up to batch
  -- `cap` (nil: the last one over more waves); the last one planned.
  local function add_clusters(cap)
    local last
    for _, rows in ipairs(list_of_ints("rows", tune.rows, {1, 2, 3, 4, 6, 8})) do
      if cap and covered >= cap then break end
      local limit = cap and math.min(cap, rows * clusters_at_once) or rows * clusters_at_once
      local v = cluster(spec, blocks, rows, limit, l2_by_warp, folds(rows))
      if v and limit > covered then
        v.min_batch = covered + 1
        v.own_local = v.fold
        variants[#variants + 1] = v
        covered = limit
        last = v
      end
    end
    return last
  end
  if rm then
    -- Where D >= 64, the (fp32) cluster kernel before rmma while one wave
    -- of clusters of a sample each takes the batch: rmma's layers 1 and 3
    -- grow with D, the cluster kernel's step barely does.  Measured on an
    -- H200, bf16, S=32, B=8 (B=30), us, cluster / rmma: D=64, H=256 27.7
    -- (28.3) / 34.4; D=64, H=128 18.1 (19.0, folded) / 21.6; D=64, H=64
    -- 18.1 (18.6) / 18.9; D=80, H=160 27.2 (28.2) / 28.1 (28.1); but
    -- D=48, H=192 27.3 (28.8) / 25.4; D=48, H=96 19.4 (20.0) / 17.9; D=32,
    -- H=256 25.5 (26.2) / 25.8 (26.0); D=32, H=128 18.1 (18.8) / 17.5;
    -- D=16, H=64 17.7 (18.0) / 12.6; from 31 on (two samples a cluster)
    -- rmma everywhere.  tune rfrom=N: rmma from batch N (1: from the
    -- first), the cluster kernel's variants (one wave each) before it.
    -- tf32 (over clusters): the cluster kernel's variants up to 3 samples a
    -- cluster first, whatever D (measured on an H200, S=32, us: D=64,
    -- H=256: rmma_c2 56.4 to 58.7 from B=31 to 528, where 2, 3, 4 and 6
    -- samples a cluster take 36.7, 47.0-49.0, 57.2-60.0 and 79.6; D=32,
    -- H=128: 31.2 at B=91, the cluster kernel 17.6-18.5 to B=30, 25.6-26.9
    -- at 64-90; D=64, H=128: 35.1 against 27.8-30.0 at 64-90; D=48,
    -- H=192: 40.3 against 47.6-49.2, the one shape measured where rmma_c2
    -- wins there).
    -- fp32 (rmma3): the cluster kernel's variants up to 8 samples a
    -- cluster, one wave each (measured on an H200, S=32, us: the cluster
    -- kernel by 8 at B=240 against rmma3 as planned at 241: D=64, H=256
    -- 107.7 against 144.4; D=32, H=256 80.1 against 108.4; D=32, H=128
    -- 48.7 against 64.1; D=16, H=64 33.5 against 43.8).
    local rows_first = rm.template and 8 or rm.cluster > 1 and 3 or 1
    local from = rm_from or clusters_first and math.min(rows_first * clusters_at_once + 1, rm_last) or 1
    if from < 1 or from > rm_last then
      refuse(string.format("tune: rfrom=%d is not within 1 to %d", from, rm_last))
    end
    if clusters_first then
      add_clusters(from - 1)
      if rm_from and covered < from - 1 then
        refuse(string.format("tune: rfrom=%d: the cluster kernel's variants take batches up to %d only",
                             from, covered))
      end
    end
    -- fp32: rmma3 by 8 samples a cluster while one wave of clusters takes
    -- the batch (two where the blocks by 16 would have fewer than 6
    -- warps), then by 16 where that is planned.
    local wide = rm_wide
    local narrow_waves = wide and wide.threads < 32 * RMMA3_WIDE_WARPS and RMMA3_NARROW_WAVES or 1
    -- (tune r8=N: by 8 up to batch N, then by 16)
    local narrow_last = wide and math.min(rm_last, tune.r8 and tune_number("r8", tune.r8)
                                          or RMMA_ROWS * at_once[rm.cluster] * narrow_waves) or rm_last
    local function add_rmma(layout, last)
      if covered >= last then return end
      local v = rmma(spec, tune, layout)
      v.min_batch = covered + 1
      v.max_batch = last
      v.own_local = true
      variants[#variants + 1] = v
      covered = last
    end
    add_rmma(rm, narrow_last)
    if wide then add_rmma(wide, rm_last) end
  elseif clusters_ok then
    local last = add_clusters(nil)
    -- the last one over more waves (tune cwaves=N: N waves)
    local waves = cwaves or weight_bytes >= 256 * 1024 and (spec.precision == "fp32" and 3 or 2) or 1
    if last then
      last.max_batch = last.rows_per_block * clusters_at_once * waves
      covered = last.max_batch
    end
  end
  -- tune tstages: weight tiles of the tiled kernel (2 = one in flight; more
  -- from sm_80).
  local tstages = tune.tstages and tune_number("tstages", tune.tstages) or 2
  if tstages < 2 or tstages > 8 or (tstages > 2 and spec.arch < 80) then
    refuse(string.format("tune: tstages=%d is not one of 2 to 8 (more than 2 from sm_80)", tstages))
  end
  local first = covered > 0 and covered + 1 or 0
  local plain = covered > 0  -- a variant that is not a grid (the fallback of those that are)
  local function add(v, max_batch)
    v.min_batch, v.max_batch = first, max_batch and math.max(first, max_batch) or -1
    variants[#variants + 1] = v
    first = v.max_batch + 1
    plain = plain or v.grid_blocks_per_sm == 0
  end
  if covered == 0 and grid_rows > 0 then
    -- one sample alone (no products on rows of zeros), up to 8, up to 64
    add(grid(spec, 1, 1, grid_rows), 1)
    add(grid(spec, 8, 8, grid_rows), 8)
    add(grid(spec, 8, grid_rows, grid_rows), grid_rows)
  end
  -- Small batches of shapes whose weights (128 KB or more) the cluster
  -- kernel cannot hold: the tiled kernel with a cluster of 2 to 8 blocks per
  -- 8 samples, each block streaming its share of the weights (tune tcluster:
  -- the blocks, 1 = none).  A cluster of 8 runs 14 at once on an H200.
  local split = math.max(2, math.min(8, pow2_floor(weight_bytes // 65536)))
  if tune.tcluster then split = tune_number("tcluster", tune.tcluster) end
  if covered == 0 and spec.arch >= 90 and weight_bytes >= 131072 and split > 1
      and tune.strategy ~= "tiled" then
    if not is_pow2(split) or split > 8 then
      refuse(string.format("tune: tcluster=%d is not one of 1, 2, 4, 8", split))
    end
    -- tune tchunk: the deepest weight tile (input rows) to try, 4 to 128
    -- (measured on an H200 at B=1 and 64: 128 rows take 16-19% off 32 at
    -- D=128, H=512 to D=1024, H=1024).
    local max_chunk = tune.tchunk and tune_number("tchunk", tune.tchunk) or 128
    if max_chunk < 4 or max_chunk > 128 or not is_pow2(max_chunk) then
      refuse(string.format("tune: tchunk=%d is not one of 4, 8, 16, 32, 64, 128", max_chunk))
    end
    local v = tiled(spec, 8, "8c" .. split, split, max_chunk, tstages)
    add(v, v.rows_per_block * (112 // split))
  end
  if mma_kind and spec.precision ~= "fp32" then
    -- tf32, bf16, fp16: the matrix-unit kernel, 16 samples per block while
    -- that fills the GPU once, then up to 64.
    local few, many = mma(spec, mma_kind, 16, "16", tune),
        mma(spec, mma_kind, 64, "", tune)
    -- With wgmma: the one-warpgroup variant ("wgmma64", 64 samples a block)
    -- in place of mma16, from the first batch the small-batch kernels (rmma
    -- or the cluster kernel) leave up to 64 x SMs, so every SM works before the two-warpgroup variant fills
    -- them (measured on an H200, D=64, H=256, bf16, at d350f03: 112-115 us
    -- from B=73 to 8448, against mma16's 206-210 and, from 2113, the
    -- two-warpgroup variant's 163-166).  tune wg1=N starts it at N (at most
    -- mma16's last + 1), wg1=0 leaves it out.
    local one = wg and first
    local few_last = few.rows_per_block * SMS
    if wg and tune.wg1 then
      one = tune_number("wg1", tune.wg1)
      if one == 0 then
        one = nil
      elseif one < first or one > few_last + 1 then
        refuse(string.format("tune: wg1=%d is not 0 or within %d to %d", one, first, few_last + 1))
      end
    end
    if one then few_last = one - 1 end
    if few.rows_per_block < many.rows_per_block and few_last >= first then add(few, few_last) end
    if one then add(wgmma(spec, tune, 1), WG_ROWS * SMS) end
    -- tf32 with wgstream: in place of the 64-row mma kernel, after mma16
    -- (measured on an H200 at D=64, H=256: 317 us at B=2113 and 8448, 336
    -- at 16896, where the mma kernel took 577, 572 and 1133); tune
    -- wsfrom=N: from batch N, the mma kernel before it.
    local ws_from = ws and (tune.wsfrom and tune_number("wsfrom", tune.wsfrom) or first)
    if ws_from and ws_from > first then add(many, ws_from - 1) end
    add(ws and wgstream(spec, ws) or wg and wgmma(spec, tune, WG_GROUPS) or many)
  else
    -- fp32 (and the other precisions where the matrix-unit kernel does not
    -- fit): the tiled FMA kernel, with 8 samples per block while that
    -- fills the GPU once, then 32 (more reuse of each weight read); fp32 on
    -- the matrix units (tf32x3) once 64 samples per block fill the GPU.
    local few = tiled(spec, 8, "8", 1, nil, tstages)
    local many = tiled(spec, 32, "", 1, nil, tstages)
    -- wgstream3 in place of the mma kernel's tf32x3 where it applies (tune
    -- ws3=0: the mma kernel)
    local x3 = ws and ws.split and wgstream(spec, ws)
        or mma_kind and mma(spec, mma_kind, 64, "", tune)
    local wide = gemm_ok and gemm(spec, mma_weights(mma_kind, spec.dim, spec.hidden), tune)
    -- tune gfrom: the smallest batch for the gemm variant; at least one
    -- variant that is not a grid comes before it (the fallback where the
    -- grid cannot be resident).
    local stop = wide and math.max(plain and first or first + 1,
                                   tune.gfrom and tune_number("gfrom", tune.gfrom) or 1057)
    local function add_below(v, max_batch)
      if stop and first >= stop then return end
      if stop and (not max_batch or max_batch >= stop) then max_batch = stop - 1 end
      add(v, max_batch)
    end
    if few.rows_per_block < many.rows_per_block and tune.strategy ~= "tiled"
        and few.rows_per_block * SMS >= first then
      add_below(few, few.rows_per_block * SMS)
    end
    -- tune mfrom: the smallest batch for tf32x3 (default: the mma kernel
    -- once its blocks fill the GPU; wgstream3 after the 8-row tiled kernel,
    -- measured on an H200 at D=64, H=256: 586-594 us from B=1057 to 8448,
    -- where the tiled kernel took 941-1881).
    local from = x3 and (tune.mfrom and tune_number("mfrom", tune.mfrom)
                         or x3.strategy == "wgstream3" and first or x3.rows_per_block * SMS + 1)
    -- Where the matrix-unit kernel owns 32 samples or more per block, it
    -- takes over from the gemm variant once it fills the GPU (measured on
    -- an H200 at B=65536, kernels of 4fc4ac6: 34 TFLOP/s against the gemm
    -- variant's 29-32 at D=128 and 512, H=512; with 16 samples per block,
    -- D=1024, H=1024, 24 against 37; at 9ff18a7 the mma kernel ran 40-42
    -- there, the gemm variant 35-39 at B=4096).
    local resume = wide and x3 and x3.rows_per_block >= 32 and math.max(from, stop + 1) or nil
    if x3 and not resume then
      -- at or below the tiled kernels' start, no 32-row one
      if from > first then add_below(many, from - 1) end
      add_below(x3)
    else
      add_below(many)
    end
    if wide then add(wide, resume and resume - 1) end
    if resume then add(x3) end
  end
  variants[1].min_batch = 0
  -- The cluster kernel's thread-major copies its variants read (wc, wcf).
  local cw, seen = {}, {}
  for _, v in ipairs(variants) do
    local c = v.thread_weights
    if c and not seen[c.segment] then
      seen[c.segment] = true
      cw[#cw + 1] = c
    end
  end
  table.sort(cw, function(a, b) return a.segment < b.segment end)
  -- The packed layout last: it holds the copies of the cluster kernel's
  -- weights that its planned variants read.
  local segments, params_floats = params_layout(spec.dim, spec.hidden, copies_kind,
                                                scratch > 0 and SCRATCH_DATA + scratch,
                                                wg and {wg, wg_pad[1], wg_pad[2]},
                                                rm and {spec.precision, rm.dim_pad, rm.hidden_pad},
                                                ws, cw)
  for _, v in ipairs(variants) do v.params_bytes = 4 * params_floats end
  return {
    template = "file.cut",
    solver = solver,
    params = segments,
    params_floats = params_floats,
    cluster_weights = cw,
    mma_kind = mma_kind,
    mma_copies = copies_kind and not mma_reads_fp32(copies_kind, spec.dim, spec.hidden),
    wgmma_kind = wg,
    wgmma_pad = wg_pad,
    rmma_kind = rm and spec.precision,
    rmma_pad = rm and {rm.dim_pad, rm.hidden_pad},
    wgstream = ws,
    variants = variants,
  }
end
