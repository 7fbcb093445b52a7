-- params.lua: the packed weight buffer the variants read, `params`: the
-- model's segments (the PyTorch tensors transposed, W1's t column apart),
-- then the copies the planned strategies read, each made by the pack
-- kernel from its strategy's own packing code (its template's "pack"
-- part), then the persistent grids' scratch area.  Each segment starts on
-- a 16-byte boundary so kernels can load it as float4.  A segment: name,
-- count (floats), what (for the source's comment), owner (the strategy
-- module that packs it; "model" for the model's own), and its owner's data.

local lib = import("lib")

local M = {}

-- The owners of the copies in the order they follow the model's segments.
M.ORDER = {"cluster", "mma", "wgmma", "wgstream", "rmma", "grid"}

-- The model's segments, layer l's weight W_l^T named w<l>t and its bias
-- b<l>.  Beyond the seed: W1's conditioning columns transposed, w1c
-- ([C][H], the conditioning kernel's), and with sin time, in place of the
-- t column, b1_stage: for every stage time t of the run (stage i of step
-- k at row k * stages + i), b1 + W1[:, t columns] tau(t) (fp64, rounded).
function M.model(spec, stages)
  local D, H = spec.dim, spec.hidden
  if not spec.seed then return M.family_model(spec, stages) end
  local out = {
    {name = "w1t", count = D * H, what = "W1[:, :D] transposed: [D][H]"},
    {name = "w1_time", count = H, what = "W1[:, D], the t column"},
    {name = "b1", count = H, what = "bias of layer 1"},
    {name = "w2t", count = H * H, what = "W2 transposed: [H][H]"},
    {name = "b2", count = H, what = "bias of layer 2"},
    {name = "w3t", count = H * D, what = "W3 transposed: [H][D]"},
    {name = "b3", count = D, what = "bias of layer 3"},
  }
  for _, s in ipairs(out) do s.owner = "model" end
  return out
end

function M.family_model(spec, stages)
  local D, H, L, C = spec.dim, spec.hidden, spec.layers, spec.cond
  local out = {{name = "w1t", count = D * H, what = "W1's x columns transposed: [D][H]"}}
  if spec.time.features == 0 then
    out[#out + 1] = {name = "w1_time", count = H, what = "W1's t column"}
  end
  out[#out + 1] = {name = "b1", count = H, what = "bias of layer 1"}
  for l = 2, L do
    local inputs, outputs = lib.layer_shape(spec, l)
    out[#out + 1] = {name = "w" .. l .. "t", count = inputs * outputs,
                     what = string.format("W%d transposed: [%d][%d]", l, inputs, outputs)}
    out[#out + 1] = {name = "b" .. l, count = outputs, what = "bias of layer " .. l}
  end
  if C > 0 then
    out[#out + 1] = {name = "w1c", count = C * H, what = "W1's conditioning columns transposed: [C][H]"}
  end
  if spec.time.features > 0 then
    out[#out + 1] = {name = "b1_stage", count = spec.steps * stages * H,
                     what = "b1 + W1[:, t columns] tau(t) at each stage time: [S * stages][H]"}
  end
  for _, s in ipairs(out) do s.owner = "model" end
  return out
end

-- The layout: the model's segments, then copies[owner] (lists of
-- segments) in ORDER; returns the segments with their float offsets, and
-- the buffer's floats.  The plan packs once for all its variants (the
-- runtime's sampler serves every batch); the layout of some variants
-- alone (a file for one batch) is this over the copies they read (each
-- variant's `reads`; a cluster variant's own thread-major copy).
function M.layout(spec, copies, stages)
  local segments = M.model(spec, stages)
  for _, owner in ipairs(M.ORDER) do
    for _, s in ipairs(copies[owner] or {}) do segments[#segments + 1] = s end
  end
  local offset = 0
  for _, s in ipairs(segments) do
    s.offset = offset
    offset = offset + lib.round_up(s.count, 4)
  end
  return segments, offset
end

return M
