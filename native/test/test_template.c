/* Transfer templates: a post by block lists moves exactly the bytes of the explicit descriptors the
 * template stands for (random routes with 2-D segments, both directions, both paths over UCX, from another
 * process); routes out of bounds and block indices past the limits are refused, moving nothing; a template
 * dies with its peer generation; a cancel in the middle of the expansion ends the operation. */
#include "harness.h"

#define MAX_ROUTES 6u
#define DESTINATION_BLOCKS 48u
#define SOURCE_BLOCKS 40u
#define SOURCE_LENGTH (1u << 20)

/* Routes in source/destination terms; destination segments never overlap (each region is laid out block by
 * block, the routes on it side by side), source segments may. */
typedef struct {
    uint32_t routes;
    uint32_t source_bank[MAX_ROUTES], destination_bank[MAX_ROUTES], rows[MAX_ROUTES];
    uint64_t source_base[MAX_ROUTES], destination_base[MAX_ROUTES];
    uint64_t source_block_stride[MAX_ROUTES], destination_block_stride[MAX_ROUTES];
    uint64_t row_bytes[MAX_ROUTES], source_row_stride[MAX_ROUTES], destination_row_stride[MAX_ROUTES];
    uint64_t destination_length; /* of each of the two destination regions */
} geometry;

static uint64_t rng_state;
static uint32_t rnd(uint32_t bound) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33) % bound;
}

static void random_geometry(geometry *g, uint32_t source_banks) {
    memset(g, 0, sizeof *g);
    g->routes = 1 + rnd(MAX_ROUTES);
    bool one_bank = rnd(3) == 0; /* every route on one region each side: blocks outermost */
    uint64_t stride[2] = {0, 0};
    for (uint32_t r = 0; r < g->routes; r++) {
        g->rows[r] = 1 + rnd(4);
        g->row_bytes[r] = 8u * (1 + rnd(64));
        g->destination_row_stride[r] = g->rows[r] == 1 ? g->row_bytes[r] : g->row_bytes[r] + 8u * rnd(3);
        g->source_row_stride[r] = 8u * rnd(80);
        g->destination_bank[r] = one_bank ? 0 : rnd(2);
        g->source_bank[r] = one_bank || source_banks == 1 ? 0 : rnd(source_banks);
        uint32_t bank = g->destination_bank[r];
        g->destination_base[r] = stride[bank];
        stride[bank] += (uint64_t)(g->rows[r] - 1) * g->destination_row_stride[r] + g->row_bytes[r] + 8u * rnd(2);
        g->source_base[r] = 8u * rnd(64);
        g->source_block_stride[r] = 8u * (1 + rnd(128));
    }
    for (uint32_t r = 0; r < g->routes; r++) g->destination_block_stride[r] = stride[g->destination_bank[r]];
    uint64_t longest = stride[0] > stride[1] ? stride[0] : stride[1];
    g->destination_length = longest * DESTINATION_BLOCKS;
}

/* `count` block pairs: distinct destination blocks, any source blocks. */
static void random_blocks(uint32_t count, uint32_t *source, uint32_t *destination) {
    uint32_t order[DESTINATION_BLOCKS];
    for (uint32_t i = 0; i < DESTINATION_BLOCKS; i++) order[i] = i;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t j = i + rnd(DESTINATION_BLOCKS - i), t = order[i];
        order[i] = order[j];
        order[j] = t;
        destination[i] = order[i];
        source[i] = rnd(SOURCE_BLOCKS);
    }
}

/* Where each side lives for one post: READ has the destination local, WRITE remote. */
typedef struct {
    uint32_t agent, peer;
    uint64_t generation;
    uint32_t direction;
    uint32_t source_regions[2], source_count;          /* region ids of the source side */
    uint32_t template_regions[2], explicit_regions[2]; /* the two destination copies */
} placement;

