-- launch.lua: how each variant is launched.  One description a variant,
-- which the host launcher of the generated file (launcher.cut) and the
-- runtime (runtime/sampler.c) both follow:
--   block_threads       blockDim.x (blockDim.y = .z = 1)
--   rows_per_block      samples a block, or a cluster where cluster_blocks > 1
--   cluster_blocks      thread-block cluster size (1: none)
--   grid_blocks_per_sm  0: grid.x = ceil(batch / rows_per_block) * cluster_blocks;
--                       > 0: a persistent grid of this many blocks a SM
--                       (grid.x = SMs x it), launched cooperatively
--   cooperative         the persistent grids: every block resident at once
--                       (they meet at grid barriers); such launches use the
--                       scratch area in params and must not overlap
--   fallback            for a cooperative variant, the index (1-based, in
--                       plan.variants) of the variant that serves its batch
--                       where the cooperative launch is refused (fewer SMs
--                       free than the device has: MPS, green contexts): the
--                       first that is not cooperative; 0 for the others
--   shared_bytes        dynamic shared memory a block (an opt-in above 48 KB)
--   nonportable_cluster clusters of more than 8 blocks (an opt-in)
-- with the batches it serves, [min_batch, max_batch] (-1: no end), the
-- kernel's symbol and the packing kernel's (pack_symbol, pack_threads).

local M = {}

function M.describe(variants)
  local fallback = 0
  for i, v in ipairs(variants) do
    if v.grid_blocks_per_sm == 0 then fallback = i break end
  end
  for _, v in ipairs(variants) do
    v.cooperative = v.grid_blocks_per_sm > 0
    v.fallback = v.cooperative and fallback or 0
    v.nonportable_cluster = v.cluster_blocks > 8
    if v.cooperative and fallback == 0 then
      refuse(string.format("%s is a persistent grid, and no variant of the plan that is not one "
                           .. "serves its batches where its launch is refused (tune)", v.strategy))
    end
  end
end

return M
