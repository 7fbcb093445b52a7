-- device.lua: the GPU a plan is for.  spec.device holds what the caller
-- knows of it (the runtime fills it from its device query); what it leaves
-- out is an H200's, but for the shared memory a block may take and
-- clusters, which default to what the target arch allows.  Fields (all
-- optional):
--   sms               streaming multiprocessors (an H200: 132)
--   shared_per_block  dynamic shared memory a block may opt in to, bytes
--                     (default by arch: 227 KB on sm_90 and sm_100, 163 KB
--                     on sm_80, 99 KB on the other sm_8x and sm_12x)
--   clusters          thread-block clusters (default: from sm_90)
--   clusters_at_once  {[blocks] = clusters resident at once} for clusters
--                     of 2, 4, 8 and 16 blocks of the cluster kernel (an
--                     H200: 48, 30, 8, 4; without it, those scaled by sms)

local M = {}

local H200_SMS = 132
local H200_CLUSTERS_AT_ONCE = {[2] = 48, [4] = 30, [8] = 8, [16] = 4}

-- Largest dynamic shared memory a block may opt in to, by compute capability.
local function shared_limit(arch)
  if arch >= 120 then return 99 * 1024 end  -- consumer Blackwell (sm_120, sm_121)
  if arch >= 90 then return 227 * 1024 end  -- Hopper, data-centre Blackwell
  if arch == 80 or arch == 87 then return 163 * 1024 end
  if arch >= 80 then return 99 * 1024 end
  return 64 * 1024
end

local function whole(field, value, lo, hi)
  if math.type(value) ~= "integer" or value < lo or value > hi then
    refuse(string.format("device: %s must be a whole number from %d to %d, not %s", field, lo, hi,
                         tostring(value)))
  end
  return value
end

function M.of(spec)
  local d = spec.device or {}
  if type(d) ~= "table" then refuse("device: expected a table of the GPU's figures") end
  -- Clusters at once: the H200's figures, scaled by the SM count where
  -- the caller gives one and not these (a GPU's GPCs are not in the
  -- driver's attributes; the ratio keeps each cluster size's share).
  local sms = d.sms ~= nil and whole("sms", d.sms, 1, 1 << 16) or H200_SMS
  local at_once = {}
  for blocks, n in pairs(H200_CLUSTERS_AT_ONCE) do
    at_once[blocks] = math.max(1, n * sms // H200_SMS)
  end
  if d.clusters_at_once ~= nil then
    if type(d.clusters_at_once) ~= "table" then refuse("device: clusters_at_once must be a table") end
    for blocks, n in pairs(d.clusters_at_once) do
      if not at_once[blocks] then
        refuse("device: clusters_at_once is for clusters of 2, 4, 8 and 16 blocks, not " .. tostring(blocks))
      end
      at_once[blocks] = whole("clusters_at_once[" .. blocks .. "]", n, 1, 1 << 16)
    end
  end
  local clusters = spec.arch >= 90
  if d.clusters ~= nil then
    if type(d.clusters) ~= "boolean" then refuse("device: clusters must be true or false") end
    clusters = d.clusters and clusters
  end
  return {
    sms = sms,
    shared_per_block = d.shared_per_block ~= nil and whole("shared_per_block", d.shared_per_block, 0, 1 << 30)
        or shared_limit(spec.arch),
    clusters = clusters,
    clusters_at_once = at_once,
  }
end

-- The figures of spec.device that differ from what the planner assumes
-- without them, as the CLI's flags: {"--sms 66", ...}.  The generated
-- file's header names them, so that an H200's runtime writes the same
-- source as `flowgen` without flags (and the disk cache shares it).
function M.flags(spec)
  local d, out = spec.device or {}, {}
  if d.sms ~= nil and d.sms ~= H200_SMS then out[#out + 1] = "--sms " .. d.sms end
  if d.shared_per_block ~= nil and d.shared_per_block ~= shared_limit(spec.arch) then
    out[#out + 1] = "--shared-per-block " .. d.shared_per_block
  end
  return out
end

return M