static uint32_t register_template(const placement *p, const geometry *g) {
    bool read = p->direction == KVT_XFER_READ;
    uint32_t template_id = 0;
    const kvt_template_routes routes = {
        .route_count = g->routes,
        .local_index = read ? g->destination_bank : g->source_bank,
        .remote_index = read ? g->source_bank : g->destination_bank,
        .local_base = read ? g->destination_base : g->source_base,
        .remote_base = read ? g->source_base : g->destination_base,
        .local_block_stride = read ? g->destination_block_stride : g->source_block_stride,
        .remote_block_stride = read ? g->source_block_stride : g->destination_block_stride,
        .rows = g->rows,
        .row_bytes = g->row_bytes,
        .local_row_stride = read ? g->destination_row_stride : g->source_row_stride,
        .remote_row_stride = read ? g->source_row_stride : g->destination_row_stride,
        .local_region_count = read ? 2 : p->source_count,
        .local_regions = read ? p->template_regions : p->source_regions,
        .remote_region_count = read ? p->source_count : 2,
        .remote_regions = read ? p->source_regions : p->template_regions,
        .local_block_limit = read ? DESTINATION_BLOCKS : SOURCE_BLOCKS,
        .remote_block_limit = read ? SOURCE_BLOCKS : DESTINATION_BLOCKS};
    CHECK_OK(kvt_template_register(p->agent, p->peer, p->generation, &routes, &template_id));
    return template_id;
}

/* The explicit descriptors of the template and blocks, one per row, into the other destination copy. */
static uint64_t post_explicit(const placement *p, const geometry *g, uint32_t count, const uint32_t *source,
                              const uint32_t *destination) {
    uint32_t pieces = 0;
    for (uint32_t r = 0; r < g->routes; r++) pieces += g->rows[r] * count;
    uint32_t *source_index = malloc(pieces * sizeof *source_index),
             *destination_index = malloc(pieces * sizeof *destination_index);
    uint64_t *source_offset = malloc(pieces * sizeof *source_offset),
             *destination_offset = malloc(pieces * sizeof *destination_offset),
             *length = malloc(pieces * sizeof *length);
    CHECK(source_index && destination_index && source_offset && destination_offset && length, "out of memory");
    uint32_t n = 0;
    for (uint32_t r = 0; r < g->routes; r++)
        for (uint32_t b = 0; b < count; b++)
            for (uint32_t k = 0; k < g->rows[r]; k++, n++) {
                source_index[n] = g->source_bank[r];
                destination_index[n] = g->destination_bank[r];
                source_offset[n] =
                    g->source_base[r] + source[b] * g->source_block_stride[r] + k * g->source_row_stride[r];
                destination_offset[n] = g->destination_base[r] + destination[b] * g->destination_block_stride[r] +
                                        k * g->destination_row_stride[r];
                length[n] = g->row_bytes[r];
            }
    bool read = p->direction == KVT_XFER_READ;
    uint64_t op = 0;
    CHECK_OK(kvt_xfer_post(p->agent, p->direction, p->peer, p->generation, pieces,
                           read ? destination_index : source_index, read ? destination_offset : source_offset,
                           read ? source_index : destination_index, read ? source_offset : destination_offset, length,
                           read ? 2 : p->source_count, read ? p->explicit_regions : p->source_regions,
                           read ? p->source_count : 2, read ? p->source_regions : p->explicit_regions, NULL, 0, &op));
    free(source_index);
    free(destination_index);
    free(source_offset);
    free(destination_offset);
    free(length);
    return op;
}

static uint64_t block_bytes(const geometry *g) {
    uint64_t bytes = 0;
    for (uint32_t r = 0; r < g->routes; r++) bytes += g->rows[r] * g->row_bytes[r];
    return bytes;
}

/* Destination copies: two regions for the template post, two for the explicit one, all zeroed. */
typedef struct {
    uint32_t agent;
    uint32_t template_regions[2], explicit_regions[2];
    uint8_t *template_memory[2], *explicit_memory[2];
    uint64_t length;
} destination_copies;

