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

function M.model(spec)
  local D, H = spec.dim, spec.hidden
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

-- The layout: the model's segments, then copies[owner] (lists of
-- segments) in ORDER; returns the segments with their float offsets, and
-- the buffer's floats.  The plan packs once for all its variants (the
-- runtime's sampler serves every batch); the layout of some variants
-- alone (a file for one batch) is this over the copies they read (each
-- variant's `reads`; a cluster variant's own thread-major copy).
function M.layout(spec, copies)
  local segments = M.model(spec)
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
