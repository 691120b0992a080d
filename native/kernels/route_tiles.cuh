// How a block of threads of a route kernel (kvt_gather_routes, kvt_block_checksum_routes) finds its tile. A
// launch covers `tiles_per_item` tiles for each item (a block pair, or a block) of its list; a route's tiles
// start at its first_tile among one item's, each rows_per_tile rows (rows of at most a tile) or chunk_bytes of
// one longer row (chunks_per_row chunks each); the host tiles them alike (kvt_route_tiling_of).
#ifndef KVT_ROUTE_TILES_CUH
#define KVT_ROUTE_TILES_CUH

struct kvt_route_tile {
    unsigned long long item, at; // the item's index in the list; where in its row the tile starts
    unsigned int route, row, rows; // the route's index; the first row of the tile and how many
};

// Tile t of the launch over `routes` (route_count of them, by first_tile).
template <typename Route>
__device__ __forceinline__ kvt_route_tile kvt_find_route_tile(const Route *routes, unsigned int route_count,
                                                              unsigned long long t, unsigned long long tiles_per_item) {
    kvt_route_tile found;
    found.item = t / tiles_per_item;
    const unsigned long long tile = t - found.item * tiles_per_item;
    unsigned int low = 0, high = route_count; // the last route whose first tile is at or before `tile`
    while (high - low > 1) {
        const unsigned int middle = low + (high - low) / 2;
        if (routes[middle].first_tile <= tile)
            low = middle;
        else
            high = middle;
    }
    const Route &route = routes[low];
    const unsigned long long in_route = tile - route.first_tile, group = in_route / route.chunks_per_row;
    found.route = low;
    found.at = (in_route - group * route.chunks_per_row) * route.chunk_bytes;
    found.row = (unsigned int)group * route.rows_per_tile;
    found.rows = route.rows - found.row < route.rows_per_tile ? route.rows - found.row : route.rows_per_tile;
    return found;
}

#endif