static void copies_open(destination_copies *c, uint32_t agent, uint64_t length) {
    c->agent = agent;
    c->length = length;
    for (int k = 0; k < 2; k++) {
        c->template_regions[k] = alloc_region(agent, length, &c->template_memory[k]);
        c->explicit_regions[k] = alloc_region(agent, length, &c->explicit_memory[k]);
        memset(c->template_memory[k], 0, length);
        memset(c->explicit_memory[k], 0, length);
    }
}

static void copies_close(destination_copies *c) {
    for (int k = 0; k < 2; k++) {
        free_region(c->agent, c->template_regions[k], c->template_memory[k]);
        free_region(c->agent, c->explicit_regions[k], c->explicit_memory[k]);
    }
}

static uint32_t rounds(void) { return test_under_valgrind ? 3u : 24u; }

/* One geometry: register, post by blocks and explicitly, compare the copies; `copies` sized for it. */
static void run_geometry(placement *p, const geometry *g, destination_copies *copies) {
    memcpy(p->template_regions, copies->template_regions, sizeof p->template_regions);
    memcpy(p->explicit_regions, copies->explicit_regions, sizeof p->explicit_regions);
    uint32_t count = 1 + rnd(test_under_valgrind ? 8 : DESTINATION_BLOCKS);
    uint32_t source[DESTINATION_BLOCKS], destination[DESTINATION_BLOCKS];
    random_blocks(count, source, destination);
    uint32_t template_id = register_template(p, g);
    bool read = p->direction == KVT_XFER_READ;
    uint64_t by_blocks = 0, explicit_op, done = 0;
    CHECK_OK(kvt_xfer_post_blocks(p->agent, template_id, p->direction, count, read ? destination : source,
                                  read ? source : destination, NULL, 0, &by_blocks));
    explicit_op = post_explicit(p, g, count, source, destination);
    CHECK_OK(wait_op(p->agent, by_blocks, &done));
    CHECK(done == count * block_bytes(g), "template post moved %llu bytes, expected %llu", (unsigned long long)done,
          (unsigned long long)(count * block_bytes(g)));
    uint64_t total = 0;
    CHECK_OK(kvt_xfer_status(p->agent, by_blocks, NULL, NULL, &total));
    CHECK(total == done, "bytes total %llu", (unsigned long long)total);
    CHECK_OK(wait_op(p->agent, explicit_op, &done));
    CHECK_OK(kvt_xfer_release(p->agent, by_blocks));
    CHECK_OK(kvt_xfer_release(p->agent, explicit_op));
    CHECK_OK(kvt_template_release(p->agent, template_id));
    bool moved = false;
    for (int k = 0; k < 2; k++) {
        CHECK(memcmp(copies->template_memory[k], copies->explicit_memory[k], g->destination_length) == 0,
              "destination region %d differs between the template post and the explicit post (%u routes, %u blocks)", k,
              g->routes, count);
        for (uint64_t i = 0; i < g->destination_length && !moved; i++) moved = copies->template_memory[k][i] != 0;
        memset(copies->template_memory[k], 0, copies->length);
        memset(copies->explicit_memory[k], 0, copies->length);
    }
    CHECK(moved, "nothing landed in the destination");
}

/* The longest destination region any geometry of the generator asks for. */
#define LONGEST_DESTINATION ((uint64_t)MAX_ROUTES * (3u * (512u + 16u) + 512u + 8u) * DESTINATION_BLOCKS)

static void source_regions_open(uint32_t agent, uint32_t ids[2], uint8_t *memory[2]) {
    for (int k = 0; k < 2; k++) {
        ids[k] = alloc_region(agent, SOURCE_LENGTH, &memory[k]);
        fill_pattern(memory[k], SOURCE_LENGTH, 30u + (uint64_t)k);
    }
}

