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

-- Bytes of the model's fp32 weights (W1 with its t column, W2, W3).
function M.weight_bytes(spec)
  local D, H = spec.dim, spec.hidden
  return 4 * ((D + 1) * H + H * H + H * D)
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
    grid_blocks_per_sm = launch.per_sm or 0,
  }
  for k, value in pairs(extra) do v[k] = value end
  return v
end

return M