/* Both directions between two agents of this process (UCX: through the banks' shared mapping). */
static void template_post_equals_explicit_post(void) {
    rng_state = 0x5eed;
    uint32_t near = make_agent("template-near"), far = make_agent("template-far");
    uint8_t *near_source[2], *far_source[2];
    uint32_t near_source_ids[2], far_source_ids[2];
    source_regions_open(near, near_source_ids, near_source);
    source_regions_open(far, far_source_ids, far_source);
    destination_copies near_copies, far_copies;
    copies_open(&near_copies, near, LONGEST_DESTINATION);
    copies_open(&far_copies, far, LONGEST_DESTINATION);
    uint64_t generation = 0;
    uint32_t peer = load_peer(near, far, &generation);
    for (uint32_t direction = KVT_XFER_READ; direction <= KVT_XFER_WRITE; direction++) {
        placement p = {
            .agent = near, .peer = peer, .generation = generation, .direction = direction, .source_count = 2};
        memcpy(p.source_regions, direction == KVT_XFER_READ ? far_source_ids : near_source_ids,
               sizeof p.source_regions);
        for (uint32_t round = 0; round < rounds(); round++) {
            geometry g;
            random_geometry(&g, 2);
            run_geometry(&p, &g, direction == KVT_XFER_READ ? &near_copies : &far_copies);
        }
    }
    CHECK_OK(kvt_peer_unload(near, peer));
    copies_close(&near_copies);
    copies_close(&far_copies);
    for (int k = 0; k < 2; k++) {
        free_region(near, near_source_ids[k], near_source[k]);
        free_region(far, far_source_ids[k], far_source[k]);
    }
    CHECK_OK(kvt_agent_destroy(near));
    CHECK_OK(kvt_agent_destroy(far));
}

/* READ from a source process over UCX: its kvt_mem_alloc bank is copied directly through the shared mapping,
 * its caller memory (malloc) moves with ucp_get_nbx; both equal the explicit post. */
static void template_post_from_source_process_equals_explicit_post(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "another process is reached through UCX only");
    rng_state = 0xfeed;
    for (int caller_memory = 0; caller_memory <= 1; caller_memory++) {
        source_options options = {.length = SOURCE_LENGTH, .caller_memory = caller_memory, .seed = 44};
        source_process source;
        CHECK(source_spawn(&options, &source), "spawn the source");
        uint32_t reader = make_agent("template-reader");
        destination_copies copies;
        copies_open(&copies, reader, LONGEST_DESTINATION);
        placement p = {.agent = reader, .direction = KVT_XFER_READ, .source_count = 1, .source_regions = {1}};
        CHECK_OK(kvt_peer_load(reader, source.blob, source.length, &p.peer, &p.generation));
        CHECK(peer_transport_mentions(reader, p.peer, "copied directly") == !caller_memory,
              "caller memory %d: the path is not the one expected", caller_memory);
        for (uint32_t round = 0; round < rounds(); round++) {
            geometry g;
            random_geometry(&g, 1);
            run_geometry(&p, &g, &copies);
        }
        source_end(&source);
        CHECK_OK(kvt_peer_unload(reader, p.peer));
        copies_close(&copies);
        CHECK_OK(kvt_agent_destroy(reader));
    }
}

/* Two agents, one 64 KiB region each, the reader's peer loaded: the fixture of the refusal cases. */
typedef struct {
    uint32_t reader, source, reader_region, source_region, peer;
    uint8_t *reader_memory, *source_memory;
    uint64_t generation;
} small_pair;

#define SMALL 65536u

static void small_open(small_pair *s) {
    s->reader = make_agent("template-small-reader");
    s->source = make_agent("template-small-source");
    s->reader_region = alloc_region(s->reader, SMALL, &s->reader_memory);
    s->source_region = alloc_region(s->source, SMALL, &s->source_memory);
    fill_pattern(s->source_memory, SMALL, 5);
    memset(s->reader_memory, 0, SMALL);
    s->peer = load_peer(s->reader, s->source, &s->generation);
}

static void small_close(small_pair *s) {
    CHECK_OK(kvt_peer_unload(s->reader, s->peer));
    free_region(s->reader, s->reader_region, s->reader_memory);
    free_region(s->source, s->source_region, s->source_memory);
    CHECK_OK(kvt_agent_destroy(s->reader));
    CHECK_OK(kvt_agent_destroy(s->source));
}

/* Routes of `piece` bytes per block, 16 blocks each side, one route per 4 KiB block slice (as a 2-D
 * segment of 4 rows when `rows` is 4). */
typedef struct {
    uint32_t local_index[2], remote_index[2], rows[2];
    uint64_t local_base[2], remote_base[2], local_block_stride[2], remote_block_stride[2];
    uint64_t row_bytes[2], local_row_stride[2], remote_row_stride[2];
    uint32_t local_limit, remote_limit;
} small_routes;

static small_routes small_template(void) {
    /* Route 0: 4 rows of 512 B (a 2-D segment that happens to be contiguous) per 4 KiB block; route 1: the 2 KiB behind it. */
    small_routes t = {.rows = {4, 1},
                      .local_base = {0, 2048},
                      .remote_base = {0, 2048},
                      .local_block_stride = {4096, 4096},
                      .remote_block_stride = {4096, 4096},
                      .row_bytes = {512, 2048},
                      .local_row_stride = {512, 0},
                      .remote_row_stride = {512, 0},
                      .local_limit = SMALL / 4096,
                      .remote_limit = SMALL / 4096};
    return t;
}

static kvt_status register_small(const small_pair *s, const small_routes *t, uint32_t *out) {
    const kvt_template_routes routes = {.route_count = 2,
                                        .local_index = t->local_index,
                                        .remote_index = t->remote_index,
                                        .local_base = t->local_base,
                                        .remote_base = t->remote_base,
                                        .local_block_stride = t->local_block_stride,
                                        .remote_block_stride = t->remote_block_stride,
                                        .rows = t->rows,
                                        .row_bytes = t->row_bytes,
                                        .local_row_stride = t->local_row_stride,
                                        .remote_row_stride = t->remote_row_stride,
                                        .local_region_count = 1,
                                        .local_regions = &s->reader_region,
                                        .remote_region_count = 1,
                                        .remote_regions = &s->source_region,
                                        .local_block_limit = t->local_limit,
                                        .remote_block_limit = t->remote_limit};
    return kvt_template_register(s->reader, s->peer, s->generation, &routes, out);
}

static void routes_out_of_bounds_are_refused(void) {
    small_pair s;
    small_open(&s);
    uint32_t id = 77;
    small_routes t = small_template();
    t.local_limit = SMALL / 4096 + 1; /* the largest local block ends 4 KiB past the region */
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, register_small(&s, &t, &id));
    CHECK_DETAIL("route 0: local region");
    CHECK_DETAIL("exceeds region length 65536");
    t = small_template();
    t.remote_row_stride[0] = 8192; /* rows of route 0 reach past the peer's region at the last block */
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, register_small(&s, &t, &id));
    CHECK_DETAIL("route 0: remote region");
    CHECK_DETAIL("of peer 'template-small-source'");
    t = small_template();
    t.remote_base[1] = 4096 - 2047; /* route 1 one byte past the end at the last block */
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, register_small(&s, &t, &id));
    CHECK_DETAIL("route 1: remote region");
    t = small_template();
    t.local_block_stride[1] = UINT64_MAX / 2; /* overflows 64 bits */
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, register_small(&s, &t, &id));
    CHECK_DETAIL("overflows past region length");
    t = small_template();
    t.rows[1] = 0;
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, register_small(&s, &t, &id));
    CHECK_DETAIL("route 1: 0 rows");
    t = small_template();
    t.remote_index[1] = 1;
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, register_small(&s, &t, &id));
    CHECK_DETAIL("route 1: local index 0 (table 1) or remote index 1 (table 1)");
    CHECK(id == 77, "a refused template wrote its id");
    t = small_template();
    CHECK_OK(register_small(&s, &t, &id)); /* the exact fit is accepted */
    CHECK_OK(kvt_template_release(s.reader, id));
    small_close(&s);
}

typedef struct {
    uint32_t agent, length;
    uint8_t data[KVT_MAX_NOTIFICATION];
} received;

static bool notification_received(void *context) {
    received *r = context;
    char sender[KVT_MAX_NAME + 1];
    uint32_t got = 0;
    CHECK_OK(kvt_notify_poll(r->agent, sender, sizeof sender, r->data, sizeof r->data, &r->length, &got));
    return got == 1;
}

static void blocks_past_the_limits_are_refused(void) {
    small_pair s;
    small_open(&s);
    small_routes t = small_template();
    t.local_limit = 8;
    uint32_t id = 0;
    CHECK_OK(register_small(&s, &t, &id));
    uint32_t local[4] = {0, 1, 8, 2}, remote[4] = {3, 2, 1, 16};
    uint64_t op = 0;
    CHECK_STATUS(KVT_ERR_INVALID_PARAM,
                 kvt_xfer_post_blocks(s.reader, id, KVT_XFER_READ, 4, local, remote, NULL, 0, &op));
    CHECK_DETAIL("local_blocks[2] = 8 >= limit 8");
    local[2] = 7;
    CHECK_STATUS(KVT_ERR_INVALID_PARAM,
                 kvt_xfer_post_blocks(s.reader, id, KVT_XFER_READ, 4, local, remote, NULL, 0, &op));
    CHECK_DETAIL("remote_blocks[3] = 16 >= limit 16");
    CHECK_STATUS(KVT_ERR_INVALID_PARAM,
                 kvt_xfer_post_blocks(s.reader, id, KVT_XFER_READ, 0, local, remote, NULL, 0, &op));
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_xfer_post_blocks(s.reader, id, 2, 4, local, remote, NULL, 0, &op));
    CHECK_STATUS(KVT_ERR_NOT_FOUND,
                 kvt_xfer_post_blocks(s.reader, id + 1, KVT_XFER_READ, 4, local, remote, NULL, 0, &op));
    CHECK(counter(s.reader, KVT_COUNTER_OPERATIONS_POSTED) == 0, "a refused post was counted as posted");
    for (uint64_t i = 0; i < SMALL; i++)
        CHECK(s.reader_memory[i] == 0, "a refused post moved byte %llu", (unsigned long long)i);
    remote[3] = 15;
    CHECK_OK(kvt_xfer_post_blocks(s.reader, id, KVT_XFER_READ, 4, local, remote, (const uint8_t *)"done", 4, &op));
    uint64_t done = 0;
    CHECK_OK(wait_op(s.reader, op, &done));
    CHECK(done == 4u * 4096u, "moved %llu bytes", (unsigned long long)done);
    for (uint32_t i = 0; i < 4; i++)
        CHECK(memcmp(s.reader_memory + local[i] * 4096u, s.source_memory + remote[i] * 4096u, 4096) == 0,
              "block pair %u differs", i);
    CHECK_OK(kvt_xfer_release(s.reader, op));
    received r = {.agent = s.source};
    wait_until(s.source, notification_received, &r, "the post's notification", WAIT_DEADLINE_MS);
    CHECK(r.length == 4 && memcmp(r.data, "done", 4) == 0, "the notification carries the post's bytes");
    CHECK_OK(kvt_template_release(s.reader, id));
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_template_release(s.reader, id));
    small_close(&s);
}

static void template_dies_with_its_peer_generation(void) {
    small_pair s;
    small_open(&s);
    small_routes t = small_template();
    uint32_t id = 0, local[1] = {1}, remote[1] = {2};
    uint64_t op = 0;
    CHECK_OK(register_small(&s, &t, &id));
    CHECK_OK(kvt_peer_invalidate(s.reader, s.peer));
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_xfer_post_blocks(s.reader, id, KVT_XFER_READ, 1, local, remote, NULL, 0, &op));
    CHECK_DETAIL("is stale");
    uint64_t old_generation = s.generation;
    s.peer = load_peer(s.reader, s.source, &s.generation); /* a new generation: the template stays dead */
    CHECK(s.generation > old_generation, "the reload bumped the generation");
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_xfer_post_blocks(s.reader, id, KVT_XFER_READ, 1, local, remote, NULL, 0, &op));
    uint32_t stale = 0;
    uint64_t current = s.generation;
    s.generation = old_generation;
    CHECK_STATUS(KVT_ERR_NOT_FOUND, register_small(&s, &t, &stale));
    s.generation = current;
    CHECK_OK(kvt_template_release(s.reader, id));
    CHECK_OK(register_small(&s, &t, &id)); /* against the current generation it works again */
    CHECK_OK(kvt_xfer_post_blocks(s.reader, id, KVT_XFER_READ, 1, local, remote, NULL, 0, &op));
    CHECK_OK(wait_op(s.reader, op, NULL));
    CHECK_OK(kvt_xfer_release(s.reader, op));
    CHECK_OK(kvt_template_release(s.reader, id));
    small_close(&s);
}

typedef struct {
    uint32_t agent;
    uint64_t op, bytes;
} progress_watch;

static bool bytes_reached(void *context) {
    progress_watch *w = context;
    int32_t status = KVT_IN_PROGRESS;
    uint64_t done = 0;
    CHECK_OK(kvt_xfer_status(w->agent, w->op, &status, &done, NULL));
    CHECK(status == KVT_IN_PROGRESS, "the post ended %s while held back", kvt_status_name(status));
    return done >= w->bytes;
}

/* UCX holds a post back after its first bytes (kvt_fault_pause_issue); cancelled there, in the middle of the
 * expansion (many windows of unmergeable pieces left), it ends CANCELED with nothing in flight. A template
 * released meanwhile stays alive for the operations posted on it. */
static void cancel_mid_expansion_ends_terminal(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "only UCX can hold issuing back (kvt_fault_pause_issue)");
    small_pair s;
    small_open(&s);
    small_routes t = small_template();
    t.rows[0] = 8;
    t.row_bytes[0] = 64;
    t.local_row_stride[0] = 128; /* unmergeable rows: 8 pieces per block plus route 1 */
    t.remote_row_stride[0] = 128;
    uint32_t id = 0;
    CHECK_OK(register_small(&s, &t, &id));
    enum { PAIRS = 4096 };
    uint32_t *local = malloc(PAIRS * sizeof *local), *remote = malloc(PAIRS * sizeof *remote);
    CHECK(local && remote, "out of memory");
    for (uint32_t i = 0; i < PAIRS; i++) {
        local[i] = (PAIRS - 1 - i) % 16; /* the local blocks repeat: a READ rewrites them, harmless here */
        remote[i] = i % 16;
    }
    CHECK_OK(kvt_fault_pause_issue(s.reader, 4096));
    progress_watch w = {.agent = s.reader, .bytes = 4096};
    CHECK_OK(kvt_xfer_post_blocks(s.reader, id, KVT_XFER_READ, PAIRS, local, remote, NULL, 0, &w.op));
    free(local);
    free(remote);
    CHECK_OK(kvt_template_release(s.reader, id));
    wait_until(s.reader, bytes_reached, &w, "the first bytes of the held-back post", WAIT_DEADLINE_MS);
    CHECK_STATUS(KVT_IN_PROGRESS, kvt_xfer_cancel(s.reader, w.op));
    uint64_t done = 0;
    CHECK_STATUS(KVT_ERR_CANCELED, wait_op(s.reader, w.op, &done));
    CHECK(done >= 4096 && done < (uint64_t)PAIRS * (8 * 64 + 2048), "cancelled after %llu bytes",
          (unsigned long long)done);
    CHECK(counter(s.reader, KVT_COUNTER_INFLIGHT_REQUESTS) == 0, "requests left in flight");
    CHECK_OK(kvt_xfer_release(s.reader, w.op));
    CHECK_OK(kvt_fault_clear(s.reader));
    small_close(&s);
}

/* A template's local region deregistered after registration: posting names it, NOT_FOUND. The template is
 * left registered: destroying the agent releases it. */
static void deregistered_local_region_is_not_found(void) {
    small_pair s;
    small_open(&s);
    small_routes t = small_template();
    uint32_t id = 0, local[1] = {0}, remote[1] = {0};
    uint64_t op = 0;
    CHECK_OK(register_small(&s, &t, &id));
    uint32_t region = s.reader_region;
    CHECK_OK(kvt_mem_deregister(s.reader, region));
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_xfer_post_blocks(s.reader, id, KVT_XFER_READ, 1, local, remote, NULL, 0, &op));
    CHECK_DETAIL("local region");
    CHECK_DETAIL("is no longer registered");
    CHECK_OK(
        kvt_mem_register(s.reader, (uint64_t)(uintptr_t)s.reader_memory, SMALL, KVT_MEM_DRAM, 0, &s.reader_region));
    small_close(&s);
}

/* The allocation fault (as for kvt_xfer_post): the refused post leaves no operation behind and the
 * template stays usable; the next post reads every byte. */
static void refused_allocation_leaves_nothing_behind(void) {
    small_pair s;
    small_open(&s);
    small_routes t = small_template();
    uint32_t id = 0, local[2] = {0, 3}, remote[2] = {5, 1};
    uint64_t op = 0;
    CHECK_OK(register_small(&s, &t, &id));
    CHECK_OK(kvt_fault_fail(s.reader, KVT_FAULT_ALLOCATION, 1, KVT_ERR_NO_MEMORY));
    CHECK_STATUS(KVT_ERR_NO_MEMORY, kvt_xfer_post_blocks(s.reader, id, KVT_XFER_READ, 2, local, remote, NULL, 0, &op));
    CHECK_DETAIL("injected fault (allocation)");
    CHECK(counter(s.reader, KVT_COUNTER_LIVE_OPERATIONS) == 0, "the refused post left no operation");
    CHECK_OK(kvt_xfer_post_blocks(s.reader, id, KVT_XFER_READ, 2, local, remote, NULL, 0, &op));
    uint64_t bytes = 0;
    CHECK_OK(wait_op(s.reader, op, &bytes));
    CHECK(bytes == 2 * 4096, "2 blocks of 4 KiB read (got %llu bytes)", (unsigned long long)bytes);
    for (uint32_t i = 0; i < 2; i++)
        CHECK(memcmp(s.reader_memory + local[i] * 4096, s.source_memory + remote[i] * 4096, 4096) == 0, "block %u read",
              i);
    CHECK_OK(kvt_xfer_release(s.reader, op));
    CHECK_OK(kvt_template_release(s.reader, id));
    small_close(&s);
}

TEST_MAIN("template", TEST(template_post_equals_explicit_post),
          TEST(template_post_from_source_process_equals_explicit_post), TEST(routes_out_of_bounds_are_refused),
          TEST(blocks_past_the_limits_are_refused), TEST(template_dies_with_its_peer_generation),
          TEST(cancel_mid_expansion_ends_terminal), TEST(deregistered_local_region_is_not_found),
          TEST(refused_allocation_leaves_nothing_behind))
